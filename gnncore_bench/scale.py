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
checked against :func:`~gnncore_bench.scale_disk.estimate_disk` (the CSV, the
graph directory, the ingestion's scratch, a partition directory; sizes fixed by
the formats, or measured on this machine with a margin) and the run is refused
if it does not fit; ``edges="max"`` picks the largest graph that does
(:func:`~gnncore_bench.scale_disk.largest_fitting`).
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
from collections.abc import Callable, Iterator, Sequence
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
from gnncore_bench.scale_disk import default_nodes, disk_needed, edge_count
from gnncore_bench.scale_report import size_text, to_markdown
from gnncore_bench.thrash_guard import ThrashGuard

DEFAULT_METHODS = ("grem:0.01", "grem:0.1", "metis", "kaminpar")
#: Share of the limit given to ingestion's ``--memory-budget``.
INGEST_SHARE = 2
#: Share of the limit given to partitioning's post-processing ``--memory-budget``.
PARTITION_SHARE = 8


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
        f"{size_text(run.peak_rss_bytes)}, cgroup peak {size_text(run.peak_memory_bytes)}"
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
            unless ``keep``); its file system must hold
            :func:`~gnncore_bench.scale_disk.estimate_disk`.
        budget_bytes: The cgroup limit of every stage, page cache included.
        edges: Undirected edges to generate, or ``"max"``: the most that fit
            the free disk (:func:`~gnncore_bench.scale_disk.largest_fitting`).
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
    _check(budget_bytes, parts)
    out, work = Path(out_dir).absolute(), Path(work_dir).absolute()
    machine, num_edges, edge_choice, num_nodes, needed = _sized(
        work, edges, nodes, len(chosen), keep
    )
    free = machine["disk_free_bytes"]
    budgets = stage_budgets(budget_bytes)
    work.mkdir(parents=True, exist_ok=True)
    run_root = work / f"scale-{os.getpid()}"
    out.mkdir(parents=True, exist_ok=True)
    context = _Context(
        budget_bytes, run_root, out, _stage_env(threads, run_root), timeout, stall_seconds
    )
    _log(
        f"{num_edges:,} edges, {num_nodes:,} nodes under {format_size(budget_bytes)}; "
        f"disk: about {format_size(needed)} needed, {format_size(free)} free"
    )
    load_before = os.getloadavg()
    started = time.perf_counter()
    stages: list[dict[str, Any]] = []
    report: dict[str, Any] = {}

    def save(finished: bool) -> dict[str, Any]:
        """Write scale.json and scale.md as they stand (after each stage: kept if stopped)."""
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

    def record(stage: dict[str, Any]) -> dict[str, Any]:
        stages.append(stage)
        save(finished=False)
        return stage

    (run_root / "tmp").mkdir(parents=True)
    try:
        graph = _generate_and_ingest(context, record, num_edges, num_nodes, budgets, seed, keep)
        for method in chosen:
            if graph is None:
                record(_skipped(method.label, "no graph"))
                continue
            part_dir = run_root / f"partition-{method.label.replace(':', '-')}"
            cmd = _partition_command(graph, part_dir, method, parts, seed, budgets, threads)
            record(_run_stage(context, method.label, cmd, evict=[graph], outputs=[part_dir]))
            if not keep:
                shutil.rmtree(part_dir, ignore_errors=True)
    finally:
        if not keep:
            shutil.rmtree(run_root, ignore_errors=True)
    return {**save(finished=True), "markdown": to_markdown(report)}


def _check(budget_bytes: int, parts: int) -> None:
    if budget_bytes < 64 << 20:
        raise ValueError(f"the budget must be at least 64 MiB; got {format_size(budget_bytes)}")
    if parts < 2:
        raise ValueError(f"parts must be at least 2; got {parts}")


def _sized(
    work: Path, edges: int | str, nodes: int | None, methods: int, keep: bool
) -> tuple[dict[str, Any], int, str, int, int]:
    """The machine (with the free disk of ``work``), the edges and how they were
    chosen, the nodes, and the disk the run needs (``ValueError`` if it does not fit)."""
    probe = work
    while not probe.exists():  # the disk of the work dir, created once the run fits
        probe = probe.parent
    machine = _machine(probe)
    free = machine["disk_free_bytes"]
    num_edges, edge_choice = edge_count(edges, free, methods, keep)
    num_nodes = nodes or default_nodes(num_edges)
    needed = disk_needed(num_edges, num_nodes, free, methods, keep)
    return machine, num_edges, edge_choice, num_nodes, needed


def _stage_env(threads: int, run_root: Path) -> dict[str, str]:
    return {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "PYTHONUNBUFFERED": "1",
        # the stages' temporary files (GREM's chunk files, KaMinPar's ParHIP
        # copy of the graph) land in the run folder: measured, then removed
        "TMPDIR": str(run_root / "tmp"),
    }


def _generate_and_ingest(
    context: _Context,
    record: Callable[[dict[str, Any]], dict[str, Any]],
    num_edges: int,
    num_nodes: int,
    budgets: dict[str, int],
    seed: int,
    keep: bool,
) -> Path | None:
    """The ``csv`` and ``ingest`` stages, each recorded; the graph directory, or
    ``None`` when there is none. The CSV is removed after ingestion unless ``keep``."""
    csv, graph = context.run_root / "edges.csv", context.run_root / "graph"
    avg_degree = 2 * num_edges / num_nodes
    generated = record(
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
    if generated["status"] == "ok":
        ingested = record(
            _run_stage(
                context,
                "ingest",
                gnncore_command("ingest", csv, graph, "--format", "edgelist", "--seed", str(seed))
                + ["--memory-budget", str(budgets["ingest"]), "--no-progress"],
                evict=[csv],
                outputs=[graph],
            )
        )
    else:
        ingested = record(_skipped("ingest", "no CSV"))
    if not keep:
        csv.unlink(missing_ok=True)
    return graph if ingested["status"] == "ok" else None


def _partition_command(
    graph: Path,
    part_dir: Path,
    method: Method,
    parts: int,
    seed: int,
    budgets: dict[str, int],
    threads: int,
) -> list[str]:
    """``gnncore partition`` of one method into ``part_dir``. Its progress lines
    (a line per GREM bisection and refinement, with seconds) go to the stage's
    stderr log: at a billion edges they are where the time went."""
    cmd = gnncore_command("partition", graph, part_dir, "--method", method.method)
    cmd += ["--parts", str(parts), "--seed", str(seed)]
    cmd += ["--memory-budget", str(budgets["partition"])]
    if method.chunk is not None:
        cmd += ["--chunk", repr(method.chunk)]
    if method.method == "kaminpar":
        cmd += ["--threads", str(threads)]
    return cmd


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
