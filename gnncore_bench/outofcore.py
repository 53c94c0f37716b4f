"""``gnncore bench out-of-core``: training modes side by side under one memory budget.

:func:`bench_out_of_core` trains the same node classifier once per mode
(``in_memory``, ``mmap``, ``hierbatching``), each as its own
``gnncore train`` process under the same kernel-enforced memory limit
(:func:`gnncore_bench.limits.run_limited`: cgroup v1, page cache counted), with the
graph directory and the partitioned store evicted from the page cache first,
so every mode starts cold, and the same ``OMP_NUM_THREADS``. Preparation --
partitioning the graph and writing the partitioned store that
``hierbatching`` reads -- runs once, before and *outside* the limit (it is an
offline step, as in the HierBatching paper); its time and peak RSS are
reported apart. It also measures the disk's sequential read bandwidth once,
so that each mode's read throughput can be put against it.

Per mode it reports: whether it was OOM-killed (an ``in_memory`` run whose
data exceeds the budget is expected to be; that is a result, not a failure of
the benchmark), ``epoch_seconds`` (median over epochs of the training pass,
``train_s``, read per epoch from the run's MLflow metric history; the JSON
summary's mean when the history cannot be read -- ``epoch_source`` says
which), the per-epoch split into load / sample / compute, ``bytes_read`` from
storage for the whole process (``ru_inblock``), its read throughput (over the
process's wall time) and its fraction of the sequential bandwidth, peak RSS,
the cgroup's peak (page cache included), test accuracy and
``speedup_vs_mmap`` (mmap's ``epoch_seconds`` / the mode's).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gnncore.memory import memory_available
from gnncore.sizes import format_size
from gnncore_bench.limits import (
    LimitedRun,
    gnncore_command,
    run_limited,
)
from gnncore_bench.outofcore_report import to_markdown
from gnncore_bench.page_cache import evict_page_cache

MODES = ("in_memory", "mmap", "hierbatching")
#: Per-epoch metrics read from the MLflow history (medians are reported).
EPOCH_METRICS = (
    "train_s",
    "sample_s",
    "wait_s",
    "compute_s",
    "eval_s",
    "batches",
    "hb_load_s",
    "hb_wait_s",
    "hb_read_s",
    "hb_bytes_read",
)
#: Bytes METIS (pymetis) needs per undirected edge, measured on a 20M-edge
#: graph (docs/BENCHMARKS.md: 6.1 GiB peak RSS); above half the available
#: memory the store is partitioned with GREM instead.
METIS_BYTES_PER_EDGE = 320
READ_CHUNK = 16 << 20


def _log(message: str) -> None:
    print(f"[bench out-of-core] {message}", file=sys.stderr, flush=True)


def choose_partitioner(num_edges: int, available: int | None = None) -> str:
    """``metis`` when its estimated peak (:data:`METIS_BYTES_PER_EDGE` per
    undirected edge) fits in half the available memory, else ``grem``."""
    available = memory_available() if available is None else available
    if available is None or METIS_BYTES_PER_EDGE * num_edges <= available // 2:
        return "metis"
    return "grem"


def _tail(path: str | None, lines: int = 15) -> str:
    if path is None:
        return ""
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _checked(run: LimitedRun, what: str) -> None:
    if not run.ok:
        raise RuntimeError(f"{what} failed (exit {run.exit_code}):\n{_tail(run.stderr_path)}")


def prepare_store(
    graph_dir: Path,
    work_dir: Path,
    parts: int,
    static_fraction: float,
    method: str | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Partition ``graph_dir`` and write its partitioned store under
    ``work_dir`` (``partition/``, ``store/``), without a memory limit; reused
    when a store of the same graph, parts, static fraction and method is
    there. Returns where, how (``method``) and what it cost."""
    from gnncore.store import GraphDir
    from gnncore.store.manifest import MANIFEST_FILE, sha256_of

    graph = GraphDir.open(graph_dir)
    method = method or choose_partitioner(int(graph.manifest.num_canonical_edges))
    key = {
        "graph_manifest_sha256": sha256_of(graph_dir / MANIFEST_FILE),
        "parts": parts,
        "static_fraction": static_fraction,
        "method": method,
        "seed": seed,
    }
    part_dir, store_dir = work_dir / "partition", work_dir / "store"
    record = work_dir / "store.params.json"
    info: dict[str, Any] = {"store": str(store_dir), **key, "limited": False}
    if (store_dir / "manifest.json").is_file() and record.is_file():
        saved = json.loads(record.read_text())
        if saved.get("key") == key:
            _log(f"reusing the partitioned store {store_dir}")
            return {**info, **saved.get("cost", {}), "reused": True}
    work_dir.mkdir(parents=True, exist_ok=True)
    logs = work_dir / "logs"
    cost: dict[str, Any] = {}
    _log(f"partitioning with {method} into {parts} parts (outside the memory limit)")
    run = run_limited(
        gnncore_command(
            "partition",
            graph_dir,
            part_dir,
            "--method",
            method,
            "--parts",
            str(parts),
            "--seed",
            str(seed),
            "--no-progress",
        ),
        None,
        capture_dir=logs,
        capture_name="partition",
    )
    _checked(run, f"gnncore partition --method {method}")
    cost["partition_seconds"] = run.wall_seconds
    cost["partition_peak_rss_bytes"] = run.peak_rss_bytes
    _log(f"writing the store (static fraction {static_fraction}, outside the memory limit)")
    run = run_limited(
        gnncore_command(
            "store",
            graph_dir,
            part_dir,
            store_dir,
            "--static-fraction",
            str(static_fraction),
            "--no-progress",
        ),
        None,
        capture_dir=logs,
        capture_name="store",
    )
    _checked(run, "gnncore store")
    cost["store_seconds"] = run.wall_seconds
    cost["store_peak_rss_bytes"] = run.peak_rss_bytes
    cost["store_bytes"] = sum(p.stat().st_size for p in store_dir.iterdir() if p.is_file())
    record.write_text(json.dumps({"key": key, "cost": cost}, indent=2))
    return {**info, **cost, "reused": False}


