"""``gnncore bench chain``: the whole chain through Dagster under one memory limit.

:func:`bench_chain` is the end-to-end showcase a user would run from the UI:
a generated graph arrives as an edge list and a node table
(:mod:`gnncore_bench.chain_data`, the ``csv`` stage), then one Dagster run
materializes ``train_job`` for one dataset partition with the user's code
location (``pipelines.definitions``; :mod:`gnncore_bench.chain_child`):
``raw_dataset`` -> ``graph`` -> ``graph_partition`` (GREM) ->
``replication_plan`` -> ``placement_plan`` -> ``partitioned_store`` ->
``trained_model`` (mode auto, 1 epoch of GraphSAGE) -> ``production_model``
-> ``predictions`` for every node, with the asset checks.

The Dagster process runs under a cgroup v1 memory limit
(:func:`gnncore_bench.limits.run_limited`: page cache charged, the inputs
evicted from the page cache first), every step in it; the ``csv`` stage makes
the user's files, which exist before the chain, so it is measured without the
limit (the bounded CSV writer and the node table's row groups take about
0.5 GiB on 2M nodes, more than small limits allow). The memory resource is
``auto``, so every stage sizes itself from that limit. Per stage: seconds,
peak RSS of the step's own process (each step runs in its own process, one
at a time, as the UI runs them), storage bytes read and written, and
the work directory's peak size; beside them the asset's own
``peak_rss_bytes`` and ``memory_budget_bytes`` from its materialization
metadata, which the Dagster run shows (the step figures are also the run's
tags ``chain/<step>/<figure>``).

The disk the run needs is estimated first (:func:`disk_estimate`) and the run
refused when the work directory's file system cannot hold it. Everything goes
under ``WORK/chain-PID`` (the inputs, ``GNNCORE_DATA_ROOT``, ``DAGSTER_HOME``,
``TMPDIR``), removed at the end unless ``keep``; ``chain.json`` and
``chain.md`` and the processes' logs go to ``WORK``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from gnncore.sizes import format_size, parse_size
from gnncore.synth import SynthSpec
from gnncore.train.node.config import MODEL_DEFAULTS
from gnncore_bench.chain_data import EDGES_NAME, NODES_NAME
from gnncore_bench.limits import LimitedRun, cgroup_available, run_limited
from gnncore_bench.scale import _machine, _write_atomic, peak_disk

CHAIN_HELP = "the chain's assets through Dagster, generated CSV to predictions, under one limit"
#: The dataset partition the run materializes.
PARTITION = "chain"
#: The chain's assets, in order (the run's other steps are the asset checks).
ASSETS = (
    "raw_dataset",
    "graph",
    "graph_partition",
    "replication_plan",
    "placement_plan",
    "partitioned_store",
    "trained_model",
    "production_model",
    "predictions",
)
#: Bytes the run needs besides the data (MLflow and Dagster stores, logs, the model).
FIXED_DISK = 512 << 20


def disk_estimate(nodes: int, avg_degree: float, features: int, hidden: int = 256) -> int:
    """Bytes the work directory must hold at the run's peak (nothing is removed
    during the run): the CSV and node table, the graph directory (features,
    int64 CSR both ways), ingestion's scratch, the partition's and the store's
    copies of the edges and features, the layer files and predictions, a
    quarter more for what this does not model, and :data:`FIXED_DISK`."""
    edges = nodes * avg_degree / 2
    feature_bytes = nodes * features * 4
    csr = 2 * edges * 8 + nodes * 8
    csv = edges * (2 * len(str(nodes)) + 2)
    data = csv + feature_bytes + (feature_bytes + csr + nodes * 24) + 2 * csr
    data += csr + (feature_bytes + csr) + nodes * hidden * 4 * 2 + nodes * 64
    return int(data * 1.25) + FIXED_DISK


def run_config(
    partition_method: str = "grem",
    parts: int = 4,
    batch_size: int = 1024,
    hidden: int | None = None,
) -> dict:
    """The Dagster run config: the dataset from the harness's files, GREM, and
    1 epoch of GraphSAGE in mode auto (``hidden`` channels; ``None``: the model's
    default)."""
    node: dict[str, Any] = {"model": "sage", "epochs": 1, "mode": "auto", "batch_size": batch_size}
    if hidden is not None:
        node["hidden"] = hidden
    return {
        "ops": {
            "raw_dataset": {"config": {"format": "edgelist"}},
            "graph_partition": {"config": {"method": partition_method, "parts": parts}},
            "trained_model": {"config": {"node": node}},
        }
    }


def _log(message: str) -> None:
    print(f"[bench chain] {message}", file=sys.stderr, flush=True)


def _stage_row(name: str, run: LimitedRun, disk: int) -> dict[str, Any]:
    return {
        "stage": name,
        "status": "killed for memory"
        if run.killed_for_memory
        else ("timed out" if run.timed_out else ("ok" if run.exit_code == 0 else "failed")),
        "seconds": run.wall_seconds,
        "peak_rss_bytes": run.peak_rss_bytes,
        "read_bytes": run.read_bytes,
        "written_bytes": run.written_bytes,
        "peak_disk_bytes": disk,
    }


def _process(run: LimitedRun) -> dict[str, Any]:
    return {
        "exit_code": run.exit_code,
        "seconds": run.wall_seconds,
        "killed_for_memory": run.killed_for_memory,
        "timed_out": run.timed_out,
        "cgroup_peak_bytes": run.peak_memory_bytes,
        "peak_rss_bytes": run.peak_rss_bytes,
        "limited": run.limited,
        "reason": run.reason,
    }


def bench_chain(
    work: str | os.PathLike[str],
    nodes: int,
    avg_degree: float,
    features: int,
    limit_bytes: int | None,
    *,
    classes: int = 8,
    parts: int = 4,
    batch_size: int = 1024,
    hidden: int | None = None,
    keep: bool = False,
    timeout: float | None = None,
    seed: int = 0,
    communities_per_class: int = 1,
    intra_fraction: float | None = None,
) -> dict[str, Any]:
    """Run the chain (module docstring); write ``chain.json`` and ``chain.md`` in ``work``.

    Args:
        work: The work directory (created); the run's files go to
            ``work/chain-PID``, removed at the end unless ``keep``.
        nodes, avg_degree, features, classes: The generated graph.
        limit_bytes: The cgroup limit of both processes, page cache included;
            ``None``: no limit (the memory resource's ``auto`` is then the
            available memory).
        parts: GREM's parts (and the store's).
        batch_size: Training seeds per mini-batch.
        hidden: GraphSAGE's hidden channels (``None``: the model's default);
            the layer files of evaluation and predictions are ``nodes x hidden``.
        keep: Keep the inputs, the Dagster home and the data root.
        timeout: Seconds per process (then killed).
        seed: The generator's seed.
        communities_per_class: Planted communities per class
            (:class:`~gnncore.synth.SynthSpec`): more, smaller communities make
            a graph local at a finer grain than its labels, so a min-cut
            partition cuts fewer edges.
        intra_fraction: The expected fraction of edges inside a community;
            ``None``: the generator's default.

    Returns:
        dict: What ``chain.json`` holds, plus ``markdown``.

    Raises:
        ValueError: On bad settings, or when the disk cannot hold the run.
    """
    if nodes < 100 or avg_degree <= 0 or features < 1:
        raise ValueError("the chain needs at least 100 nodes, a positive degree and features")
    spec: dict[str, Any] = {
        "num_nodes": nodes,
        "avg_degree": avg_degree,
        "num_classes": classes,
        "num_features": features,
        "seed": seed,
        "communities_per_class": communities_per_class,
    }
    if intra_fraction is not None:
        spec["intra_fraction"] = intra_fraction
    generator = SynthSpec(**spec)  # refuses bad settings (ValueError) before anything is written
    work = Path(work).absolute()
    work.mkdir(parents=True, exist_ok=True)
    needed = disk_estimate(nodes, avg_degree, features, hidden or MODEL_DEFAULTS["sage"]["hidden"])
    machine = _machine(work)
    if needed > machine["disk_free_bytes"]:
        raise ValueError(
            f"the chain needs about {format_size(needed)} of disk in {work}; "
            f"{format_size(machine['disk_free_bytes'])} is free"
        )
    root = work / f"chain-{os.getpid()}"
    inputs, home, tmp = root / "input", root / "dagster_home", root / "tmp"
    for folder in (inputs, home, tmp):
        folder.mkdir(parents=True)
    shutil.copy(Path(__file__).parents[1] / "pipelines" / "dagster.yaml", home)
    env = _environment(root)
    report: dict[str, Any] = {
        "nodes": nodes,
        "avg_degree": avg_degree,
        "features": features,
        "classes": classes,
        "hidden": hidden or MODEL_DEFAULTS["sage"]["hidden"],
        "communities_per_class": communities_per_class,
        "intra_fraction": generator.intra_fraction,
        "feature_bytes": nodes * features * 4,
        "limit_bytes": limit_bytes,
        "disk_needed_estimate_bytes": needed,
        "machine": machine,
        "load_average_before": os.getloadavg(),
        "kept": str(root) if keep else None,
        "stages": [],
    }
    _log(
        f"{nodes:,} nodes, degree {avg_degree}, {features} features "
        f"({format_size(nodes * features * 4)}) under "
        f"{'no limit' if limit_bytes is None else format_size(limit_bytes)}; disk: about "
        f"{format_size(needed)} needed, {format_size(machine['disk_free_bytes'])} free"
    )
    started = time.perf_counter()
    try:
        config = run_config("grem", parts, batch_size, hidden)
        _run_chain(report, root, env, spec, limit_bytes, config, timeout, work)
    finally:
        report["seconds"] = time.perf_counter() - started
        report["load_average_after"] = os.getloadavg()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
        _save(work, report)
    from gnncore_bench.chain_report import to_markdown

    return {**report, "markdown": to_markdown(report)}


def _environment(root: Path) -> dict[str, str]:
    """The processes' environment: this one's, with the Dagster home, the data
    root, the temporary directory under ``root`` and the memory budget ``auto``."""
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI",)}
    env.update(
        DAGSTER_HOME=str(root / "dagster_home"),
        GNNCORE_DATA_ROOT=str(root / "data"),
        GNNCORE_MEMORY_BUDGET="auto",
        TMPDIR=str(root / "tmp"),
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", str(os.cpu_count() or 1)),
    )
    return env


def resume_chain(
    root: str | os.PathLike[str],
    limit_bytes: int | None,
    *,
    batch_size: int | None = None,
    hidden: int | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Re-execute a kept chain's failed Dagster run from its failure (as the UI's
    "Re-execute from failure"): the steps that succeeded are not run again, the
    failed one and those after it run in a new run of the same instance, under
    ``limit_bytes``. ``batch_size`` and ``hidden`` change ``trained_model``'s
    config (e.g. after a refusal naming the minimum). The report
    (``chain.json`` beside ``root``) keeps the earlier rows of the steps not
    run again, each with the run it ran in, and lists the runs.

    Args:
        root: A run folder kept by :func:`bench_chain` (``--keep``): ``WORK/chain-PID``.

    Raises:
        ValueError: ``root`` is not a kept chain, or its run has nothing to resume.
    """
    root = Path(root).absolute()
    work, settings_path = root.parent, root / "settings.json"
    if not settings_path.is_file() or not (work / "chain.json").is_file():
        raise ValueError(f"{root} is not a kept chain (no settings.json, or no ../chain.json)")
    settings = json.loads(settings_path.read_text())
    node = settings["run_config"]["ops"]["trained_model"]["config"]["node"]
    for key, value in (("batch_size", batch_size), ("hidden", hidden)):
        if value is not None:
            node[key] = value
    settings.update(resume=True, preload_libraries=limit_bytes is None)
    settings_path.write_text(json.dumps(settings))
    report = json.loads((work / "chain.json").read_text())
    earlier = report.get("run_id")
    started = time.perf_counter()
    _log(f"dagster: re-executing run {earlier} from its failure")
    run = _run_dagster(root, _environment(root), limit_bytes, timeout, work)
    child = json.loads((root / "steps.json").read_text())
    if not child.get("finished"):
        what = (
            "nothing was re-executed"
            if child.get("parent_run_id") is None
            else (
                f"the re-execution of run {child['parent_run_id']} did not finish "
                f"({_process_status(run)})"
            )
        )
        raise ValueError(f"{what}: see {work / 'logs' / 'dagster.stderr'}")
    runs = report.get("runs") or [{"run_id": earlier, "process": report.get("dagster_process")}]
    runs.append({"run_id": child.get("run_id"), "parent_run_id": child.get("parent_run_id"),
                 "process": _process(run)})  # fmt: skip
    kept = [s for s in report["stages"] if s["stage"] == "csv" or s.get("status") == "ok"]
    for stage in kept:
        stage.setdefault("run_id", earlier)
    report["stages"] = kept
    report.update(runs=runs, limit_bytes=limit_bytes)
    _add_run(report, run, child)
    report["seconds"] = report.get("seconds", 0) + time.perf_counter() - started
    report["load_average_after"] = os.getloadavg()
    _save(work, report)
    from gnncore_bench.chain_report import to_markdown

    return {**report, "markdown": to_markdown(report)}


