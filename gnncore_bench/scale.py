"""``gnncore bench scale``: CSV → graph directory → partitions, every stage under one memory limit.

:func:`bench_scale` is the scale-past-memory showcase: it generates a graph
as a raw ``src,dst`` CSV edge list (``gnncore synth --layout csv``), ingests
it (``gnncore ingest --memory-budget``), then partitions the graph directory
with each method asked for (GREM at a chunk fraction, METIS, KaMinPar), each
stage a separate ``gnncore`` process under the same kernel-enforced memory
limit (:func:`gnncore_bench.limits.run_limited`: a cgroup v1 memory cgroup, page
cache charged, the stage's input evicted from the page cache first so it
starts cold). A stage that the limit kills is a result (``killed for
memory``), not an error: METIS and KaMinPar hold the whole graph and are
expected to die on graphs far past the budget.

Each stage's own ``--memory-budget`` leaves headroom inside the cgroup
(:func:`stage_budgets`): ingestion gets half the limit for its buffers (parse
batches, sort runs, merges); the other half covers what the budget does not
govern -- the interpreter, the O(|V|) arrays, and the page cache of the
files it reads and writes, which the cgroup charges too (clean pages are
reclaimed under pressure, dirty ones only once written back). Partitioning
gets an eighth for its post-processing buffers, since the method itself
(GREM's chunk, METIS's and KaMinPar's whole graph) takes the rest.

Before anything runs, the free space of the work directory's file system is
checked against :func:`estimate_disk` (the CSV, the graph directory, the
ingestion's scratch, a partition directory; sizes fixed by the formats, or
measured on this machine with a margin) and the run is refused if it does not fit;
``edges="max"`` picks the largest graph that does (:func:`largest_fitting`).
Every stage's temporary files go to the run folder too (``TMPDIR``), so its
peak disk use counts them. The CSV is removed once ingested, the partition
directories once measured, and the whole run folder at the end (also after a
failure, Ctrl-C or, through the CLI, SIGTERM), unless ``keep``.
``scale.json`` and ``scale.md`` go to the output directory with each stage's
stdout, stderr and JSON summary.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gnncore.memory import CGROUP_ROOT
from gnncore.sizes import format_size
from gnncore_bench.limits import (
    LimitedRun,
    cgroup_available,
    gnncore_command,
    run_limited,
)
from gnncore_bench.thrash_guard import ThrashGuard

DEFAULT_METHODS = ("grem:0.01", "grem:0.1", "metis", "kaminpar")
#: Share of the limit given to ingestion's ``--memory-budget``.
INGEST_SHARE = 2
#: Share of the limit given to partitioning's post-processing ``--memory-budget``.
PARTITION_SHARE = 8
#: Graph directory bytes fixed by the format per canonical undirected edge
#: (node ids below 2**31): indices.npy int32 and eid.npy int64 of both
#: directions, edges_shuffled.npy's int32 pair (8 + 16 + 8), and per node
#: (indptr.npy, int64). Exact: no margin.
GRAPH_FIXED_BYTES_PER_EDGE = 32
GRAPH_FIXED_BYTES_PER_NODE = 8
#: The compressed files' bytes: edges.parquet (zstd) per edge, node_ids.parquet
#: per node. Measured: 3.84 B/edge and 2.0 B/node at 20M edges and 2M nodes;
#: at 200M edges and 20M nodes the graph held 7.41 GB, 0.86 GB past its fixed
#: files: about 4.1 B/edge (wider ids compress less).
GRAPH_PARQUET_BYTES_PER_EDGE = 4.5
GRAPH_PARQUET_BYTES_PER_NODE = 3
#: Bounded ingestion's scratch at its peak beyond the finished graph. Its
#: sorted key runs are delta-coded (2.9 B/edge at 20M edges and 2M nodes,
#: about 4 at 100M nodes: the gaps grow with the node count), and the
#: shuffle's buckets (as much again) are written while edges_shuffled.npy (8
#: B/edge) is not yet, and removed as it is written. Measured: the run
#: folder's peak during ingestion was the CSV plus the finished graph, to the
#: byte, at 200M edges (10.79 GB: 3.38 + 7.41); 1 B/edge covers the bigger
#: runs and buckets of larger graphs.
INGEST_SCRATCH_BYTES_PER_EDGE = 1
#: A partition directory per node (relabelling maps, halos, split codes):
#: measured 47 B/node at 2M nodes, 50 at 20M (p = 16).
PARTITION_BYTES_PER_NODE = 56
#: A partitioner's temporary files per edge: GREM's chunk files (5.2 B/edge
#: at 200M edges), KaMinPar's ParHIP copy of the graph (8.8 B/edge).
PARTITION_SCRATCH_BYTES_PER_EDGE = 10
#: Margin on the measured sizes (the compressed files, scratch, partition
#: directories); the CSV's and the fixed-size files' are computed exactly.
DISK_MARGIN = 1.15
#: Free space left to the machine's other users (at most a tenth of what is free).
DISK_RESERVE = 4 << 30


def _log(message: str) -> None:
    print(f"[bench scale] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Method:
    """A partitioning run of the showcase: ``grem:0.01`` is GREM with 1% chunks."""

    label: str
    method: str
    chunk: float | None = None

    @classmethod
    def parse(cls, text: str) -> Method:
        """``grem:FRACTION``, ``metis`` or ``kaminpar``."""
        name, _, arg = text.partition(":")
        if name == "grem":
            try:
                chunk = float(arg)
            except ValueError:
                raise ValueError(f"write grem:FRACTION, e.g. grem:0.01; got {text!r}") from None
            if not 0 < chunk <= 1:
                raise ValueError(f"a GREM chunk is a fraction in (0, 1]; got {text!r}")
            return cls(text, "grem", chunk)
        if name in ("metis", "kaminpar") and not arg:
            return cls(text, name)
        raise ValueError(f"methods are grem:FRACTION, metis, kaminpar; got {text!r}")


def stage_budgets(budget_bytes: int) -> dict[str, int]:
    """The ``--memory-budget`` of each stage inside a cgroup of ``budget_bytes``
    (module docstring: ingestion half, partitioning post-processing an eighth)."""
    return {
        "ingest": budget_bytes // INGEST_SHARE,
        "partition": budget_bytes // PARTITION_SHARE,
    }


def csv_bytes(num_edges: int, num_nodes: int) -> int:
    """Expected size of the generated CSV: two ids and two separators a line,
    ids taken as uniform over ``[0, num_nodes)``."""
    digits, low, width = 0, 0, 1
    while low < num_nodes:
        high = min(10**width, num_nodes)
        digits += (high - low) * width
        low, width = high, width + 1
    mean_digits = digits / max(num_nodes, 1)
    return int(num_edges * (2 * mean_digits + 2)) + len("src,dst\n")


def estimate_disk(num_edges: int, num_nodes: int, methods: int = 1, keep: bool = False) -> int:
    """Peak bytes the run needs on the work directory's file system.

    Ingestion holds the CSV, its scratch and the graph directory at once; then
    the CSV goes and each partition directory and the partitioner's temporary
    files sit beside the graph until measured (with ``keep``, everything
    stays). The CSV's size is computed (:func:`csv_bytes`), the graph's
    fixed-size files exactly; the measured sizes (this module's constants)
    get :data:`DISK_MARGIN`.
    """
    csv = csv_bytes(num_edges, num_nodes)
    graph: float = num_edges * GRAPH_FIXED_BYTES_PER_EDGE + num_nodes * GRAPH_FIXED_BYTES_PER_NODE
    graph += DISK_MARGIN * (
        num_edges * GRAPH_PARQUET_BYTES_PER_EDGE + num_nodes * GRAPH_PARQUET_BYTES_PER_NODE
    )
    scratch = DISK_MARGIN * num_edges * INGEST_SCRATCH_BYTES_PER_EDGE
    partition = DISK_MARGIN * num_nodes * PARTITION_BYTES_PER_NODE
    partition_scratch = DISK_MARGIN * num_edges * PARTITION_SCRATCH_BYTES_PER_EDGE
    if keep:
        peak = csv + graph + max(scratch, methods * partition + partition_scratch)
    else:
        peak = max(csv + scratch + graph, graph + partition + partition_scratch)
    return int(peak)


def default_nodes(num_edges: int) -> int:
    """Nodes of a graph of ``num_edges`` edges: average degree 20, as the
    20M-edge benchmark graphs."""
    return max(num_edges // 10, 16)


def disk_room(free_bytes: int) -> int:
    """What a run may use of ``free_bytes``: all but :data:`DISK_RESERVE` (or a
    tenth, when that is less), left to the machine's other users."""
    return free_bytes - min(DISK_RESERVE, free_bytes // 10)


def largest_fitting(free_bytes: int, methods: int = 1, keep: bool = False) -> int:
    """The most edges (whole millions, average degree 20) whose
    :func:`estimate_disk` fits in :func:`disk_room`."""
    room = disk_room(free_bytes)
    low, high = 0, 1
    while estimate_disk(high * 10**6, default_nodes(high * 10**6), methods, keep) <= room:
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        fits = estimate_disk(mid * 10**6, default_nodes(mid * 10**6), methods, keep) <= room
        low, high = (mid, high) if fits else (low, mid)
    return low * 10**6


def _tree_bytes(root: Path) -> int:
    """Bytes of the files under ``root``; files vanishing during the walk count 0."""
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass
    return total


@contextmanager
def peak_disk(root: Path, interval: float = 0.5) -> Iterator[dict[str, int]]:
    """Sample the bytes under ``root`` every ``interval`` seconds while the block
    runs; the yielded dict's ``peak`` is the largest sample (scratch included)."""
    found = {"peak": _tree_bytes(root)}
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(interval):
            found["peak"] = max(found["peak"], _tree_bytes(root))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        stop.set()
        thread.join()
        found["peak"] = max(found["peak"], _tree_bytes(root))


def _tail(path: str | None, lines: int = 12) -> str:
    if path is None:
        return ""
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _status(run: LimitedRun, json_path: Path) -> str:
    if run.killed_for_memory:
        return "killed for memory"
    if run.timed_out:
        return "timed out"
    if run.exit_code != 0 or not json_path.is_file():
        return f"failed (exit {run.exit_code})"
    return "ok"


#: Fields of a stage's own JSON summary kept in the report.
_SUMMARY_FIELDS = (
    "phases",
    "num_nodes",
    "num_edges",
    "num_input_edges",
    "num_canonical_edges",
    "duplicates_removed",
    "self_loops_removed",
    "memory_budget",
    "edge_cut_fraction",
    "max_part_ratio",
    "command_peak_rss_bytes",
    "postprocess_seconds",
    "storage_read_bytes",
    "storage_written_bytes",
)


@dataclass(frozen=True)
class _Context:
    """What every stage of one run shares."""

    budget: int
    run_root: Path
    out_dir: Path
    env: dict[str, str]
    timeout: float | None
    stall_seconds: float | None


def _stage_cgroup() -> Path | None:
    """The memory cgroup :func:`run_limited` made for the running stage (it names
    them ``gnncore-<our pid>-<random>``; one stage runs at a time)."""
    found = sorted(CGROUP_ROOT.glob(f"gnncore-{os.getpid()}-*"))
    return found[0] if found else None


def _run_stage(
    context: _Context,
    name: str,
    cmd: list[str],
    *,
    evict: Sequence[Path],
    outputs: Sequence[Path],
) -> dict[str, Any]:
    json_path = context.out_dir / "stages" / f"{name.replace(':', '-')}.json"
    json_path.unlink(missing_ok=True)
    _log(f"{name}: {' '.join(cmd[2:])}")
    guard = ThrashGuard(_stage_cgroup, context.stall_seconds or float("inf"))
    with peak_disk(context.run_root) as disk, _guarding(guard, context.stall_seconds):
        run = run_limited(
            [*cmd, "--json", str(json_path)],
            context.budget,
            env=context.env,
            timeout=context.timeout,
            evict=evict,
            capture_dir=context.out_dir / "logs",
            capture_name=name.replace(":", "-"),
        )
    status = _status(run, json_path)
    if guard.stalled:
        status = f"killed at the limit (thrashed {guard.stalled_seconds:.0f} s, no OOM kill)"
    stage: dict[str, Any] = {
        "stage": name,
        "status": status,
        "cmd": list(run.cmd),
        "seconds": run.wall_seconds,
        "peak_rss_bytes": run.peak_rss_bytes,
        "cgroup_peak_bytes": run.peak_memory_bytes,
        "read_bytes": run.read_bytes,
        "written_bytes": run.written_bytes,
        "output_bytes": sum(_tree_bytes(p) if p.is_dir() else _size(p) for p in outputs),
        "peak_disk_bytes": disk["peak"],
        "exit_code": run.exit_code,
        "killed_for_memory": run.killed_for_memory,
        "timed_out": run.timed_out,
        "failcnt": run.failcnt,
        "stalled_at_limit": guard.stalled,
        "limited": run.limited,
        "reason": run.reason,
    }
    if status == "ok":
        summary = json.loads(json_path.read_text())
        stage["summary"] = {k: summary[k] for k in _SUMMARY_FIELDS if k in summary}
    elif status.startswith("failed"):
        stage["error"] = _tail(run.stderr_path)
    _log(
        f"{name}: {status} in {run.wall_seconds:.1f} s, peak RSS "
        f"{_size_text(run.peak_rss_bytes)}, cgroup peak {_size_text(run.peak_memory_bytes)}"
    )
    return stage


@contextmanager
def _guarding(guard: ThrashGuard, seconds: float | None) -> Iterator[None]:
    if seconds is None:
        yield
        return
    with guard:
        yield


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _size_text(value: float | None) -> str:
    return "—" if value is None else format_size(value)


def _skipped(name: str, why: str) -> dict[str, Any]:
    return {"stage": name, "status": f"skipped ({why})"}


def _machine(work: Path) -> dict[str, Any]:
    usage = shutil.disk_usage(work)
    meminfo = {}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, value = line.split(":", 1)
            meminfo[key] = int(value.split()[0]) * 1024
    except (OSError, ValueError):
        pass
    return {
        "cpus": os.cpu_count(),
        "memory_bytes": meminfo.get("MemTotal"),
        "kernel": platform.release(),
        "disk_total_bytes": usage.total,
        "disk_free_bytes": usage.free,
    }


def bench_scale(
    out_dir: str | os.PathLike[str],
    work_dir: str | os.PathLike[str],
    budget_bytes: int,
    edges: int | str,
    *,
    nodes: int | None = None,
    methods: Sequence[str] = DEFAULT_METHODS,
    parts: int = 16,
    threads: int = 2,
    timeout: float | None = None,
    stall_seconds: float | None = 120.0,
    keep: bool = False,
    seed: int = 0,
) -> dict[str, Any]:
    """Run the showcase (module docstring) and write ``scale.json`` and ``scale.md``.

    Args:
        out_dir: Gets ``scale.json``, ``scale.md``, ``logs/`` (each stage's
            stdout and stderr) and ``stages/`` (each stage's JSON summary).
        work_dir: Where the CSV, the graph directory and the partitions are
            written (in a fresh ``scale-PID`` folder, removed at the end
            unless ``keep``); its file system must hold :func:`estimate_disk`.
        budget_bytes: The cgroup limit of every stage, page cache included.
        edges: Undirected edges to generate, or ``"max"``: the most that fit
            the free disk (:func:`largest_fitting`).
        nodes: Nodes of the graph (default :func:`default_nodes`).
        methods: Partitioning runs: ``grem:FRACTION``, ``metis``, ``kaminpar``.
        parts: Parts of every partitioning.
        threads: ``OMP_NUM_THREADS`` of every stage and KaMinPar's ``--threads``.
        timeout: Seconds per stage (then killed and reported ``timed out``).
        stall_seconds: Kill a stage that has thrashed at the limit this long
            (:class:`~gnncore_bench.thrash_guard.ThrashGuard`: at the limit, major
            faults, no OOM kill; METIS did on 200M edges); ``None``: never.
        keep: Keep the CSV, the graph and the partitions.
        seed: Seed of the generator, ingestion and the partitioners.

    Returns:
        dict: What ``scale.json`` holds, plus ``markdown``.

    Raises:
        ValueError: On bad settings, or when the disk cannot hold the run.
    """
    chosen = [Method.parse(m) for m in methods]
    if budget_bytes < 64 << 20:
        raise ValueError(f"the budget must be at least 64 MiB; got {format_size(budget_bytes)}")
    if parts < 2:
        raise ValueError(f"parts must be at least 2; got {parts}")
    out, work = Path(out_dir).absolute(), Path(work_dir).absolute()
    probe = work
    while not probe.exists():  # the disk of the work dir, created once the run fits
        probe = probe.parent
    machine = _machine(probe)
    free = machine["disk_free_bytes"]
    if edges == "max":
        num_edges = largest_fitting(free, len(chosen), keep)
        if num_edges < 10**6:
            raise ValueError(f"{format_size(free)} free holds no 1M-edge run")
        edge_choice = f"max: the largest that fits {format_size(free)} free"
    elif isinstance(edges, int) and edges > 0:
        num_edges, edge_choice = edges, "given"
    else:
        raise ValueError(f"edges must be a positive integer or 'max'; got {edges!r}")
    num_nodes = nodes or default_nodes(num_edges)
    needed = estimate_disk(num_edges, num_nodes, len(chosen), keep)
    if needed > disk_room(free):
        raise ValueError(
            f"the run needs about {format_size(needed)} of disk "
            f"({num_edges:,} edges, {num_nodes:,} nodes) and {format_size(free)} is free "
            f"(of which {format_size(free - disk_room(free))} is left to others); "
            f"use fewer --edges or --edges max (here about "
            f"{largest_fitting(free, len(chosen), keep):,})"
        )
    budgets = stage_budgets(budget_bytes)
    work.mkdir(parents=True, exist_ok=True)
    run_root = work / f"scale-{os.getpid()}"
    csv, graph = run_root / "edges.csv", run_root / "graph"
    out.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "PYTHONUNBUFFERED": "1",
        # the stages' temporary files (GREM's chunk files, KaMinPar's ParHIP
        # copy of the graph) land in the run folder: measured, then removed
        "TMPDIR": str(run_root / "tmp"),
    }
    context = _Context(budget_bytes, run_root, out, env, timeout, stall_seconds)
    _log(
        f"{num_edges:,} edges, {num_nodes:,} nodes under {format_size(budget_bytes)}; "
        f"disk: about {format_size(needed)} needed, {format_size(free)} free"
    )
    load_before = os.getloadavg()
    started = time.perf_counter()
    stages: list[dict[str, Any]] = []
    report: dict[str, Any] = {}

    def save(finished: bool) -> dict[str, Any]:
        """Write scale.json and scale.md as they stand (after every stage, so a
        run stopped midway keeps the stages that ended)."""
        ran = [s for s in stages if "limited" in s]
        limited = bool(ran) and ran[0]["limited"]
        report.clear()
        report.update(
            {
                "finished": finished,
                "num_edges": num_edges,
                "num_nodes": num_nodes,
                "edges_choice": edge_choice,
                "budget_bytes": budget_bytes,
                "stage_budgets": budgets,
                "limited": limited,
                "limit_reason": (ran[0]["reason"] if ran else cgroup_available() or "no stage ran"),
                "parts": parts,
                "threads": threads,
                "seed": seed,
                "methods": [m.label for m in chosen],
                "disk_needed_estimate_bytes": needed,
                "machine": machine,
                "load_average_before": load_before,
                "load_average_after": os.getloadavg(),
                "seconds": time.perf_counter() - started,
                "kept": str(run_root) if keep else None,
                "stages": stages,
            }
        )
        _write_atomic(out / "scale.json", json.dumps(report, indent=2, default=str) + "\n")
        _write_atomic(out / "scale.md", to_markdown(report) + "\n")
        return dict(report)

    def record(stage: dict[str, Any]) -> None:
        stages.append(stage)
        save(finished=False)

    (run_root / "tmp").mkdir(parents=True)
    try:
        avg_degree = 2 * num_edges / num_nodes
        record(
            _run_stage(
                context,
                "csv",
                gnncore_command("synth", csv, "--layout", "csv", "--nodes", str(num_nodes))
                + ["--avg-degree", repr(avg_degree), "--classes", "16", "--features", "1"]
                + ["--seed", str(seed), "--no-progress"],
                evict=[],
                outputs=[csv],
            )
        )
        if stages[-1]["status"] == "ok":
            record(
                _run_stage(
                    context,
                    "ingest",
                    gnncore_command(
                        "ingest", csv, graph, "--format", "edgelist", "--seed", str(seed)
                    )
                    + ["--memory-budget", str(budgets["ingest"]), "--no-progress"],
                    evict=[csv],
                    outputs=[graph],
                )
            )
        else:
            record(_skipped("ingest", "no CSV"))
        if not keep:
            csv.unlink(missing_ok=True)
        ingested = stages[-1]["status"] == "ok"
        for method in chosen:
            if not ingested:
                record(_skipped(method.label, "no graph"))
                continue
            part_dir = run_root / f"partition-{method.label.replace(':', '-')}"
            cmd = gnncore_command("partition", graph, part_dir, "--method", method.method)
            cmd += ["--parts", str(parts), "--seed", str(seed), "--no-progress"]
            cmd += ["--memory-budget", str(budgets["partition"])]
            if method.chunk is not None:
                cmd += ["--chunk", repr(method.chunk)]
            if method.method == "kaminpar":
                cmd += ["--threads", str(threads)]
            record(
                _run_stage(
                    context,
                    method.label,
                    cmd,
                    evict=[graph],
                    outputs=[part_dir],
                )
            )
            if not keep:
                shutil.rmtree(part_dir, ignore_errors=True)
    finally:
        if not keep:
            shutil.rmtree(run_root, ignore_errors=True)
    return {**save(finished=True), "markdown": to_markdown(report)}


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _cell(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def to_markdown(result: dict[str, Any]) -> str:
    """The run as a Markdown table with its settings above it."""
    machine = result["machine"]
    limit = (
        f"each stage in a cgroup v1 memory cgroup limited to "
        f"{format_size(result['budget_bytes'])} (page cache charged)"
        if result["limited"]
        else f"limit NOT enforced ({result['limit_reason']})"
    )
    ingest: dict[str, Any] = next((s for s in result["stages"] if s["stage"] == "ingest"), {})
    canonical = ingest.get("summary", {}).get("num_canonical_edges")
    lines = [
        f"{result['num_edges']:,} generated undirected edges ({result['edges_choice']})"
        + (f", {canonical:,} canonical after ingestion" if canonical is not None else "")
        + f", {result['num_nodes']:,} nodes; {limit}; stage --memory-budget: ingest "
        f"{format_size(result['stage_budgets']['ingest'])}, partition post-processing "
        f"{format_size(result['stage_budgets']['partition'])}; p = {result['parts']}, "
        f"{result['threads']} threads. Machine: {machine['cpus']} CPUs, "
        f"{_size_text(machine['memory_bytes'])} memory, {format_size(machine['disk_free_bytes'])}"
        f" free of {format_size(machine['disk_total_bytes'])} disk; load average "
        f"{result['load_average_before'][0]:.1f} before, {result['load_average_after'][0]:.1f} "
        f"after; {result['seconds']:.0f} s in all"
        + ("." if result.get("finished", True) else " so far (the run has not finished)."),
        "",
        "| stage | status | seconds | peak RSS | cgroup peak | read | written | output "
        "| peak disk | cut | max part / avg |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for stage in result["stages"]:
        summary = stage.get("summary", {})
        cut = summary.get("edge_cut_fraction")
        lines.append(
            f"| {stage['stage']} | {stage['status']} | {_cell(stage.get('seconds'))} "
            f"| {_size_text(stage.get('peak_rss_bytes'))} "
            f"| {_size_text(stage.get('cgroup_peak_bytes'))} "
            f"| {_size_text(stage.get('read_bytes'))} | {_size_text(stage.get('written_bytes'))} "
            f"| {_size_text(stage.get('output_bytes'))} "
            f"| {_size_text(stage.get('peak_disk_bytes'))} "
            f"| {_cell(None if cut is None else 100 * cut, 2)}{'' if cut is None else '%'} "
            f"| {_cell(summary.get('max_part_ratio'), 3)} |"
        )
    lines += [
        "",
        "peak RSS: the stage process's `ru_maxrss`; cgroup peak: the cgroup's "
        "`max_usage_in_bytes` (processes plus the page cache they brought in); read / "
        "written: storage bytes from the stage's rusage; output: the stage's output on "
        "disk; peak disk: the run folder sampled every 0.5 s during the stage (inputs, "
        "outputs and scratch).",
    ]
    return "\n".join(lines)
