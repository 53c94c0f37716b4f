"""Starting ranks: torch's elastic launcher (``torchrun``) or spawned processes.

Two launchers run ``fn(rank, world_size, *args)`` in every rank of a
``torch.distributed`` process group and return the results in rank order:

* :func:`elastic_run` starts this machine's ranks through torch's own launcher
  (:func:`torch.distributed.launcher.api.elastic_launch`, what ``torchrun``
  runs), with ``nnodes``/``node_rank``/``master_addr``/``master_port`` for
  several machines. Each rank is a fresh ``python`` process whose entry point
  (:func:`rank_entry`) reads ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
  ``MASTER_ADDR`` and ``MASTER_PORT`` from its environment.
* :func:`spawn_local` spawns the ranks with :mod:`multiprocessing` (tests and
  small single-machine runs).

**Addresses.** Everything listens on ``127.0.0.1`` unless ``master_addr``
says otherwise: the rendezvous store is created on a socket bound to
``master_addr`` (torch's own would listen on every interface), and each rank's
gloo transport binds the interface that routes to ``master_addr`` (``lo`` for
the default; set ``GLOO_SOCKET_IFNAME`` to choose another).

**Faults.** A rank that raises or dies makes the launch raise
:class:`RankFailed`. When one rank dies, its peers' collectives fail a moment
later ("connection reset by peer"), so several ranks fail together; the
launcher then names the rank that caused it: a rank that died (a signal, or an
exit without reporting) before one that raised an error of its own, before one
whose error was the loss of a peer (:func:`is_peer_loss`). :func:`spawn_local`
waits ``grace`` seconds after the first failure for the others' statuses; the
elastic launcher sees every rank that has exited when it polls (every 0.1 s),
and a SIGKILLed rank is gone before any peer can notice. A collective that
waits past ``timeout`` fails in its rank, and a rank still running after
``run_timeout`` reports and exits, so nothing hangs.

**Joining.** Every rank proves the launch's join token to the others through
the store before ``init_process_group`` (:func:`~gnncore.distributed.join.check_join`):
a rank without it, or with another one, is refused with one line, and so are
its peers. The launchers take the token from ``GNNCORE_JOIN_TOKEN`` or a token
file (:func:`~gnncore.distributed.join.launch_token`), or generate one.
The pickles here (the spec and result files of :func:`elastic_run`, the queue
of :func:`spawn_local`) stay between a launcher and its own children on one
machine; nothing a peer rank sends is unpickled.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import multiprocessing as mp
import os
import pickle
import queue
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gnncore.errors import GnnCoreError

#: The default address of the rendezvous store and of the ranks' transport.
LOCALHOST = "127.0.0.1"

#: Messages of a collective that failed because a peer went away or hung.
_PEER_LOSS_MARKERS = (
    "connection reset by peer",
    "connection closed by peer",
    "broken pipe",
    "timed out",
    "timeout",
    "connection refused",
    "socket closed",
    "end of file",
)


class RankFailed(GnnCoreError, RuntimeError):
    """A rank raised, died or did not finish in time; the message names it
    (``rank`` holds its number, ``None`` when no rank of this machine could be
    blamed)."""

    def __init__(self, message: str, rank: int | None = None) -> None:
        super().__init__(message)
        self.rank = rank


def free_port(host: str = LOCALHOST) -> int:
    """A TCP port on ``host`` that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def is_peer_loss(exc: BaseException) -> bool:
    """Whether ``exc`` is a collective failing because a peer died or hung
    (gloo's "connection reset/closed by peer", a timeout), rather than an
    error of the rank's own."""
    import torch.distributed as dist

    if isinstance(exc, dist.DistBackendError):
        return True
    if not isinstance(exc, RuntimeError):
        return False
    text = str(exc).lower()
    return any(marker in text for marker in _PEER_LOSS_MARKERS)


# Naming the rank that failed ------------------------------------------------------


@dataclass
class RankStatus:
    """What the launcher knows about one rank when the run failed."""

    rank: int
    exitcode: int | None = None  # None: still running (or on another machine)
    error: str | None = None  # the traceback the rank reported
    peer_loss: bool = False
    finished: bool = False


def _describe(status: RankStatus, world: int) -> str:
    if status.error is not None:
        return f"rank {status.rank} of {world} failed:\n{status.error}"
    code = status.exitcode
    text = f"rank {status.rank} of {world} exited with code {code} without a result"
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            text += f" (killed by {signal.Signals(-code).name})"
    return text