def _largest_file(paths: Sequence[Path]) -> Path | None:
    files = [p for root in paths if root.is_dir() for p in root.rglob("*") if p.is_file()]
    return max(files, key=lambda p: p.stat().st_size, default=None)


def _timed_read(path: Path) -> tuple[int, float]:
    buffer = bytearray(READ_CHUNK)
    view = memoryview(buffer)
    total = 0
    with open(path, "rb", buffering=0) as file:
        os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        started = time.perf_counter()
        while True:
            n = file.readinto(view)
            if not n:
                break
            total += n
        seconds = time.perf_counter() - started
    return total, seconds


def sequential_bandwidth(
    candidates: Sequence[Path], min_bytes: int, scratch: Path, repeats: int = 3
) -> dict[str, Any]:
    """Bytes/s of a cold sequential read (16 MiB ``read``s) of the largest file
    under ``candidates`` if it has ``min_bytes``, else of a scratch file of
    ``min_bytes`` written (and removed) in ``scratch``; median of ``repeats``,
    the file evicted from the page cache before each read and after the last."""
    probe = _largest_file(candidates)
    temporary = probe is None or probe.stat().st_size < min_bytes
    if temporary:
        scratch.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix="seqread-", suffix=".bin", dir=scratch)
        probe = Path(name)
        block = os.urandom(1 << 20)
        with os.fdopen(fd, "wb") as file:
            for _ in range(max(1, min_bytes >> 20)):
                file.write(block)
            file.flush()
            os.fsync(file.fileno())
    assert probe is not None
    try:
        rates = []
        for _ in range(repeats):
            evict_page_cache([probe])
            nbytes, seconds = _timed_read(probe)
            rates.append(nbytes / seconds if seconds > 0 else 0.0)
        evict_page_cache([probe])
    finally:
        if temporary:
            probe.unlink()
    return {
        "bytes_per_s": statistics.median(rates),
        "runs_bytes_per_s": rates,
        "file": "scratch file" if temporary else str(probe),
        "file_bytes": nbytes,
    }


def read_ahead_kb(path: str | os.PathLike[str]) -> int | None:
    """The block device's ``queue/read_ahead_kb`` for the file system holding
    ``path`` (``None`` when unknown). On Linux it also bounds the read-around
    of a page fault on a file mapping, so it sets how much a random ``mmap``
    access reads."""
    try:
        dev = os.stat(path).st_dev
        block = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}").resolve()
        for folder in (block, block.parent):
            value = folder / "queue" / "read_ahead_kb"
            if value.is_file():
                return int(value.read_text())
    except (OSError, ValueError):
        pass
    return None


