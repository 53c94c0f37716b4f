"""What a stage cost: its phases' seconds, peak memory, bytes moved, and the
memory budget a stage takes by default.

Ingestion, generation and partitioning report the same figures (JSON from the
CLI, Dagster metadata, MLflow metrics), measured here once:

* :class:`PhaseTimer` -- a :func:`gnncore.progress.stage` reporter that also
  times each named stage, so every ingestion path gets per-phase seconds
  without timing code of its own;
* :class:`StageUsage` -- the wall time, the process's peak resident set size and
  the bytes the process read from and wrote to storage over a block (deltas of
  ``/proc/self/io``), plus the sizes of the stage's inputs and outputs;
* :func:`default_memory_budget` -- half of the memory this process may still
  take (the machine's ``MemAvailable``, or its cgroup's room): what ``auto``
  gives the stages that size only their data from it (ingest, synth,
  partition's post-processing, at a quarter);
* :func:`process_budget` -- a deployment's ``auto``: the memory the whole
  process may take, the lower of its cgroup's limit and ``MemAvailable`` plus
  what the process holds already; what the Dagster ``memory`` resource, the
  planners and the store writer resolve ``auto`` to;
* :class:`StageBudget` -- a whole-process budget split at a stage's start into
  its fixed overhead (the process's RSS then: interpreter, torch, MLflow), a
  margin, and the data share the stage sizes its buffers from, with a refusal
  naming the budget and the minimum;
* :func:`budget_figures` -- a stage's peak RSS against its budget
  (``peak_rss_bytes``, ``memory_budget_bytes``, ``peak_rss_of_budget``), the
  one computation behind the verbs' JSON, the training run's metrics, the
  partition report and the assets' metadata.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from gnncore.errors import GnnCoreError
from gnncore.heap import fix_mmap_threshold
from gnncore.memory import cgroup_limit, mem_available, memory_available
from gnncore.progress import StageFn
from gnncore.sizes import format_size, parse_size

#: The smallest default budget: below it the bounded paths' buffers stop paying.
MIN_DEFAULT_BUDGET = 256 << 20
#: What :func:`default_memory_budget` assumes when no memory figure can be read.
FALLBACK_BUDGET = 2 << 30


def default_memory_budget(fraction: float = 0.5) -> int:
    """``fraction`` of the memory this process may still take
    (:func:`gnncore.memory.memory_available`, which sees a cgroup v1 limit), at
    least 256 MiB; 2 GiB when nothing can be read."""
    available = memory_available()
    if available is None:
        return FALLBACK_BUDGET
    return max(int(available * fraction), MIN_DEFAULT_BUDGET)


def resolve_memory_budget(value: int | str | None) -> int | None:
    """A ``memory_budget`` argument in bytes: ``"auto"`` is
    :func:`default_memory_budget`, a size string (``"1GiB"``) is parsed, ``None``
    or ``""`` stays ``None``; ``ValueError`` for anything else."""
    if value is None or value == "":
        return None
    if value == "auto":
        return default_memory_budget()
    budget = parse_size(value) if isinstance(value, str) else int(value)
    if budget <= 0:
        raise ValueError(f"a memory budget must be positive, not {value!r}")
    return budget


def process_budget() -> int:
    """A deployment's ``auto`` budget: the memory this whole process may take,
    the lower of its cgroup v1 limit (:func:`gnncore.memory.cgroup_limit`) and
    the machine's ``MemAvailable`` plus this process's RSS now (what it holds
    counts: the budget bounds the process, not what it adds);
    :data:`FALLBACK_BUDGET` when neither can be read."""
    available = mem_available()
    room = None if available is None else available + current_rss_bytes()
    limit = cgroup_limit()
    known = [b for b in (room, limit) if b is not None]
    return min(known) if known else FALLBACK_BUDGET


def resolve_process_budget(value: int | str | None) -> int | None:
    """:func:`resolve_memory_budget` for a whole-process budget: ``"auto"`` is
    :func:`process_budget` (``"none"``, like ``None`` and ``""``, is ``None``)."""
    if value == "auto":
        return process_budget()
    return None if value == "none" else resolve_memory_budget(value)


class MemoryBudgetError(GnnCoreError, ValueError):
    """A memory budget below what a stage needs (the message names both)."""


#: What :class:`StageBudget` keeps back beyond the overhead: allocator slack,
#: the page tables and small objects no stage counts.
STAGE_MARGIN = 64 << 20


@dataclass(frozen=True)
class StageBudget:
    """A whole-process memory budget as one stage sees it at its start.

    ``total`` bounds the process (``None``: unbounded). The stage's fixed
    overhead is the process's RSS when it starts (the interpreter, numpy,
    torch and MLflow once imported, anything an earlier stage left); the
    stage's data (buffers, chunks, mega-batches, caches) gets
    :attr:`data_bytes`, the rest less :attr:`margin`.
    """

    total: int | None
    overhead: int
    margin: int = STAGE_MARGIN

    @classmethod
    def start(
        cls, total: int | None, margin: int = STAGE_MARGIN, held: bool = False
    ) -> StageBudget:
        """Measure the overhead now (call it once the stage's imports are done):
        ``VmRSS``, or with ``held`` what the process holds besides the pages of
        data files it maps (:func:`held_bytes`: for a stage that starts late in
        a process that has read mapped files, whose pages the cgroup reclaims).

        Under a budget (``total`` set) this also keeps every later block of at
        least 1 MiB out of glibc's heap (:func:`gnncore.heap.fix_mmap_threshold`,
        process-wide), so the buffers a stage frees go back to the system instead
        of staying in the heap under its next peak."""
        if total is not None:
            fix_mmap_threshold()
        return cls(total, held_bytes() if held else current_rss_bytes(), margin)

    @property
    def data_bytes(self) -> int | None:
        """Bytes left to the stage's data (0 at least; ``None``: unbounded)."""
        if self.total is None:
            return None
        return max(self.total - self.overhead - self.margin, 0)

    def require(self, minimum: int, what: str) -> int | None:
        """:attr:`data_bytes`, or :class:`MemoryBudgetError` naming the budget,
        the overhead and the minimum when it leaves ``what`` less than
        ``minimum`` bytes."""
        data = self.data_bytes
        if self.total is not None and data is not None and data < minimum:
            need = self.overhead + self.margin + minimum
            raise MemoryBudgetError(
                f"memory budget of {format_size(self.total)} is below the {format_size(need)} "
                f"{what} needs: {format_size(self.overhead)} this process holds already, "
                f"{format_size(self.margin)} of margin and {format_size(minimum)} at least for "
                "its data; raise the budget (or the process's memory limit)"
            )
        return data

    def to_dict(self) -> dict[str, int | None]:
        """The split as JSON-ready figures."""
        return {
            "memory_budget_bytes": self.total,
            "overhead_bytes": self.overhead,
            "data_budget_bytes": self.data_bytes,
        }


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far, in bytes.

    Reads ``VmHWM`` from ``/proc/self/status``: unlike ``getrusage``'s
    ``ru_maxrss``, it does not inherit the peak of the process that forked
    this one, so a benchmark child reports its own peak. Falls back to
    ``ru_maxrss`` where ``/proc`` is unavailable.
    """
    return status_bytes("VmHWM") or int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def budget_figures(
    peak_rss_bytes: int | None,
    memory_budget_bytes: int | None,
    peak_held_bytes: int | None = None,
) -> dict[str, int | float]:
    """A stage's peak RSS against its memory budget, the figures every report
    uses (the CLI's JSON, MLflow metrics, Dagster metadata): ``peak_rss_bytes``
    when the peak is known, ``memory_budget_bytes`` when there is a budget, and
    ``peak_rss_of_budget`` (the peak as a fraction of the budget; above 1 the
    process went past it) when both are. A budget of 0 or less counts as no
    budget (no ratio against it means anything; :func:`resolve_memory_budget`
    refuses one). With ``peak_held_bytes`` (:func:`peak_held_bytes`), also
    ``peak_held_bytes`` and ``peak_held_of_budget``: the peak of what the
    process held that a memory cgroup cannot reclaim, which is what a limit
    kills for (the RSS also counts the pages of mapped data files). The callers
    choose which peak and which budget (a summary's own figures, the command's
    peak before the method's) and how to spell the values."""
    out: dict[str, int | float] = {}
    budget = memory_budget_bytes if memory_budget_bytes and memory_budget_bytes > 0 else None
    peaks = {"peak_rss": peak_rss_bytes, "peak_held": peak_held_bytes}
    out.update({f"{name}_bytes": peak for name, peak in peaks.items() if peak is not None})
    if budget is not None:
        out["memory_budget_bytes"] = budget
        out.update(
            {f"{name}_of_budget": peak / budget for name, peak in peaks.items() if peak is not None}
        )
    return out


#: Seconds between two samples of :class:`HeldSampler` (a sample reads
#: ``/proc/self/smaps``: about 40 ms for a process with torch and MLflow loaded).
HELD_SAMPLE_INTERVAL = 2.0


class HeldSampler:
    """The peak of :func:`held_bytes` in this process, sampled every ``interval``
    seconds on a daemon thread from :meth:`start` (a peak between two samples
    goes unseen; :attr:`peak` samples once more)."""

    def __init__(self, interval: float = HELD_SAMPLE_INTERVAL) -> None:
        self.interval = interval
        self.pid = os.getpid()
        self._peak = 0
        self._lock = threading.Lock()  # the thread and a caller of peak both sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="held-sampler", daemon=True)

    def start(self) -> HeldSampler:
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def running(self) -> bool:
        """Sampling in this process (a sampler forked from another is not)."""
        return self.pid == os.getpid() and self._thread.is_alive()

    @property
    def peak(self) -> int:
        self._sample()
        return self._peak

    def _sample(self) -> None:
        held = held_bytes()
        with self._lock:
            self._peak = max(self._peak, held)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()


_SAMPLER: HeldSampler | None = None


def start_held_sampler(interval: float = HELD_SAMPLE_INTERVAL) -> None:
    """Start this process's :class:`HeldSampler` (once: a running one is kept),
    whose peak :func:`peak_held_bytes` reports from then on. The Dagster
    ``memory`` resource starts it in every step's process."""
    global _SAMPLER
    if _SAMPLER is None or not _SAMPLER.running:
        _SAMPLER = HeldSampler(interval).start()


def stop_held_sampler() -> None:
    """Stop this process's :class:`HeldSampler` (none running: nothing to do);
    :func:`peak_held_bytes` is ``None`` again."""
    global _SAMPLER
    if _SAMPLER is not None and _SAMPLER.running:
        _SAMPLER.stop()
    _SAMPLER = None


def peak_held_bytes() -> int | None:
    """The peak of :func:`held_bytes` since :func:`start_held_sampler` in this
    process (``None`` when it was not started here)."""
    if _SAMPLER is None or not _SAMPLER.running:
        return None
    return _SAMPLER.peak


def current_rss_bytes() -> int:
    """This process's resident set size now (``VmRSS``), 0 where unknown."""
    return status_bytes("VmRSS")


def held_bytes(pid: int | str = "self") -> int:
    """Resident memory ``pid`` holds that the kernel cannot take back as page
    cache: its anonymous pages (heap, arrays, copy-on-write pages of mapped
    files), its shared memory, and the resident pages of its code (mappings of
    shared libraries and executables). The pages of data files it maps
    (``np.load(mmap_mode=...)``) are left out: ``VmRSS`` counts them once
    touched, but a memory cgroup reclaims them like any page cache before it
    kills. ``VmRSS`` where ``/proc/<pid>/smaps`` cannot be read."""
    try:
        with open(f"/proc/{pid}/smaps") as smaps:
            text = smaps.read()
    except OSError:
        return status_bytes("VmRSS", pid)
    total, code = 0, False
    for line in text.splitlines():
        key, _, rest = line.partition(" ")
        if not key.endswith(":"):  # a mapping's header: range perms offset dev inode [path]
            fields = rest.split(None, 4)
            path = fields[4].strip() if len(fields) > 4 else ""
            code = path.startswith("/") and (".so" in path or "x" in fields[0])
        elif key == ("Rss:" if code else "Anonymous:"):  # code: all of it, else its anon pages
            total += int(rest.split()[0]) << 10
    return total + status_bytes("RssShmem", pid)


def status_bytes(field: str, pid: int | str = "self") -> int:
    """The ``field`` line (``VmHWM``, ``VmRSS``...) of ``/proc/<pid>/status`` in
    bytes (its kB times 1024), 0 where it cannot be read (no such process, or
    one exiting: a zombie has no memory lines)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def tree_bytes(paths: Iterable[str | os.PathLike[str]]) -> int:
    """Total size of the files at ``paths`` (directories walked; missing paths,
    and files removed while the walk runs, count 0; symbolic links are not
    followed)."""
    total = 0
    for path in paths:
        p = Path(path)
        if p.is_symlink() or not p.exists():
            continue
        if p.is_file():
            total += _size(p)
            continue
        for root, _, files in os.walk(p):
            for name in files:
                file = Path(root, name)
                if not file.is_symlink():
                    total += _size(file)
    return total


def _size(file: Path) -> int:
    """``file``'s size, 0 when it is gone (a temporary file removed meanwhile)."""
    try:
        return file.stat().st_size
    except FileNotFoundError:
        return 0


def _storage_io() -> tuple[int, int] | None:
    """``(read_bytes, write_bytes)`` of this process from ``/proc/self/io``:
    bytes fetched from and sent to the storage layer (page-cache hits and
    writes later cancelled by deleting the file are excluded by the kernel's
    own accounting of ``read_bytes``; ``cancelled_write_bytes`` is subtracted)."""
    try:
        fields = io_counters()
        written = fields["write_bytes"] - fields.get("cancelled_write_bytes", 0)
        return fields["read_bytes"], written
    except (OSError, KeyError, ValueError):
        return None


def io_counters(pid: int | str = "self") -> dict[str, int]:
    """The counters of ``/proc/<pid>/io`` (``read_bytes``, ``write_bytes``,
    ``cancelled_write_bytes``...). Raises ``OSError`` where it cannot be read."""
    text = Path(f"/proc/{pid}/io").read_text()
    return {name: int(value) for name, value in (line.split(": ", 1) for line in text.splitlines())}


class PhaseTimer:
    """A stage reporter that times each stage and passes it on.

    ``with reporting(timer := PhaseTimer(progress)): ...`` then
    ``timer.seconds()``: seconds per stage name, in order; a stage lasts until
    the next one starts or :meth:`stop` is called. A name seen twice adds up.
    """

    def __init__(self, forward: StageFn | None = None) -> None:
        self.forward = forward
        self._current: tuple[str, float] | None = None
        self._seconds: dict[str, float] = {}

    def __call__(self, name: str) -> None:
        self.stop()
        self._current = (name, time.perf_counter())
        if self.forward is not None:
            self.forward(name)

    def stop(self) -> None:
        """End the current stage (idempotent)."""
        if self._current is not None:
            name, started = self._current
            self._seconds[name] = self._seconds.get(name, 0.0) + time.perf_counter() - started
            self._current = None

    def seconds(self) -> dict[str, float]:
        """Seconds per stage so far (the running one up to now)."""
        out = dict(self._seconds)
        if self._current is not None:
            name, started = self._current
            out[name] = out.get(name, 0.0) + time.perf_counter() - started
        return out


@dataclass
class StageUsage:
    """Resources one stage used, measured over a ``with`` block.

    Attributes:
        seconds: Wall time of the block.
        peak_rss_bytes: This process's peak resident set size when the block
            ended (the whole process's peak so far, which includes anything
            the process held before the stage).
        storage_read_bytes / storage_written_bytes: Bytes this process read
            from and wrote to storage during the block (``/proc/self/io``;
            page-cache hits are not reads, spills deleted before they reached
            the disk are not writes); ``None`` where ``/proc`` has no io file.
        input_bytes / output_bytes: Sizes of the stage's inputs and outputs
            (:meth:`set_inputs`, :meth:`set_outputs`).
    """

    seconds: float = 0.0
    peak_rss_bytes: int = 0
    storage_read_bytes: int | None = None
    storage_written_bytes: int | None = None
    input_bytes: int = 0
    output_bytes: int = 0
    _started: float = field(default=0.0, repr=False)
    _io: tuple[int, int] | None = field(default=None, repr=False)

    def __enter__(self) -> StageUsage:
        self._started = time.perf_counter()
        self._io = _storage_io()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.seconds = time.perf_counter() - self._started
        self.peak_rss_bytes = peak_rss_bytes()
        end = _storage_io()
        if self._io is not None and end is not None:
            self.storage_read_bytes = end[0] - self._io[0]
            self.storage_written_bytes = max(end[1] - self._io[1], 0)

    def set_inputs(self, paths: Iterable[str | os.PathLike[str]]) -> None:
        """Record the total size of the stage's input files."""
        self.input_bytes = tree_bytes(paths)

    def set_outputs(self, paths: Iterable[str | os.PathLike[str]]) -> None:
        """Record the total size of what the stage wrote."""
        self.output_bytes = tree_bytes(paths)

    def to_dict(self) -> dict[str, Any]:
        """The figures as a JSON-ready dict (no private fields)."""
        return {
            "seconds": self.seconds,
            "peak_rss_bytes": self.peak_rss_bytes,
            "storage_read_bytes": self.storage_read_bytes,
            "storage_written_bytes": self.storage_written_bytes,
            "input_bytes": self.input_bytes,
            "output_bytes": self.output_bytes,
        }


def cost_metrics(
    phases: Mapping[str, float],
    *,
    peak_rss_bytes: int | None = None,
    input_bytes: int | None = None,
    output_bytes: int | None = None,
    storage_read_bytes: int | None = None,
    storage_written_bytes: int | None = None,
) -> dict[str, float]:
    """A stage's cost as tracking metrics: ``phase_seconds/<phase>`` per phase
    (spaces as underscores) and the byte figures that are known."""
    figures = {
        "peak_rss_bytes": peak_rss_bytes,
        "input_bytes": input_bytes,
        "output_bytes": output_bytes,
        "storage_read_bytes": storage_read_bytes,
        "storage_written_bytes": storage_written_bytes,
    }
    return {
        **{f"phase_seconds/{name.replace(' ', '_')}": float(s) for name, s in phases.items()},
        **{name: float(value) for name, value in figures.items() if value is not None},
    }