def _save(work: Path, report: dict[str, Any]) -> None:
    from gnncore_bench.chain_report import to_markdown

    _write_atomic(work / "chain.json", json.dumps(report, indent=2, default=str) + "\n")
    _write_atomic(work / "chain.md", to_markdown(report) + "\n")


def _run_chain(
    report: dict[str, Any],
    root: Path,
    env: dict[str, str],
    spec: dict[str, Any],
    limit_bytes: int | None,
    config: dict[str, Any],
    timeout: float | None,
    work: Path,
) -> None:
    """The ``csv`` process (the user's files: measured, not limited), then the
    Dagster process under the limit; rows added to ``report``."""
    logs, inputs = work / "logs", root / "input"
    summary = root / "input.json"
    cmd: list[str | os.PathLike[str]] = [sys.executable, "-m", "gnncore_bench.chain_data"]
    cmd += [inputs, json.dumps(spec), summary]
    _log("csv: the edge list and the node table")
    with peak_disk(root) as disk:
        run = run_limited(cmd, None, env=env, timeout=timeout, capture_dir=logs, capture_name="csv")
    row = _stage_row("csv", run, disk["peak"])
    report["csv_process"] = _process(run)
    report["stages"].append(row)
    _save(work, report)
    _log(f"csv: {row['status']} in {run.wall_seconds:.1f} s")
    if row["status"] != "ok":
        report["failed"] = True
        return
    report["input"] = json.loads(summary.read_text())
    config["ops"]["raw_dataset"]["config"].update(
        source=str(inputs / EDGES_NAME), nodes=str(inputs / NODES_NAME)
    )
    settings = root / "settings.json"
    steps = root / "steps.json"
    settings.write_text(
        json.dumps(
            {
                "out": str(steps),
                "partition": PARTITION,
                "disk_root": str(root),
                "run_config": config,
                "preload_libraries": limit_bytes is None,
            }
        )
    )
    _log("dagster: train_job for partition " + PARTITION)
    run = _run_dagster(root, env, limit_bytes, timeout, work)
    child = json.loads(steps.read_text()) if steps.is_file() else {"steps": []}
    _add_run(report, run, child)