def blame(statuses: Sequence[RankStatus], world: int, remote: Sequence[int] = ()) -> RankFailed:
    """The :class:`RankFailed` for a failed run: it names a rank that died
    without reporting, else one that raised an error of its own, else one whose
    peers were lost (lowest rank first within each kind); the others follow.
    ``remote``: ranks on other machines, named when only peer losses are seen
    here."""
    died = [s for s in statuses if s.exitcode not in (None, 0) and s.error is None]
    # SIGTERM last: the launchers stop the surviving ranks with it.
    died.sort(key=lambda s: s.exitcode == -signal.SIGTERM)
    own = [s for s in statuses if s.error is not None and not s.peer_loss]
    lost = [s for s in statuses if s.error is not None and s.peer_loss]
    ordered = died + own + lost
    if not ordered:
        return RankFailed(f"the run of {world} ranks failed without a rank reporting")
    culprit = ordered[0]
    message = _describe(culprit, world)
    if culprit in lost and remote:
        message = (
            f"no rank on this machine died first: rank {culprit.rank} lost its peers; "
            f"ranks {list(remote)} run on other machines (see their launcher's error)\n" + message
        )
    others = [s for s in ordered[1:]]
    if others:
        notes = []
        for s in others:
            kind = "lost its peers" if s.peer_loss else _describe(s, world).split("\n")[0]
            if not s.peer_loss and s.error is not None and "\n" not in s.error.strip():
                kind = s.error.strip()  # a one-line report (a refused join): all of it
            notes.append(f"rank {s.rank}: {kind}")
        message += "\nthen: " + "; ".join(notes)
    return RankFailed(message, culprit.rank)


# Spawned ranks ----------------------------------------------------------------


def _listener(host: str, port: int = 0) -> socket.socket:
    """A TCP socket listening on ``host:port`` (``SO_REUSEADDR``, so a restarted
    run can take the same port)."""
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    return sock


def _master_store(host: str, port: int, world: int, timeout: float) -> tuple[Any, int]:
    """A ``TCPStore`` server listening on ``host:port`` only (``port`` 0: a free
    one), and its port. The store owns the listening socket."""
    from torch.distributed import TCPStore

    sock = _listener(host, port)
    port = int(sock.getsockname()[1])
    try:
        store = TCPStore(
            host,
            port,
            world,
            True,
            datetime.timedelta(seconds=timeout),
            wait_for_workers=False,
            multi_tenant=True,
            master_listen_fd=sock.fileno(),
        )
    except BaseException:
        sock.close()
        raise
    sock.detach()  # the store closes it
    return store, port


