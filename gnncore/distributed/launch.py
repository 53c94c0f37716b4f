"""Starting ranks on this machine: a process group on 127.0.0.1, bounded in time.

:func:`spawn_local` runs ``fn(rank, world_size, *args)`` in ``world_size``
fresh processes (``spawn``, so nothing of the caller's state is shared) joined
by a ``torch.distributed`` process group over TCP on a free local port. It is
what the tests and small single-machine runs use; ``torchrun`` launches the
same ranks across machines. A rank that raises or dies makes the others stop
and the call raise, naming the rank; a collective that waits past ``timeout``
fails in its rank, and a run that outlives ``run_timeout`` is killed, so a
mismatched collective fails instead of hanging.
"""

from __future__ import annotations

import datetime
import multiprocessing as mp
import os
import queue
import socket
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from gnncore.errors import GnnCoreError


class RankFailed(GnnCoreError, RuntimeError):
    """A rank raised, died or did not finish in time; the message names it."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _rank_main(
    fn: Callable[..., Any],
    rank: int,
    world_size: int,
    init_method: str,
    backend: str,
    timeout: float,
    args: Sequence[Any],
    results: Any,
) -> None:
    import torch.distributed as dist

    try:
        dist.init_process_group(
            backend,
            init_method=init_method,
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=timeout),
        )
        try:
            value = fn(rank, world_size, *args)
        finally:
            dist.destroy_process_group()
        results.put((rank, True, value))
    except BaseException:
        results.put((rank, False, traceback.format_exc()))


def spawn_local(
    fn: Callable[..., Any],
    world_size: int,
    args: Sequence[Any] = (),
    backend: str = "gloo",
    timeout: float = 60.0,
    run_timeout: float = 600.0,
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` local ranks; return
    their results in rank order.

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

    Raises:
        RankFailed: A rank raised (its traceback follows the rank's name), exited
            without a result, or the run passed ``run_timeout``; the other ranks are
            terminated.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    init = f"tcp://127.0.0.1:{free_port()}"
    procs = [
        ctx.Process(
            target=_rank_main,
            args=(fn, rank, world_size, init, backend, timeout, tuple(args), results),
            daemon=True,
        )
        for rank in range(world_size)
    ]
    for proc in procs:
        proc.start()
    deadline = time.monotonic() + run_timeout
    done: dict[int, Any] = {}
    exited: set[int] = set()  # ranks seen gone without a result, given one more poll
    try:
        while len(done) < world_size:
            try:
                rank, ok, value = results.get(timeout=0.2)
            except queue.Empty:
                exited = _check_alive(procs, done, exited, deadline, run_timeout)
                continue
            if not ok:
                raise RankFailed(f"rank {rank} of {world_size} failed:\n{value}")
            done[rank] = value
        for proc in procs:
            proc.join(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        _stop(procs)
    return [done[rank] for rank in range(world_size)]


def _check_alive(
    procs: list[Any], done: dict[int, Any], exited: set[int], deadline: float, timeout: float
) -> set[int]:
    """Raise for a rank gone without a result at two polls in a row (its result
    may still be in the pipe at the first) or for a run past its deadline;
    returns the ranks gone at this poll."""
    gone = {r for r, p in enumerate(procs) if r not in done and p.exitcode is not None}
    lost = sorted(gone & exited)
    if lost:
        raise RankFailed(
            f"rank {lost[0]} of {len(procs)} exited with code {procs[lost[0]].exitcode} "
            "without a result"
        )
    if time.monotonic() > deadline:
        pending = [rank for rank in range(len(procs)) if rank not in done]
        raise RankFailed(f"ranks {pending} of {len(procs)} did not finish within {timeout:g} s")
    return gone


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