def _run_dagster(
    root: Path, env: dict[str, str], limit_bytes: int | None, timeout: float | None, work: Path
) -> LimitedRun:
    """The Dagster process of ``root/settings.json`` under ``limit_bytes`` (the
    input files evicted from the page cache first, where a resumed chain still
    has them: once the graph is ingested they may be deleted)."""
    inputs = root / "input"
    return run_limited(
        [sys.executable, "-m", "gnncore_bench.chain_child", root / "settings.json"],
        limit_bytes,
        env=env,
        timeout=timeout,
        evict=[inputs] if inputs.exists() else [],
        capture_dir=work / "logs",
        capture_name="dagster",
    )


def _add_run(report: dict[str, Any], run: LimitedRun, child: dict[str, Any]) -> None:
    """The Dagster run's outcome and its steps' rows (``child``: what
    :mod:`gnncore_bench.chain_child` wrote) added to ``report``."""
    report["dagster_process"] = _process(run)
    report["limited"], report["limit_reason"] = run.limited, run.reason
    report["run_id"] = child.get("run_id")
    report["run_success"] = child.get("success", False)
    report["failed"] = not report["run_success"]  # the verb exits 1 (gnncore.cli.main)
    report["checks"] = {
        **report.get("checks", {}),
        **{s["step"]: s.get("status") for s in child["steps"] if s["step"] not in ASSETS},
    }
    for step in child["steps"]:
        if step["step"] not in ASSETS:
            continue
        if step.get("status") == "running":  # the process died in this step
            step["status"] = _process_status(run)
            step["seconds"] = None
        report["stages"].append({"stage": step.pop("step"), "run_id": child.get("run_id"), **step})
    report["predictions"] = _predictions(report)
    _log(f"dagster: {'ok' if report['run_success'] else _process_status(run)}")