def _report(exc: BaseException) -> str:
    """What a failed rank reports: the one line of a refused join, else the
    traceback."""
    from gnncore.distributed.join import JoinRefused

    return str(exc) if isinstance(exc, JoinRefused) else traceback.format_exc()


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
) -> None:
    import torch.distributed as dist
    from torch.distributed import TCPStore

    from gnncore.distributed.join import check_join

    try:
        _pin_gloo_interface(address[0])
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
        results.put((rank, False, _report(exc), is_peer_loss(exc)))
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
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` spawned local ranks;
    return their results in rank order.

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

    Raises:
        RankFailed: A rank raised (its traceback follows the rank's name), exited
            without a result, was refused at rendezvous, or the run passed
            ``run_timeout``; the other ranks are terminated.
    """
    from gnncore.distributed.join import launch_token

    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    token = launch_token() if join_token is None else join_token
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    store, port = _master_store(LOCALHOST, 0, world_size, timeout)
    address = (LOCALHOST, port)
    procs = [
        ctx.Process(
            target=_rank_main,
            args=(fn, rank, world_size, address, backend, timeout, tuple(args), results, token),
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
            failed = [s for s in statuses if _failed(s)]
            if failed and failed_at is None:
                failed_at = now
            if failed_at is not None:
                settled = all(s.finished or s.exitcode is not None for s in statuses)
                if settled or now - failed_at > grace:
                    _drain(results, statuses, done, 0.2)  # results still in the pipe
                    raise blame([s for s in statuses if _failed(s)], world_size)
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


def _failed(status: RankStatus) -> bool:
    """Reported an error, or exited without a result (a result may still be in
    the pipe: :func:`spawn_local` drains it before blaming)."""
    return status.error is not None or (
        not status.finished and status.exitcode is not None and status.exitcode != 0
    )


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


# The network interface of the ranks ----------------------------------------------


def _interface_of(address: str) -> str | None:
    """The name of the local interface holding ``address`` (Linux), or ``None``."""
    import fcntl
    import struct

    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            packed = struct.pack("256s", name.encode()[:15])
            try:
                info = fcntl.ioctl(sock.fileno(), siocgifaddr, packed)
            except OSError:
                continue
            if socket.inet_ntoa(info[20:24]) == address:
                return name
    return None


def _pin_gloo_interface(master_addr: str) -> None:
    """Make gloo bind the interface that routes to ``master_addr`` (``lo`` for
    127.0.0.1), unless ``GLOO_SOCKET_IFNAME`` is set. Gloo's default is the
    address the host name resolves to, which may be no interface the peers
    can reach (or more than loopback when they are all local)."""
    if os.environ.get("GLOO_SOCKET_IFNAME"):
        return
    try:
        host = socket.gethostbyname(master_addr)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, 9))  # UDP: no packet is sent
            local = probe.getsockname()[0]
        name = _interface_of(local)
    except (OSError, ImportError):
        return
    if name is not None:
        os.environ["GLOO_SOCKET_IFNAME"] = name


# torch's elastic launcher ---------------------------------------------------------

#: The rendezvous backend of :func:`elastic_run`: torch's static one, its store
#: listening on the master address only.
RENDEZVOUS_BACKEND = "gnncore-static"
_registered = False


def _register_rendezvous() -> None:
    global _registered
    if _registered:
        return
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
                self._store, _ = _master_store(
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


def rank_entry(spec_path: str) -> None:
    """A rank started by :func:`elastic_run` (``python -c``): prove the join
    token (``GNNCORE_JOIN_TOKEN``) through the store at ``MASTER_ADDR:MASTER_PORT``
    and check its peers' (:func:`~gnncore.distributed.join.check_join`), join
    the group from ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``,
    run the function and write its result (or the error, and whether it was the
    loss of a peer) where the launcher reads it; exit at once on an error."""
    with open(spec_path, "rb") as fh:
        spec: _EntrySpec = pickle.load(fh)
    rank = int(os.environ["RANK"])
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
        os._exit(1)

    watchdog = threading.Timer(
        spec.run_timeout,
        fail,
        (f"did not finish within {spec.run_timeout:g} s", False),
    )
    watchdog.daemon = True
    watchdog.start()
    try:
        import torch.distributed as dist
        from torch.distributed import TCPStore

        from gnncore.distributed.join import check_join, join_token

        _pin_gloo_interface(os.environ["MASTER_ADDR"])
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
        fail(_report(exc), is_peer_loss(exc))
    watchdog.cancel()
    tmp = _status_file(spec.out_dir, rank, "result.tmp")
    tmp.write_bytes(pickle.dumps(value))
    tmp.replace(_status_file(spec.out_dir, rank, "result"))


@contextlib.contextmanager
def _launch_environment(token: str) -> Iterator[None]:
    """For the launch: the ranks import what this process can (its
    ``sys.path`` as ``PYTHONPATH``) and get the join token (``GNNCORE_JOIN_TOKEN``,
    put back as it was afterwards), and the signal handlers torch's launcher
    installs are put back afterwards."""
    from gnncore.distributed.join import TOKEN_ENV

    saved_path = os.environ.get("PYTHONPATH")
    saved_token = os.environ.get(TOKEN_ENV)
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    os.environ[TOKEN_ENV] = token
    handled = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT]
    on_main = threading.current_thread() is threading.main_thread()
    handlers = {sig: signal.getsignal(sig) for sig in handled} if on_main else {}
    try:
        yield
    finally:
        if saved_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved_path
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
) -> dict[int, Any]:
    """Run ``fn(rank, world_size, *args)`` in this machine's ``nproc`` ranks of
    an ``nnodes * nproc`` world, started by torch's elastic launcher (what
    ``torchrun --nnodes M --node-rank i --nproc-per-node N --master-addr A
    --master-port P`` does): machine ``i`` runs ranks ``i * nproc`` to
    ``i * nproc + nproc - 1``. Returns ``{rank: result}`` of this machine's ranks.

    Args:
        fn: A picklable (module-level) function, importable in a fresh
            ``python`` (this process's ``sys.path`` is passed on).
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

    Raises:
        RankFailed: A rank raised, died, was refused at rendezvous or ran out of
            time (:func:`blame`).
        InputError: A bad token file.
        TokenError: No token on a machine other than 0.
    """
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    from gnncore.distributed.join import launch_token

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
        start_method="spawn",
    )
    with tempfile.TemporaryDirectory(prefix="gnncore-ranks-") as out_dir:
        spec_path = Path(out_dir) / "spec.pkl"
        spec = _EntrySpec(fn, tuple(args), backend, timeout, run_timeout, out_dir)
        spec_path.write_bytes(pickle.dumps(spec))
        code = "import sys; from gnncore.distributed.launch import rank_entry as e; e(sys.argv[1])"
        launch = elastic_launch(config, sys.executable)
        try:
            with _launch_environment(token):
                launch("-u", "-c", code, str(spec_path))
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
    failed = [s for s in statuses.values() if _failed(s)]
    remote = [r for r in range(world) if r not in local]
    return blame(failed, world, remote)
