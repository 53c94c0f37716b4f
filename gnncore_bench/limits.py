"""Run a command under a real, kernel-enforced memory limit, and measure it.

Benchmarks that compare training modes or ingestion and partitioning stages
"under a memory budget" are only fair when the budget is enforced by the
kernel, for every process of the command, page cache included: otherwise a
method that streams from disk looks as cheap as one that keeps everything in
memory, because the page cache quietly holds the file. This module uses the
cgroup v1 memory controller (``/sys/fs/cgroup/memory``), which charges a
cgroup for its processes' anonymous memory *and* for the page cache pages
they bring in, and OOM-kills inside the cgroup when the limit is reached::

    from gnncore_bench.limits import parse_size, run_limited

    run = run_limited(["gnncore", "partition", ...], parse_size("8GiB"),
                      evict=[graph_dir], timeout=3600, capture_dir=out)
    if not run.limited:
        print("not limited:", run.reason)  # say so in the report
    print(run.killed_for_memory, run.peak_memory_bytes, run.peak_rss_bytes)

Where no cgroup can be made (not root, cgroup v2 only, a read-only
``/sys/fs/cgroup``: :func:`cgroup_available` says which), :func:`run_limited`
still runs and measures the command, with ``limited=False`` and the reason in
``reason`` (or raises :class:`LimitUnavailable` with ``require_limit=True``):
it never pretends that a limit held.

Caveats, all stated in the fields' docs too:

* Page cache is charged to the cgroup that first reads a page: a file already
  cached by an earlier run is free. Pass it in ``evict`` (or call
  :func:`~gnncore_bench.page_cache.evict_page_cache`) so every run starts cold. Eviction drops clean
  pages only; the files are flushed first. It does nothing on tmpfs.
* The cgroup is created directly under ``/sys/fs/cgroup/memory`` as
  ``gnncore-<pid>-<random>``; a limit set on an enclosing cgroup still applies.
* The library does not need Dagster, and this module needs only the standard
  library.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from gnncore.errors import GnnCoreError
from gnncore.memory import CGROUP_ROOT
from gnncore.sizes import parse_size  # noqa: F401  (re-exported for callers)
from gnncore_bench.page_cache import evict_page_cache

StrPath = str | os.PathLike[str]


def gnncore_command(*args: StrPath) -> list[str]:
    """The argv of ``gnncore ARGS...`` run by this interpreter (``python -m
    gnncore.cli.main``), for the commands benchmarks run under :func:`run_limited`."""
    return [sys.executable, "-m", "gnncore.cli.main", *(os.fspath(a) for a in args)]


class LimitUnavailable(GnnCoreError, RuntimeError):
    """A memory limit was required but no memory cgroup can be made here."""


def cgroup_available(root: StrPath = CGROUP_ROOT) -> str | None:
    """``None`` when a memory cgroup can be made under ``root``, else why not.

    The reason is a short sentence for a report or a test skip: not Linux,
    not root, no cgroup v1 memory controller mounted (e.g. a cgroup v2 only
    host), or the hierarchy is not writable. Tries for real: creates and
    removes an empty probe cgroup.
    """
    root = Path(root)
    if not sys.platform.startswith("linux"):
        return f"memory cgroups need Linux; this is {sys.platform}"
    if os.geteuid() != 0:
        return "not root: creating a memory cgroup needs root"
    if not (root / "memory.limit_in_bytes").exists():
        return _missing_controller_reason(root)
    probe = root / f"gnncore-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError as exc:
        return f"cannot create a memory cgroup under {root} ({exc.strerror})"
    _rmdir_quietly(probe)
    return None


def _missing_controller_reason(root: Path) -> str:
    if Path("/sys/fs/cgroup/cgroup.controllers").exists():
        return f"cgroup v2 only: no cgroup v1 memory controller mounted at {root}"
    return f"no cgroup v1 memory controller mounted at {root}"


def _rmdir_quietly(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass


class MemoryCgroup:
    """A fresh cgroup v1 memory cgroup with a limit, removed on exit.

    ``with MemoryCgroup(limit) as group:`` creates
    ``<root>/gnncore-<pid>-<random>``, sets ``memory.limit_in_bytes`` and,
    where swap accounting exists, ``memory.memsw.limit_in_bytes`` to the same
    value so that swapping cannot dodge the limit; without swap accounting it
    sets ``memory.swappiness`` to 0 instead (cgroup v1 then does not swap
    the cgroup's memory). ``swap_limited`` says whether either worked. Add
    processes with :meth:`add`; children they start stay in the cgroup. On
    exit, also after an error, nothing is moved out: it waits for the tasks
    to end (SIGKILLing stragglers, such as orphaned children of a finished
    command, after ``grace_seconds``) and removes the directory; if that
    fails it warns and leaves it.

    Args:
        limit_bytes (int): The limit (the kernel rounds it to whole pages).
        root (str or Path): Where the memory controller is mounted.
        grace_seconds (float): How long the exit waits before killing tasks.
    """

    def __init__(
        self, limit_bytes: int, *, root: StrPath = CGROUP_ROOT, grace_seconds: float = 1.0
    ) -> None:
        if limit_bytes < 1:
            raise ValueError(f"memory limit must be positive; got {limit_bytes}")
        self.limit_bytes = limit_bytes
        self.path = Path(root) / f"gnncore-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.swap_limited = False
        self.grace_seconds = grace_seconds

    def __enter__(self) -> MemoryCgroup:
        self.path.mkdir()
        try:
            self._write("memory.limit_in_bytes", self.limit_bytes)
            self.limit_bytes = self._read_int("memory.limit_in_bytes")
            self.swap_limited = self._limit_swap()
        except BaseException:
            _rmdir_quietly(self.path)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Wait for (then kill) the remaining tasks and remove the directory."""
        if not self.path.exists():
            return
        self._drain()
        self._remove()

    def add(self, pid: int) -> None:
        """Move process ``pid`` (and the children it starts later) in."""
        self._write("cgroup.procs", pid)

    def pids(self) -> list[int]:
        """Processes now in the cgroup (empty once it has been removed)."""
        try:
            return [int(line) for line in self._read("cgroup.procs").split()]
        except FileNotFoundError:
            return []

    def peak_bytes(self) -> int:
        """``memory.max_usage_in_bytes``: the peak charge, page cache included."""
        return self._read_int("memory.max_usage_in_bytes")

    def failcnt(self) -> int:
        """``memory.failcnt``: how often a charge hit the limit."""
        return self._read_int("memory.failcnt")

    def oom_kills(self) -> int | None:
        """Processes the OOM killer killed in this cgroup (``oom_kill`` of
        ``memory.oom_control``), or ``None`` where the kernel lacks the counter."""
        for line in self._read("memory.oom_control").splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return None

    def stat(self) -> dict[str, int]:
        """``memory.stat`` as a dict (``cache``, ``rss``, ``total_cache``...)."""
        pairs = (line.split() for line in self._read("memory.stat").splitlines())
        return {key: int(value) for key, value in pairs}

    def killed_for_memory(self, exit_code: int | None) -> bool:
        """Whether the OOM killer killed a process of this cgroup.

        Uses the ``oom_kill`` counter where the kernel has it (then a killed
        helper process counts even if the main one survived); else infers it
        from ``exit_code == -SIGKILL`` with the limit reached (``failcnt`` or
        the peak at the limit).
        """
        kills = self.oom_kills()
        if kills is not None:
            return kills > 0
        if exit_code != -signal.SIGKILL:
            return False
        return self.failcnt() > 0 or self.peak_bytes() >= self.limit_bytes

    def _limit_swap(self) -> bool:
        for name, value in (
            ("memory.memsw.limit_in_bytes", self.limit_bytes),
            ("memory.swappiness", 0),
        ):
            try:
                self._write(name, value)
                return True
            except OSError:
                continue
        return False

    def _drain(self) -> None:
        if self._wait_empty(self.grace_seconds):
            return
        for pid in self.pids():
            _kill_quietly(pid)
        self._wait_empty(10.0)

    def _wait_empty(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while self.pids():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def _remove(self) -> None:
        deadline = time.monotonic() + 10.0
        while True:
            try:
                self.path.rmdir()
                return
            except OSError as exc:
                if time.monotonic() > deadline:
                    warnings.warn(f"could not remove cgroup {self.path}: {exc}", stacklevel=3)
                    return
                time.sleep(0.01)

    def _read(self, name: str) -> str:
        return (self.path / name).read_text()

    def _read_int(self, name: str) -> int:
        return int(self._read(name))

    def _write(self, name: str, value: int) -> None:
        with open(self.path / name, "w") as file:
            file.write(str(value))


def _kill_quietly(pid: int, *, group: bool = False) -> None:
    try:
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass(frozen=True)
class LimitedRun:
    """What :func:`run_limited` measured. Byte counts are ``None`` when unknown.

    Attributes:
        cmd: The command line.
        exit_code: As ``subprocess``: the exit status, or ``-signal`` when
            killed by a signal (``-9`` after an OOM kill or a timeout); 127
            when the command could not be started.
        wall_seconds: From the command's start to its end.
        timed_out: ``timeout`` passed and the process group was SIGKILLed.
        killed_for_memory: The OOM killer killed a process of the command in
            its cgroup (always ``False`` when not ``limited``).
        limited: Whether the command ran in a memory cgroup with the limit.
        reason: Why not, when not ``limited`` (``None`` when it was).
        memory_limit_bytes: The limit asked for (``None``: none).
        peak_memory_bytes: The cgroup's peak charge
            (``memory.max_usage_in_bytes``): the whole process tree's memory
            *plus the page cache it brought in*, so at most the limit.
            ``None`` when not ``limited``.
        peak_rss_bytes: Peak resident set size (``ru_maxrss`` from ``wait4``)
            of the command or of the largest descendant it waited for; at
            least the wrapper's ~7 MiB, which the command is forked from.
        read_bytes: Bytes the command (and the descendants it waited for)
            caused to be read from storage (``ru_inblock`` x 512): page-cache
            hits are not counted, so evict the inputs first.
        written_bytes: Bytes it dirtied for writing to storage
            (``ru_oublock`` x 512), whether or not written back yet.
        failcnt: The cgroup's ``memory.failcnt`` (``None`` when not limited).
        evicted_files: How many files :func:`evict_page_cache` evicted first.
        stdout_path: Where stdout went (``None``: inherited).
        stderr_path: Where stderr went (``None``: inherited).
    """

    cmd: tuple[str, ...]
    exit_code: int
    wall_seconds: float
    timed_out: bool
    killed_for_memory: bool
    limited: bool
    reason: str | None
    memory_limit_bytes: int | None
    peak_memory_bytes: int | None
    peak_rss_bytes: int | None
    read_bytes: int | None
    written_bytes: int | None
    failcnt: int | None
    evicted_files: int
    stdout_path: str | None
    stderr_path: str | None

    @property
    def ok(self) -> bool:
        """Exited 0, within time and memory."""
        return self.exit_code == 0 and not self.timed_out and not self.killed_for_memory

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON-ready types (``cmd`` as a list)."""
        out = asdict(self)
        out["cmd"] = list(self.cmd)
        return out


# Runs as `python -I -S -c _WRAPPER <report fd> <cgroup.procs or ''> <cmd...>`.
# It forks the command, which waits on a pipe until the wrapper has put it in
# the cgroup, then makes its own process group and execs. The fork from this
# small interpreter matters: Linux carries a process's peak RSS over fork and
# exec, so a command started straight from a large parent would report the
# parent's peak as its own ru_maxrss.
_WRAPPER = r"""
import os, sys, time
report, procs, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
go_r, go_w = os.pipe()
pid = os.fork()
if pid == 0:
    try:
        os.close(report)
        os.close(go_w)
        os.setpgid(0, 0)
        if os.read(go_r, 1) != b"x":
            os._exit(126)
        os.close(go_r)
        os.execvp(argv[0], argv)
    except BaseException as exc:
        os.write(2, f"run_limited: cannot start {argv[0]!r}: {exc}\n".encode())
    os._exit(127)
os.close(go_r)
os.setpgid(pid, pid)
try:
    if procs:
        with open(procs, "w") as f:
            f.write(str(pid))
except OSError as exc:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    os.write(report, f"error cannot put the command into {procs}: {exc}\n".encode())
    sys.exit(1)
os.write(report, f"pid {pid}\n".encode())
start = time.monotonic()
os.write(go_w, b"x")
os.close(go_w)
_, status, ru = os.wait4(pid, 0)
wall = time.monotonic() - start
done = f"done {status} {ru.ru_maxrss} {ru.ru_inblock} {ru.ru_oublock} {wall!r}\n"
os.write(report, done.encode())
"""


@dataclass(frozen=True)
class _Outcome:
    exit_code: int  # the command's; the wrapper's if it died before reporting
    maxrss_kib: int | None
    inblock: int | None
    oublock: int | None
    wall_seconds: float
    timed_out: bool


def run_limited(
    cmd: Sequence[StrPath],
    memory_bytes: int | None,
    *,
    env: Mapping[str, str] | None = None,
    cwd: StrPath | None = None,
    timeout: float | None = None,
    evict: Sequence[StrPath] = (),
    capture_dir: StrPath | None = None,
    capture_name: str = "run",
    require_limit: bool = False,
) -> LimitedRun:
    """Run ``cmd`` in a fresh memory cgroup limited to ``memory_bytes``; measure it.

    First the files in ``evict`` are dropped from the page cache (see
    :func:`evict_page_cache`). Then a tiny Python wrapper (``python -I -S``,
    started in a new session, outside the cgroup) forks the command; the
    command blocks on a pipe until the wrapper has written its pid into the
    cgroup's ``cgroup.procs``, then becomes its own process group and execs.
    So the command is limited from its first instruction, with no window,
    and everything it starts inherits the cgroup; the wrapper (a few MiB)
    is not charged. The wrapper ``wait4``s the command and reports its
    rusage, which is the command's own (not inherited from this, possibly
    large, process) and includes the descendants the command waited for.
    Storage I/O comes from that rusage (``ru_inblock``/``ru_oublock``, the
    kernel's per-task block I/O accounting), which works without a cgroup;
    the cgroup's ``max_usage_in_bytes`` shows the page cache side.

    Args:
        cmd: Program and arguments; the program is looked up on ``PATH``.
        memory_bytes: The limit; ``None`` runs without one (``reason`` says so).
        env: The environment (default: this process's).
        cwd: The working directory (default: this process's).
        timeout: Seconds; when passed the command's process group is
            SIGKILLed and ``timed_out`` is set (with a cgroup, processes that
            left the group are killed when the cgroup is removed).
        evict: Files or directories to evict from the page cache first.
        capture_dir: Write stdout and stderr to ``<capture_name>.stdout`` and
            ``<capture_name>.stderr`` there (created if needed); ``None``:
            inherit this process's. stdin is always ``/dev/null``.
        capture_name: The stem of those two files.
        require_limit: Raise :class:`LimitUnavailable` instead of running
            unlimited when ``memory_bytes`` is set but no cgroup can be made.

    Returns:
        LimitedRun: Exit code, time, memory, I/O, and whether it was limited.
    """
    argv = tuple(os.fspath(arg) for arg in cmd)
    if not argv:
        raise ValueError("run_limited needs a command")
    reason = _why_unlimited(memory_bytes)
    if reason is not None and memory_bytes is not None and require_limit:
        raise LimitUnavailable(f"cannot limit memory to {memory_bytes} bytes: {reason}")
    evicted = evict_page_cache(evict)
    with ExitStack() as stack:
        group = None
        if memory_bytes is not None and reason is None:
            group = stack.enter_context(MemoryCgroup(memory_bytes))
        out, err = _outputs(stack, capture_dir, capture_name)
        run_env = None if env is None else dict(env)
        outcome = _launch(argv, group, run_env, cwd, timeout, out, err)
        return _result(argv, memory_bytes, reason, group, outcome, evicted, out, err)


def _why_unlimited(memory_bytes: int | None) -> str | None:
    if memory_bytes is None:
        return "no memory limit requested"
    return cgroup_available()


def _outputs(
    stack: ExitStack, capture_dir: StrPath | None, name: str
) -> tuple[IO[bytes] | None, IO[bytes] | None]:
    if capture_dir is None:
        return None, None
    folder = Path(capture_dir)
    folder.mkdir(parents=True, exist_ok=True)
    out = stack.enter_context(open(folder / f"{name}.stdout", "wb"))
    err = stack.enter_context(open(folder / f"{name}.stderr", "wb"))
    return out, err


def _launch(
    argv: tuple[str, ...],
    group: MemoryCgroup | None,
    env: dict[str, str] | None,
    cwd: StrPath | None,
    timeout: float | None,
    out: IO[bytes] | None,
    err: IO[bytes] | None,
) -> _Outcome:
    procs = str(group.path / "cgroup.procs") if group is not None else ""
    read_end, write_end = os.pipe()
    try:
        wrapper = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WRAPPER, str(write_end), procs, *argv],
            pass_fds=(write_end,),
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
            cwd=cwd,
        )
    finally:
        os.close(write_end)
    with os.fdopen(read_end) as report, _reaped(wrapper) as pids:
        return _supervise(wrapper, report, pids, timeout)


@contextmanager
def _reaped(wrapper: subprocess.Popen[bytes]) -> Iterator[list[int]]:
    """On any error (Ctrl-C included) kill the command's group and the wrapper."""
    pids: list[int] = []
    try:
        yield pids
    except BaseException:
        for pid in pids:
            _kill_quietly(pid, group=True)
        wrapper.kill()
        wrapper.wait()
        raise


def _supervise(
    wrapper: subprocess.Popen[bytes], report: IO[str], pids: list[int], timeout: float | None
) -> _Outcome:
    started = time.monotonic()
    first = report.readline().split(maxsplit=1)
    if not first or first[0] != "pid":
        wrapper.wait()
        problem = first[1].strip() if first else f"wrapper exited with {wrapper.returncode}"
        raise RuntimeError(f"run_limited could not start the command: {problem}")
    pids.append(int(first[1]))
    timed_out = _wait(wrapper, pids[0], timeout)
    wall = time.monotonic() - started
    return _parse_done(report.read().split(), wall, timed_out, wrapper.returncode)


def _wait(wrapper: subprocess.Popen[bytes], pgid: int, timeout: float | None) -> bool:
    try:
        wrapper.wait(timeout)
        return False
    except subprocess.TimeoutExpired:
        _kill_quietly(pgid, group=True)
        wrapper.wait()
        return True


def _parse_done(words: list[str], wall: float, timed_out: bool, wrapper_code: int) -> _Outcome:
    if len(words) != 6 or words[0] != "done":  # the wrapper died: only its exit code is known
        return _Outcome(wrapper_code, None, None, None, wall, timed_out)
    status, maxrss, inblock, oublock = (int(word) for word in words[1:5])
    exit_code = os.waitstatus_to_exitcode(status)
    return _Outcome(exit_code, maxrss, inblock, oublock, float(words[5]), timed_out)


def _result(
    argv: tuple[str, ...],
    memory_bytes: int | None,
    reason: str | None,
    group: MemoryCgroup | None,
    outcome: _Outcome,
    evicted: int,
    out: IO[bytes] | None,
    err: IO[bytes] | None,
) -> LimitedRun:
    exit_code = outcome.exit_code
    return LimitedRun(
        cmd=argv,
        exit_code=exit_code,
        wall_seconds=outcome.wall_seconds,
        timed_out=outcome.timed_out,
        killed_for_memory=group is not None and group.killed_for_memory(exit_code),
        limited=group is not None,
        reason=reason,
        memory_limit_bytes=memory_bytes,
        peak_memory_bytes=None if group is None else group.peak_bytes(),
        peak_rss_bytes=_times(outcome.maxrss_kib, 1024),
        read_bytes=_times(outcome.inblock, 512),
        written_bytes=_times(outcome.oublock, 512),
        failcnt=None if group is None else group.failcnt(),
        evicted_files=evicted,
        stdout_path=None if out is None else str(out.name),
        stderr_path=None if err is None else str(err.name),
    )


def _times(value: int | None, factor: int) -> int | None:
    return None if value is None else value * factor