def _process_status(run: LimitedRun) -> str:
    if run.killed_for_memory:
        return "killed for memory"
    return "timed out" if run.timed_out else f"failed (exit {run.exit_code})"


def _predictions(report: dict[str, Any]) -> dict[str, Any]:
    """Rows of the predictions against the graph's nodes, and the accuracies."""
    by = {s["stage"]: s.get("metadata", {}) for s in report["stages"]}
    pred, graph = by.get("predictions", {}), by.get("graph", {})
    return {
        "rows": pred.get("rows"),
        "num_nodes": graph.get("num_nodes"),
        "test_accuracy": pred.get("test_accuracy"),
        "training_test_accuracy": pred.get("training_test_accuracy"),
    }


def add_chain_arguments(parser: argparse.ArgumentParser) -> None:
    """``bench chain``'s options; ``parser``'s ``run`` default runs it."""

    def limit(text: str) -> int | None:
        return None if text == "none" else parse_size(text)

    parser.add_argument(
        "--work",
        type=Path,
        default=None,
        metavar="DIR",
        help="run folder, chain.json, chain.md, logs (required unless --resume)",
    )
    parser.add_argument(
        "--resume",
        type=Path,
        default=None,
        metavar="RUN_DIR",
        help="re-execute a kept chain's (--keep: WORK/chain-PID) failed run from its failure, "
        "under --limit; --batch-size and --hidden change trained_model's config",
    )
    parser.add_argument("--nodes", type=int, default=None, help="nodes of the generated graph")
    parser.add_argument("--avg-degree", type=float, default=10.0)
    parser.add_argument("--features", type=int, default=64, help="float32 features per node")
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument(
        "--communities-per-class",
        type=int,
        default=1,
        metavar="K",
        help="planted communities per class: more make the graph local at a finer grain",
    )
    parser.add_argument(
        "--intra-fraction",
        type=float,
        default=None,
        metavar="F",
        help="expected fraction of edges inside a community (default: the generator's, 0.8)",
    )
    parser.add_argument(
        "--limit",
        type=limit,
        required=True,
        metavar="SIZE|none",
        help="cgroup v1 memory limit of every stage, page cache charged; none: no limit",
    )
    parser.add_argument("--parts", type=int, default=4, help="GREM's parts")
    parser.add_argument("--batch-size", type=int, default=None, help="(default: 1024)")
    parser.add_argument(
        "--hidden", type=int, default=None, help="GraphSAGE's hidden channels (default: 256)"
    )
    parser.add_argument("--timeout", type=float, default=None, help="seconds per process")
    parser.add_argument(
        "--keep", action="store_true", help="keep the inputs, data root, Dagster home"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(run=run_from_args)


def run_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`bench_chain` from ``bench chain``'s parsed options."""
    if args.limit is not None and cgroup_available() is not None:
        _log(f"the limit cannot be enforced here: {cgroup_available()}")
    if args.resume is not None:
        return resume_chain(
            args.resume, args.limit, batch_size=args.batch_size, hidden=args.hidden,
            timeout=args.timeout,
        )  # fmt: skip
    if args.work is None or args.nodes is None:
        raise ValueError("bench chain needs --work and --nodes (or --resume RUN_DIR)")
    return bench_chain(
        args.work,
        args.nodes,
        args.avg_degree,
        args.features,
        args.limit,
        classes=args.classes,
        parts=args.parts,
        batch_size=1024 if args.batch_size is None else args.batch_size,
        hidden=args.hidden,
        keep=args.keep,
        timeout=args.timeout,
        seed=args.seed,
        communities_per_class=args.communities_per_class,
        intra_fraction=args.intra_fraction,
    )