def _epoch_history(summary: dict[str, Any]) -> dict[str, list[float]] | None:
    """Per-epoch values of :data:`EPOCH_METRICS` from the run's MLflow store
    (``None`` when it cannot be read)."""
    try:
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=summary["mlflow_tracking_uri"])
        out: dict[str, list[float]] = {}
        for key in EPOCH_METRICS:
            history = client.get_metric_history(summary["mlflow_run_id"], key)
            if history:
                out[key] = [m.value for m in sorted(history, key=lambda m: m.step)]
        return out if out.get("train_s") else None
    except Exception as exc:  # noqa: BLE001 -- any tracking problem falls back to the JSON
        _log(f"cannot read the per-epoch history ({exc}); using the JSON summary's means")
        return None


def _median(values: Sequence[float] | None) -> float | None:
    return statistics.median(values) if values else None


#: Fields of a mode's result that only a finished run has (``None`` otherwise).
_PER_EPOCH_FIELDS = (
    "epoch_source",
    "epochs_run",
    "epoch_seconds",
    "epoch_seconds_all",
    "load_s",
    "load_wait_s",
    "sample_s",
    "wait_s",
    "compute_s",
    "eval_s",
    "batches_per_epoch",
    "epoch_bytes_read_store",
    "epoch_read_seconds_store",
    "store_read_bytes_per_s",
    "store_read_fraction_of_sequential",
    "train_loop_seconds",
    "outside_loop_seconds",
    "test_accuracy",
    "val_accuracy",
)


def _mode_result(mode: str, run: LimitedRun, json_path: Path, bandwidth: float) -> dict[str, Any]:
    result: dict[str, Any] = {
        "mode": mode,
        "killed_for_memory": run.killed_for_memory,
        "timed_out": run.timed_out,
        "exit_code": run.exit_code,
        "limited": run.limited,
        "reason": run.reason,
        "wall_seconds": run.wall_seconds,
        "bytes_read": run.read_bytes,
        "read_bytes_per_s": (
            run.read_bytes / run.wall_seconds
            if run.read_bytes is not None and run.wall_seconds > 0
            else None
        ),
        "peak_rss_bytes": run.peak_rss_bytes,
        "peak_memory_bytes": run.peak_memory_bytes,
        "failcnt": run.failcnt,
        "stderr": run.stderr_path,
    }
    rate = result["read_bytes_per_s"]
    result["read_fraction_of_sequential"] = (
        rate / bandwidth if rate is not None and bandwidth else None
    )
    if run.killed_for_memory:
        result["status"] = "killed for memory"
    elif run.timed_out:
        result["status"] = "timed out"
    elif run.exit_code != 0 or not json_path.is_file():
        result["status"] = f"failed (exit {run.exit_code})"
        result["error"] = _tail(run.stderr_path)
    else:
        result["status"] = "ok"
    result.update(dict.fromkeys(_PER_EPOCH_FIELDS))
    if result["status"] != "ok":
        return result
    summary = json.loads(json_path.read_text())
    history = _epoch_history(summary)
    throughput = summary.get("throughput", {})
    if history is not None:
        per_epoch = history
        result["epoch_source"] = "per-epoch MLflow history (median)"
    else:
        per_epoch = {k: [float(throughput[k])] for k in EPOCH_METRICS if k in throughput}
        result["epoch_source"] = "JSON summary (mean over epochs)"
    medians = {key: _median(values) for key, values in per_epoch.items()}
    result.update(
        {
            "epochs_run": len(per_epoch.get("train_s", [])) if history is not None else None,
            "epoch_seconds": medians.get("train_s"),
            "epoch_seconds_all": per_epoch.get("train_s"),
            "load_s": medians.get("hb_load_s"),
            "load_wait_s": medians.get("hb_wait_s"),
            "sample_s": medians.get("sample_s"),
            "wait_s": medians.get("wait_s"),
            "compute_s": medians.get("compute_s"),
            "eval_s": medians.get("eval_s"),
            "batches_per_epoch": medians.get("batches"),
            "epoch_bytes_read_store": medians.get("hb_bytes_read"),
            "epoch_read_seconds_store": medians.get("hb_read_s"),
            "train_loop_seconds": summary.get("seconds"),
            "outside_loop_seconds": (
                run.wall_seconds - float(summary["seconds"]) if "seconds" in summary else None
            ),
            "test_accuracy": summary.get("test_accuracy"),
            "val_accuracy": summary.get("val_accuracy"),
        }
    )
    store_bytes = result["epoch_bytes_read_store"]
    store_seconds = result["epoch_read_seconds_store"]
    if store_bytes and store_seconds:
        result["store_read_bytes_per_s"] = store_bytes / store_seconds
        result["store_read_fraction_of_sequential"] = (
            result["store_read_bytes_per_s"] / bandwidth if bandwidth else None
        )
    return result


