"""Ranks started on this machine with :mod:`multiprocessing` (tests and small
single-machine runs): :func:`spawn_local`.

The ranks fork from :mod:`multiprocessing`'s fork server, which has imported
torch and PyG once (:mod:`~gnncore.distributed.launch.forked`); each takes the
launching process's environment, thread count and output first.

:func:`spawn_local` waits ``grace`` seconds after the first failure for the
others' statuses, so the rank that caused it is named
(:func:`~gnncore.distributed.launch.faults.blame`). A collective that waits
past ``timeout`` fails in its rank, and the run stops after ``run_timeout``,
so nothing hangs. The queue the ranks report through stays between this
launcher and its own children.
"""

from __future__ import annotations

import datetime
import os
import queue
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from gnncore.distributed.join import check_join, launch_token
from gnncore.distributed.launch.faults import (
    RankFailed,
    RankStatus,
    blame,
    has_failed,
    is_peer_loss,
    report,
)
from gnncore.distributed.launch.forked import Launcher, name_rank, rank_context, take_launcher
from gnncore.distributed.launch.net import LOCALHOST, master_store, pin_gloo_interface


def _rank_main(
    fn: Callable[..., Any],
    rank: int,
    world_size: int,
    address: tuple[str, int],
    backend: str,
    timeout: float,
    args: Sequence[Any],
    results: Any,
    token: str | None,
    launcher: Launcher,
) -> None:
    take_launcher(launcher)
    name_rank(rank)
    # lazy: torch loads in seconds; only the rank processes need it
    import torch.distributed as dist
    from torch.distributed import TCPStore

    try:
        pin_gloo_interface(address[0])
        delta = datetime.timedelta(seconds=timeout)
        store = TCPStore(address[0], address[1], world_size, False, delta)
        check_join(store, rank, world_size, token, timeout)
        dist.init_process_group(
            backend, store=store, rank=rank, world_size=world_size, timeout=delta
        )
        value = fn(rank, world_size, *args)
        dist.destroy_process_group()
        results.put((rank, True, value, False))
    except BaseException as exc:
        results.put((rank, False, report(exc), is_peer_loss(exc)))
        # Report and go: no teardown of a group whose peers may be gone.
        results.close()
        results.join_thread()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


def spawn_local(
    fn: Callable[..., Any],
    world_size: int,
    args: Sequence[Any] = (),
    backend: str = "gloo",
    timeout: float = 60.0,
    run_timeout: float = 600.0,
    grace: float = 3.0,
    join_token: str | None = None,
    cuda: bool = False,
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` local ranks (forked
    from the fork server, module docstring); return their results in rank order.

    Args:
        fn: A picklable (module-level) function. Return plain Python or NumPy
            values: a tensor would travel through shared memory that dies
            with the rank.
        world_size (int): Number of ranks (>= 1).
        args (Sequence): Extra arguments, pickled to every rank.
        backend (str): ``"gloo"`` (CPU) or ``"nccl"`` (CUDA). (default: ``"gloo"``)
        timeout (float): The process group's collective timeout in seconds:
            a rank waiting longer for its peers fails. (default: 60)
        run_timeout (float): Seconds the whole run may take, starting the
            processes included. (default: 600)
        grace (float): Seconds to wait after the first failure for the other
            ranks' statuses, so that the rank that caused it is named
            (:func:`blame`). (default: 3)
        join_token (str, optional): The token the ranks prove to each other at
            rendezvous (default: :func:`~gnncore.distributed.join.launch_token`,
            generated when the environment gives none).
        cuda (bool): The ranks use CUDA: they start as fresh interpreters, as
            all ranks do on a machine with a GPU
            (:func:`~gnncore.distributed.launch.forked.rank_start_method`).
            (default: ``False``)

    Raises:
        RankFailed: A rank raised (its traceback follows the rank's name), exited
            without a result, was refused at rendezvous, or the run passed
            ``run_timeout``; the other ranks are terminated.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    token = launch_token() if join_token is None else join_token
    ctx = rank_context(cuda)
    results = ctx.Queue()
    store, port = master_store(LOCALHOST, 0, world_size, timeout)
    address = (LOCALHOST, port)
    procs = [
        ctx.Process(
            target=_rank_main,
            args=(
                fn,
                rank,
                world_size,
                address,
                backend,
                timeout,
                tuple(args),
                results,
                token,
                Launcher.here(),
            ),
            daemon=True,
        )
        for rank in range(world_size)
    ]
    for proc in procs:
        proc.start()
    deadline = time.monotonic() + run_timeout
    statuses = [RankStatus(rank) for rank in range(world_size)]
    done: dict[int, Any] = {}
    try:
        failed_at: float | None = None
        while True:
            _drain(results, statuses, done, 0.1)
            now = time.monotonic()
            for status, proc in zip(statuses, procs, strict=True):
                status.exitcode = proc.exitcode
            failed = [s for s in statuses if has_failed(s)]
            if failed and failed_at is None:
                failed_at = now
            if failed_at is not None:
                settled = all(s.finished or s.exitcode is not None for s in statuses)
                if settled or now - failed_at > grace:
                    _drain(results, statuses, done, 0.2)  # results still in the pipe
                    raise blame([s for s in statuses if has_failed(s)], world_size)
            elif len(done) == world_size:
                break
            elif now > deadline:
                pending = [rank for rank in range(world_size) if rank not in done]
                raise RankFailed(
                    f"ranks {pending} of {world_size} did not finish within {run_timeout:g} s",
                    pending[0],
                )
        for proc in procs:
            proc.join(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        _stop(procs)
        del store
    return [done[rank] for rank in range(world_size)]


def _drain(results: Any, statuses: list[RankStatus], done: dict[int, Any], wait: float) -> None:
    """Take every result now in the queue (waiting up to ``wait`` for the first)."""
    block = True
    while True:
        try:
            item = results.get(timeout=wait) if block else results.get_nowait()
        except queue.Empty:
            return
        block = False
        rank, ok, value, peer_loss = item
        if ok:
            done[rank] = value
            statuses[rank].finished = True
        else:
            statuses[rank].error = value
            statuses[rank].peer_loss = peer_loss


def _stop(procs: list[Any]) -> None:
    """Terminate the ranks still running (SIGTERM, then SIGKILL)."""
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(timeout=5)
        if proc.is_alive() and proc.pid is not None:
            os.kill(proc.pid, 9)
            proc.join(timeout=5)


__all__ = ["spawn_local"]
