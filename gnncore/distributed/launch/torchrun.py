"""This machine's ranks started by torch's elastic launcher (what ``torchrun``
runs): :func:`elastic_run`, and :func:`rank_entry`, each rank's entry point.

Each rank forks from :mod:`multiprocessing`'s fork server, which has imported
torch and PyG once (:mod:`~gnncore.distributed.launch.forked`), takes the
launching process's environment and output, and reads ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` from what
the launcher set (:func:`rank_entry`). The elastic launcher sees every rank that
has exited when it polls (every 0.1 s), and a SIGKILLed rank is gone before
any peer can notice; a rank still running after ``run_timeout`` reports and
exits. The spec and result files pickled here stay between this launcher and
its own children on one machine; nothing a peer rank sends is unpickled.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import pickle
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gnncore.distributed.join import TOKEN_ENV, check_join, join_token, launch_token
from gnncore.distributed.launch.faults import (
    RankFailed,
    RankStatus,
    blame,
    has_failed,
    is_peer_loss,
    report,
)
from gnncore.distributed.launch.forked import (
    Launcher,
    name_rank,
    rank_context,
    rank_start_method,
    take_launcher,
)
from gnncore.distributed.launch.net import (
    LOCALHOST,
    free_port,
    master_store,
    pin_gloo_interface,
)

#: The rendezvous backend of :func:`elastic_run`: torch's static one, its store
#: listening on the master address only.
RENDEZVOUS_BACKEND = "gnncore-static"
_registered = False

#: Seconds a rank that lost a peer waits before it exits (torch's launcher polls
#: its ranks every 0.1 s and reports the first failure it sees).
PEER_LOSS_EXIT_DELAY = 1.0

#: What torch's elastic agent sets in each rank's environment (its documented
#: worker variables), kept over the launching process's environment.
ELASTIC_ENV = (
    "RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "WORLD_SIZE",
    "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR",
    "MASTER_PORT", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
)  # fmt: skip


def _register_rendezvous() -> None:
    global _registered
    if _registered:
        return
    # lazy: torch's elastic package loads in seconds; only this launcher needs it
    from torch.distributed.elastic.rendezvous import (
        RendezvousParameters,
        rendezvous_handler_registry,
    )
    from torch.distributed.elastic.rendezvous.static_tcp_rendezvous import (
        StaticTCPRendezvous,
        create_rdzv_handler,
    )

    class BoundStaticRendezvous(StaticTCPRendezvous):
        """torch's static rendezvous whose store (on node 0) listens on
        ``master_addr`` only, not on every interface."""

        def get_backend(self) -> str:
            return RENDEZVOUS_BACKEND

        def next_rendezvous(self) -> Any:
            if self._store is None and self.rank == 0:
                self._store, _ = master_store(
                    self.master_addr,
                    self.master_port,
                    self.world_size,
                    self.timeout.total_seconds(),
                )
            return super().next_rendezvous()

    def create(params: RendezvousParameters) -> Any:
        base = create_rdzv_handler(params)
        assert isinstance(base, StaticTCPRendezvous)
        return BoundStaticRendezvous(
            base.master_addr,
            base.master_port,
            base.rank,
            base.world_size,
            base.run_id,
            int(base.timeout.total_seconds()),
        )

    rendezvous_handler_registry.register(RENDEZVOUS_BACKEND, create)
    _registered = True


@dataclass(frozen=True)
class _EntrySpec:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    backend: str
    timeout: float
    run_timeout: float
    out_dir: str


def _status_file(out_dir: str | Path, rank: int, kind: str) -> Path:
    return Path(out_dir) / f"rank-{rank}.{kind}"


def rank_entry(spec_path: str, launcher: Launcher) -> None:
    """A rank started by :func:`elastic_run`: take the launching process's
    environment (what torch's agent set for this rank kept) and output, prove the join
    token (``GNNCORE_JOIN_TOKEN``) through the store at ``MASTER_ADDR:MASTER_PORT``
    and check its peers' (:func:`~gnncore.distributed.join.check_join`), join
    the group from ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``,
    run the function and write its result (or the error, and whether it was the
    loss of a peer) where the launcher reads it; exit at once on an error."""
    given = {
        key: value
        for key, value in os.environ.items()
        if key in ELASTIC_ENV or key.startswith("TORCHELASTIC_")
    }
    take_launcher(launcher, given)
    with open(spec_path, "rb") as fh:
        spec: _EntrySpec = pickle.load(fh)
    rank = int(os.environ["RANK"])
    name_rank(rank)
    world = int(os.environ["WORLD_SIZE"])

    def fail(text: str, peer_loss: bool) -> None:
        record = {"rank": rank, "error": text, "peer_loss": peer_loss}
        tmp = _status_file(spec.out_dir, rank, "error.tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(_status_file(spec.out_dir, rank, "error"))
        name = f"rank {rank} of {world}"
        sys.stderr.write(f"{text}\n" if text.startswith(name) else f"{name}: {text}\n")
        sys.stdout.flush()
        sys.stderr.flush()
        if peer_loss:
            # torch's launcher reports the first rank it sees exit: let the peer
            # whose loss this is (killed, crashed) be seen first.
            time.sleep(PEER_LOSS_EXIT_DELAY)
        os._exit(1)

    watchdog = threading.Timer(
        spec.run_timeout,
        fail,
        (f"did not finish within {spec.run_timeout:g} s", False),
    )
    watchdog.daemon = True
    watchdog.start()
    try:
        # lazy: torch loads in seconds; only the rank processes need it
        import torch.distributed as dist
        from torch.distributed import TCPStore

        pin_gloo_interface(os.environ["MASTER_ADDR"])
        delta = datetime.timedelta(seconds=spec.timeout)
        # torch's static rendezvous runs the store in the launcher of machine 0
        # (TORCHELASTIC_USE_AGENT_STORE): every rank is a client of it.
        store = TCPStore(
            os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, False, delta
        )
        check_join(store, rank, world, join_token(), spec.timeout)
        del store
        dist.init_process_group(spec.backend, init_method="env://", timeout=delta)
        value = spec.fn(rank, world, *spec.args)
        dist.destroy_process_group()
    except BaseException as exc:
        fail(report(exc), is_peer_loss(exc))
    watchdog.cancel()
    tmp = _status_file(spec.out_dir, rank, "result.tmp")
    tmp.write_bytes(pickle.dumps(value))
    tmp.replace(_status_file(spec.out_dir, rank, "result"))


@contextlib.contextmanager
def _launch_environment(token: str) -> Iterator[None]:
    """For the launch: the ranks get the join token (``GNNCORE_JOIN_TOKEN``,
    put back as it was afterwards), and the signal handlers torch's launcher
    installs are put back afterwards."""
    saved_token = os.environ.get(TOKEN_ENV)
    os.environ[TOKEN_ENV] = token
    handled = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT]
    on_main = threading.current_thread() is threading.main_thread()
    handlers = {sig: signal.getsignal(sig) for sig in handled} if on_main else {}
    try:
        yield
    finally:
        if saved_token is None:
            os.environ.pop(TOKEN_ENV, None)
        else:
            os.environ[TOKEN_ENV] = saved_token
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def elastic_run(
    fn: Callable[..., Any],
    nproc: int,
    args: Sequence[Any] = (),
    *,
    nnodes: int = 1,
    node_rank: int = 0,
    master_addr: str = LOCALHOST,
    master_port: int | None = None,
    backend: str = "gloo",
    timeout: float = 60.0,
    run_timeout: float = 600.0,
    join_timeout: float = 300.0,
    run_id: str | None = None,
    join_token: str | None = None,
    cuda: bool = False,
) -> dict[int, Any]:
    """Run ``fn(rank, world_size, *args)`` in this machine's ``nproc`` ranks of
    an ``nnodes * nproc`` world, started by torch's elastic launcher (what
    ``torchrun --nnodes M --node-rank i --nproc-per-node N --master-addr A
    --master-port P`` does): machine ``i`` runs ranks ``i * nproc`` to
    ``i * nproc + nproc - 1``. Returns ``{rank: result}`` of this machine's ranks.

    Args:
        fn: A picklable (module-level) function. As with any
            :mod:`multiprocessing` start method but fork, each rank imports the
            launching script as ``__mp_main__``: launch under
            ``if __name__ == "__main__":``.
        nproc (int): Ranks on this machine.
        nnodes (int): Machines, each running this call with its ``node_rank``.
        master_addr (str): Where machine 0's rendezvous store listens and the
            others reach it. (default: ``127.0.0.1``, this machine only)
        master_port (int, optional): Its port; a free one when ``nnodes == 1``.
        timeout (float): Seconds a collective may wait for its peers.
        run_timeout (float): Seconds a rank may run.
        join_timeout (float): Seconds the machines may take to meet.
        run_id (str, optional): The rendezvous' run id (the same on every machine).
        join_token (str, optional): The token every rank proves at rendezvous, the
            same on every machine (default:
            :func:`~gnncore.distributed.join.launch_token`: from the environment,
            else generated, and printed on machine 0 of several).
        cuda (bool): The ranks use CUDA: they start as fresh interpreters, as
            all ranks do on a machine with a GPU
            (:func:`~gnncore.distributed.launch.forked.rank_start_method`).

    Raises:
        RankFailed: A rank raised, died, was refused at rendezvous or ran out of
            time (:func:`blame`).
        InputError: A bad token file.
        TokenError: No token on a machine other than 0.
    """
    # lazy: torch's elastic package loads in seconds; only this launcher needs it
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    if nproc < 1 or nnodes < 1 or not 0 <= node_rank < nnodes:
        raise ValueError(f"bad launch: nproc={nproc}, nnodes={nnodes}, node_rank={node_rank}")
    if master_port is None:
        if nnodes > 1:
            raise ValueError("several machines need a master_port they all know")
        master_port = free_port(master_addr)
    token = launch_token(nnodes, node_rank) if join_token is None else join_token
    _register_rendezvous()
    world = nproc * nnodes
    local = range(node_rank * nproc, node_rank * nproc + nproc)
    config = LaunchConfig(
        min_nodes=nnodes,
        max_nodes=nnodes,
        nproc_per_node=nproc,
        run_id=run_id or f"gnncore-{master_addr}-{master_port}",
        role="rank",
        rdzv_endpoint=f"{master_addr}:{master_port}",
        rdzv_backend=RENDEZVOUS_BACKEND,
        rdzv_configs={"rank": node_rank, "timeout": int(join_timeout)},
        max_restarts=0,
        monitor_interval=0.1,
        start_method=rank_start_method(cuda),
    )
    with tempfile.TemporaryDirectory(prefix="gnncore-ranks-") as out_dir:
        spec_path = Path(out_dir) / "spec.pkl"
        spec = _EntrySpec(fn, tuple(args), backend, timeout, run_timeout, out_dir)
        spec_path.write_bytes(pickle.dumps(spec))
        rank_context(cuda)  # the fork server the ranks fork from, its preload (unless spawned)
        launch = elastic_launch(config, rank_entry)
        try:
            with _launch_environment(token):
                launch(str(spec_path), Launcher.here())
        except ChildFailedError as err:
            raise _elastic_blame(err, out_dir, world, local) from None
        except SignalException as err:
            raise KeyboardInterrupt(f"signal {err.sigval.name}") from None
        results: dict[int, Any] = {}
        for rank in local:
            path = _status_file(out_dir, rank, "result")
            if not path.exists():
                raise RankFailed(f"rank {rank} of {world} exited without a result", rank)
            results[rank] = pickle.loads(path.read_bytes())
    return results


def _elastic_blame(err: Any, out_dir: str, world: int, local: range) -> RankFailed:
    """:func:`blame` over the failures torch's launcher saw and what the ranks
    of this machine reported."""
    statuses = {rank: RankStatus(rank) for rank in local}
    for rank, failure in err.failures.items():
        statuses.setdefault(rank, RankStatus(rank)).exitcode = failure.exitcode
    for rank, status in statuses.items():
        path = _status_file(out_dir, rank, "error")
        if path.exists():
            record = json.loads(path.read_text())
            status.error = record["error"]
            status.peer_loss = bool(record["peer_loss"])
        if _status_file(out_dir, rank, "result").exists():
            status.finished = True
    failed = [s for s in statuses.values() if has_failed(s)]
    remote = [r for r in range(world) if r not in local]
    return blame(failed, world, remote)


__all__ = ["RENDEZVOUS_BACKEND", "elastic_run", "rank_entry"]