def bench_out_of_core(
    graph_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    budget_bytes: int,
    epochs: int,
    modes: Sequence[str] = MODES,
    parts: int = 64,
    static_fraction: float = 0.01,
    train_args: Sequence[str] = (),
    *,
    work_dir: str | os.PathLike[str] | None = None,
    partition_method: str | None = None,
    hierbatching_budget_bytes: int | None = None,
    in_memory_budget_bytes: int | None = None,
    threads: int | None = None,
    timeout: float | None = None,
    bandwidth_probe_bytes: int = 1 << 30,
    seed: int = 0,
) -> dict[str, Any]:
    """Train once per mode, each in its own process under ``budget_bytes``.

    Args:
        graph_dir: The graph directory.
        out_dir: Gets ``out_of_core.json``, ``out_of_core.md`` and, under
            ``runs/``, each mode's summary JSON and stdout/stderr.
        budget_bytes: The cgroup limit of every training process (anonymous
            memory plus page cache).
        epochs: ``--epochs`` of every run.
        modes: Any of :data:`MODES`, in the order run.
        parts: Partitions of the store (``hierbatching``).
        static_fraction: ``gnncore store --static-fraction``.
        train_args: More ``gnncore train`` options, the same for every mode
            (``--fanouts``, ``--batch-size``, ``--model``...).
        work_dir: Where the partition, the store and the runs' data roots go
            (default ``out_dir/work``); a matching store there is reused.
        partition_method: ``metis`` or ``grem``; default
            :func:`choose_partitioner`.
        hierbatching_budget_bytes: ``--memory-budget`` of ``hierbatching``, a
            whole-process budget (its mega-batches are sized from it less what
            the process holds, a margin and the working set); default
            ``budget_bytes``, the cgroup's own limit.
        in_memory_budget_bytes: The limit of the ``in_memory`` run instead of
            ``budget_bytes``: everything in RAM needs more than an out-of-core
            budget, and this makes it the accuracy reference in the same run
            (its epoch time is then not at equal memory).
        threads: ``OMP_NUM_THREADS`` (and ``MKL_NUM_THREADS``) of every run;
            default the CPUs this process may use.
        timeout: Seconds per run (then SIGKILLed, reported ``timed out``).
        bandwidth_probe_bytes: Smallest file the sequential read is timed on
            (a scratch file of this size when the data has none).
        seed: ``--seed`` of partitioning and training.

    Returns:
        dict: Everything written to ``out_of_core.json``, plus ``markdown``.
    """
    graph_dir, out_dir = Path(graph_dir).absolute(), Path(out_dir).absolute()
    _check_arguments(modes, epochs, budget_bytes)
    from gnncore.store import GraphDir

    graph = GraphDir.open(graph_dir)
    work = Path(work_dir).absolute() if work_dir is not None else out_dir / "work"
    runs_dir = out_dir / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    threads = threads or len(os.sched_getaffinity(0))
    hb_budget = hierbatching_budget_bytes or budget_bytes

    store_info = None
    if "hierbatching" in modes:
        store_info = prepare_store(graph_dir, work, parts, static_fraction, partition_method, seed)
    evict = [graph_dir] + ([Path(store_info["store"])] if store_info else [])

    _log("timing a cold sequential read")
    disk = sequential_bandwidth(evict, bandwidth_probe_bytes, work)
    bandwidth = float(disk["bytes_per_s"])
    _log(f"sequential read: {format_size(bandwidth)}/s ({disk['file']})")

    env = dict(os.environ)
    env.update(
        {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"}
    )
    results: dict[str, dict[str, Any]] = {}
    for mode in modes:
        cmd = _train_command(graph_dir, mode, epochs, runs_dir, work, seed)
        if mode == "hierbatching":
            assert store_info is not None
            cmd += ["--store", store_info["store"], "--memory-budget", str(hb_budget)]
        cmd += list(train_args)
        limit = budget_bytes
        if mode == "in_memory" and in_memory_budget_bytes:
            limit = in_memory_budget_bytes
        results[mode] = _run_mode(
            mode, cmd, limit, env, timeout, evict, runs_dir, work / "runs" / mode, bandwidth
        )
    _compare_modes(results)
    first = next(iter(results.values()))
    result: dict[str, Any] = {
        "graph_dir": str(graph_dir),
        "dataset": graph.manifest.name,
        "num_nodes": int(graph.num_nodes),
        "num_edges": int(graph.manifest.num_edges),
        "graph_bytes": sum(p.stat().st_size for p in graph_dir.iterdir() if p.is_file()),
        "budget_bytes": budget_bytes,
        "hierbatching_budget_bytes": hb_budget if "hierbatching" in modes else None,
        "limited": first["limited"],
        "limit_reason": first["reason"],
        "epochs": epochs,
        "threads": threads,
        "train_args": list(train_args),
        "sequential_read": disk,
        "read_ahead_kb": read_ahead_kb(graph_dir),
        "store": store_info,
        "modes": results,
        **_by_mode(results),
        "load_average": os.getloadavg(),
    }
    markdown = to_markdown(result)
    (out_dir / "out_of_core.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    (out_dir / "out_of_core.md").write_text(markdown + "\n")
    return {**result, "markdown": markdown}


def _check_arguments(modes: Sequence[str], epochs: int, budget_bytes: int) -> None:
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise ValueError(f"modes must be some of {', '.join(MODES)}; got {list(modes)}")
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1; got {epochs}")
    if budget_bytes < 1:
        raise ValueError(f"the budget must be positive; got {budget_bytes}")


def _train_command(
    graph_dir: Path, mode: str, epochs: int, runs_dir: Path, work: Path, seed: int
) -> list[str]:
    """``gnncore train`` of one mode, its summary to ``runs_dir/<mode>.json``
    (removed first, as is its data root under ``work/runs``)."""
    root = work / "runs" / mode
    shutil.rmtree(root, ignore_errors=True)
    json_path = runs_dir / f"{mode}.json"
    json_path.unlink(missing_ok=True)
    return gnncore_command(
        "train",
        graph_dir,
        "--mode",
        mode,
        "--epochs",
        str(epochs),
        "--json",
        json_path,
        "--no-progress",
        "--data-root",
        root,
        "--device",
        "cpu",
        "--seed",
        str(seed),
    )


def _run_mode(
    mode: str,
    cmd: list[str],
    limit: int,
    env: dict[str, str],
    timeout: float | None,
    evict: list[Path],
    runs_dir: Path,
    root: Path,
    bandwidth: float,
) -> dict[str, Any]:
    """One mode's training under ``limit``, cold page cache; its result, its data
    root ``root`` removed after."""
    _log(f"{mode}: training under {format_size(limit)} (page cache evicted first)")
    run = run_limited(
        cmd,
        limit,
        env=env,
        timeout=timeout,
        evict=evict,
        capture_dir=runs_dir,
        capture_name=mode,
    )
    result = _mode_result(mode, run, runs_dir / f"{mode}.json", bandwidth)
    result["cmd"] = list(run.cmd)
    result["budget_bytes"] = limit
    shown = result.get("epoch_seconds")
    _log(
        f"{mode}: {result['status']} in {run.wall_seconds:.1f} s"
        + (f", epoch {shown:.2f} s" if shown is not None else "")
    )
    shutil.rmtree(root, ignore_errors=True)
    return result


def _compare_modes(results: dict[str, dict[str, Any]]) -> None:
    """Each mode's ``speedup_vs_mmap`` and ``accuracy_vs_in_memory``, in place."""
    base = results.get("mmap", {}).get("epoch_seconds")
    reference = results.get("in_memory", {}).get("test_accuracy")
    for res in results.values():
        mine = res.get("epoch_seconds")
        res["speedup_vs_mmap"] = base / mine if base and mine else None
        accuracy = res.get("test_accuracy")
        res["accuracy_vs_in_memory"] = (
            accuracy - reference if accuracy is not None and reference is not None else None
        )


def _by_mode(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The headline figures, each as ``{mode: value}``."""
    return {
        "epoch_seconds": {m: r.get("epoch_seconds") for m, r in results.items()},
        "speedup_vs_mmap": {m: r.get("speedup_vs_mmap") for m, r in results.items()},
        "bytes_read": {m: r.get("bytes_read") for m, r in results.items()},
        "test_accuracy": {m: r.get("test_accuracy") for m, r in results.items()},
        "killed_for_memory": {m: r["killed_for_memory"] for m, r in results.items()},
    }
