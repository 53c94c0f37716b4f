"""Peak memory and time of ``gnncore predict``: layers in memory vs on disk.

Runs ``gnncore predict GRAPH OUT --memory-budget ...`` as a child process per
``--run MODE[@LIMIT]``: ``memory`` keeps every layer's ``[N, hidden]`` rows in
memory (``--memory-budget none``, today's path), ``bounded`` gives the budget
(``--budget``, default ``auto``: half of what the process may take, which
under a cgroup is the cgroup's room). ``@LIMIT`` runs the command in a cgroup
v1 memory cgroup of that size (page cache charged; the graph's files are
evicted from the page cache first: ``gnncore_bench.limits.run_limited``), so
a run that needs more is OOM-killed; without it the run is only measured.

The model is ``--model`` (a model directory or ``models:/`` URI in
``$MLFLOW_TRACKING_URI``), else one trained here for a few batches on a small
generated graph of the same feature width and classes (``--hidden``,
``--layers``; its store is a SQLite file under ``--work``, handed to the
command through ``$MLFLOW_TRACKING_URI``). ``store`` is ``bounded`` with
``--store DIR`` (a partitioned store of the graph: layers in its node order,
part by part; the option ``--store`` names it). When runs finished without a
limit and with different modes, each one's predictions are compared with the
first's row group by row group (predicted classes equal; largest probability
difference).

Prints the results and writes them as JSON (``--out``)::

    .venv/bin/python benchmarks/predict_memory.py /tmp/g1m --work /tmp/pm \\
        --run memory --run bounded --run memory@768MiB --run bounded@768MiB \\
        --out bench-out/predict_memory.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from gnncore.sizes import parse_size
from gnncore.store import GraphDir
from gnncore_bench.limits import gnncore_command, run_limited

MODES = {"memory": "none", "bounded": None, "store": None}  # None: the --budget given


def _train_model(graph: GraphDir, work: Path, hidden: int, layers: int) -> tuple[str, str]:
    """A node model of ``graph``'s width and classes trained for one epoch on a
    5,000-node generated graph; returns (``models:/`` URI, tracking URI)."""
    from gnncore.modes import RunRecording, train_graph_dir
    from gnncore.synth import SynthSpec, generate_graph  # lazy: only without --model
    from gnncore.tracking.mlflow import MlflowTracker, default_tracking_uri
    from gnncore.train import NodeTrainConfig

    m = graph.manifest
    small = work / "train-graph"
    spec = SynthSpec(num_nodes=5000, avg_degree=10, num_classes=m.num_classes,
                     num_features=m.num_features, seed=0)  # fmt: skip
    generate_graph(small, spec, name=m.name, memory_budget=None)
    uri = default_tracking_uri(work / "mlflow-root")
    config = NodeTrainConfig(hidden=hidden, fanouts=(10,) * layers, epochs=1, batch_size=500,
                             device="cpu", seed=0)  # fmt: skip
    recording = RunRecording(tracking=MlflowTracker(uri), progress=False)
    result = train_graph_dir(GraphDir.open(small), config, recording=recording)
    return str(result.model_uri), uri


def _compare(a: Path, b: Path) -> dict[str, Any]:
    """Row group by row group: rows whose predicted class differs, and the
    largest absolute difference of a probability (or embedding entry)."""
    fa, fb = pq.ParquetFile(a), pq.ParquetFile(b)
    column = "probabilities" if "probabilities" in fa.schema_arrow.names else "embedding"
    classes = "predicted_class" in fa.schema_arrow.names
    rows = differ = 0
    largest = 0.0
    batches = zip(fa.iter_batches(batch_size=65536), fb.iter_batches(batch_size=65536), strict=True)
    for x, y in batches:
        rows += x.num_rows
        if classes:
            px = x.column("predicted_class").to_numpy()
            differ += int(np.count_nonzero(px != y.column("predicted_class").to_numpy()))
        vx = x.column(column).flatten().to_numpy()
        vy = y.column(column).flatten().to_numpy()
        largest = max(largest, float(np.max(np.abs(vx - vy), initial=0.0)))
    return {"rows": rows, "predicted_class_differs": differ, f"max_abs_diff_{column}": largest}


def _run_one(args: argparse.Namespace, run: str, model: str, env: dict[str, str]) -> dict[str, Any]:
    mode, _, limit_text = run.partition("@")
    if mode not in MODES:
        raise SystemExit(f"--run {run}: mode must be one of {sorted(MODES)}")
    limit = parse_size(limit_text) if limit_text else None
    budget = MODES[mode] or args.budget
    name = f"{mode}-{limit_text or 'unlimited'}"
    out, summary = args.work / f"pred-{name}", args.work / f"{name}.json"
    summary.unlink(missing_ok=True)
    store = ["--store", str(args.store)] if mode == "store" else []
    if store and args.store is None:
        raise SystemExit(f"--run {run}: the store mode needs --store DIR")
    cmd = gnncore_command("predict", args.graph, out, "--model", model, "--memory-budget", budget,
                          "--batch-size", str(args.batch_size), "--device", "cpu",
                          "--no-progress", "--overwrite", "--json", summary, *store)  # fmt: skip
    evict = [args.graph] + ([args.store] if store else [])
    load = os.getloadavg()[0]
    result = run_limited(cmd, limit, env=env, timeout=args.timeout, evict=evict,
                         capture_dir=args.work, capture_name=name)  # fmt: skip
    record: dict[str, Any] = {
        "run": run,
        "mode": mode,
        "memory_budget": budget,
        "limit_bytes": limit,
        "limited": result.limited,
        "exit_code": result.exit_code,
        "killed_for_memory": result.killed_for_memory,
        "timed_out": result.timed_out,
        "wall_seconds": round(result.wall_seconds, 2),
        "peak_rss_bytes": result.peak_rss_bytes,
        "cgroup_peak_bytes": result.peak_memory_bytes,
        "read_bytes": result.read_bytes,
        "written_bytes": result.written_bytes,
        "out_dir": str(out),
        "load_average_1min": [round(load, 2), round(os.getloadavg()[0], 2)],  # start, end
    }
    if result.exit_code == 0 and summary.is_file():
        info = json.loads(summary.read_text())
        keys = ("seconds", "layers_on_disk", "batch_size", "max_edges", "test_accuracy",
                "in_memory_layer_bytes", "memory_budget", "order", "store")  # fmt: skip
        record["summary"] = {k: info.get(k) for k in keys}
    elif result.stderr_path:
        record["stderr_tail"] = Path(result.stderr_path).read_text()[-600:]
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph", type=Path, help="a graph directory with features")
    parser.add_argument("--work", type=Path, required=True, help="model store and outputs")
    parser.add_argument("--run", action="append", default=[], metavar="MODE[@LIMIT]",
                        help="memory or bounded, optionally @SIZE for a cgroup limit "
                        "(repeatable; default: memory, bounded)")  # fmt: skip
    parser.add_argument("--budget", default="auto", help="--memory-budget of bounded runs")
    parser.add_argument("--model", default=None, help="model directory or models:/ URI")
    parser.add_argument("--store", type=Path, default=None,
                        help="a partitioned store of the graph, for --run store")  # fmt: skip
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--out", type=Path, default=None, help="write the results here (JSON)")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    graph = GraphDir.open(args.graph)
    env = dict(os.environ)
    model = args.model
    if model is None:
        model, env["MLFLOW_TRACKING_URI"] = _train_model(graph, args.work, args.hidden, args.layers)
    report: dict[str, Any] = {
        "graph": {
            "path": str(args.graph),
            "num_nodes": graph.num_nodes,
            "num_edges": graph.manifest.num_edges,
            "num_features": graph.manifest.num_features,
        },  # fmt: skip
        "model": model,
        "hidden": args.hidden,
        "layers": args.layers,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
        },  # fmt: skip
        "runs": [],
    }
    for run in args.run or ["memory", "bounded"]:
        report["runs"].append(_run_one(args, run, model, env))
        print(json.dumps(report["runs"][-1]), flush=True)
        _write(args.out, report)  # after each run: a long one may be stopped
    done = {r["mode"]: Path(r["out_dir"]) for r in report["runs"] if r["exit_code"] == 0}
    first = next(iter(done), None)
    report["comparison"] = {
        f"{first} vs {mode}": _compare(done[first] / "predictions.parquet",
                                       path / "predictions.parquet")
        for mode, path in done.items() if mode != first
    }  # fmt: skip
    print(json.dumps(report, indent=2))
    _write(args.out, report)


def _write(out: Path | None, report: dict[str, Any]) -> None:
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
