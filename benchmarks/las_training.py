"""Locality-aware sampling in real training: host reads and accuracy against the scale s.

Generates (once, cached under ``--cache``) a planted-partition graph with
``gnncore synth`` (default 200,000 nodes, average degree 20, 16 features, 16
classes), computes a placement (4 devices, 5% of the nodes cached on each,
topology ``all``, spmv estimator) and trains GraphSAGE (fanouts 10,5) through
the placed feature store, once per scale: the plain sampler, LAS with s fixed
at 2, 4 and 8, and LAS with s adapted by Algorithm 2. For each run it reports
the device's feature reads per tier (the same counters MLflow gets), the
host share, the test accuracy and the mean epoch time, each the median over
``--seeds``; writes ``las_training.json`` / ``.md`` into ``--out`` (default
``bench-out/las``).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/las_training.py [--out DIR] [--seeds 0,1,2]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from pathlib import Path
from typing import Any

from plan_placement import ensure_graph

from gnncore.modes import RunInputs, RunRecording, train_graph_dir
from gnncore.plan import PlacementSettings, plan_placement
from gnncore.train import NodeTrainConfig

TIERS = ("local", "peer", "host")


def run(graph: Path, plan: Path, seed: int, epochs: int, scale: float | None) -> dict[str, Any]:
    """One training run; ``scale`` None: plain sampler, 0: adaptive LAS."""
    las = {} if scale is None else {"locality_aware": True, "las_fixed_scale": scale}
    config = NodeTrainConfig(
        model="sage",
        fanouts=(10, 5),
        batch_size=1024,
        epochs=epochs,
        patience=0,
        seed=seed,
        prefetch_workers=0,
        **las,
    )
    result = train_graph_dir(
        graph, config, inputs=RunInputs(placement=plan), recording=RunRecording(progress=False)
    )
    reads = {t: sum(e[f"feature_reads_{t}"] for e in result.throughput) for t in TIERS}
    total = sum(reads.values())
    return {
        **reads,
        "host_share": reads["host"] / total,
        "test_accuracy": result.test_accuracy,
        "epoch_s": statistics.mean(e["train_s"] for e in result.throughput),
        "loading_share": statistics.mean(
            (e["wait_s"] + e["transfer_s"]) / e["train_s"] for e in result.throughput
        ),
        # A fixed scale logs nothing per epoch; the adaptive one logs las_scale.
        "scales": [e.get("las_scale", scale or 1.0) for e in result.throughput],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench-out/las"))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/gnncore-bench/las"))
    parser.add_argument("--nodes", type=int, default=200_000)
    parser.add_argument("--avg-degree", type=float, default=20.0)
    parser.add_argument("--cache-fraction", type=float, default=0.05)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--seeds", default="0,1,2")
    args = parser.parse_args(argv)

    graph_path = args.cache / f"synth-n{args.nodes}-d{args.avg_degree:g}"
    graph = ensure_graph(graph_path, args.nodes, args.avg_degree, 0)
    plan = args.cache / f"placement-c{args.cache_fraction:g}"
    settings = PlacementSettings(devices=4, cache_fraction=args.cache_fraction)
    plan_placement(graph.path, plan, settings, reuse=True)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    variants: dict[str, float | None] = {
        "plain": None,
        "LAS s=1": 1.0,
        "LAS s=2": 2.0,
        "LAS s=4": 4.0,
        "LAS s=8": 8.0,
        "LAS adaptive": 0.0,
    }
    rows = []
    for name, scale in variants.items():
        runs = [run(graph.path, plan, seed, args.epochs, scale) for seed in seeds]
        row = {"variant": name, "runs": runs}
        for key in (
            "local",
            "peer",
            "host",
            "host_share",
            "test_accuracy",
            "epoch_s",
            "loading_share",
        ):
            row[key] = statistics.median(r[key] for r in runs)
        rows.append(row)
        print(
            f"{name:>13}: host share {row['host_share']:.4f}, host {row['host']:,.0f}, "
            f"test acc {row['test_accuracy']:.4f}, epoch {row['epoch_s']:.2f}s",
            flush=True,
        )
    plain_host = rows[0]["host"]
    lines = [
        "| sampler | local | peer | host | host share | host / plain | test accuracy | s2 "
        "| loading share | s per epoch |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['variant']} | {row['local']:,.0f} | {row['peer']:,.0f} | {row['host']:,.0f} "
            f"| {row['host_share']:.4f} | {row['host'] / plain_host:.3f} "
            f"| {row['test_accuracy']:.4f} | {row['epoch_s']:.2f} | {row['loading_share']:.3f} "
            f"| {', '.join(f'{x:g}' for x in row['runs'][0]['scales'])} |"
        )
    lines[0] = lines[0].replace("s2", "epoch s")
    m = graph.manifest
    machine = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS", "unset"),
    }
    result = {
        "graph": {"path": str(graph.path), "nodes": m.num_nodes, "edges": m.num_edges},
        "placement": {"devices": 4, "cache_fraction": args.cache_fraction},
        "epochs": args.epochs,
        "seeds": seeds,
        "machine": machine,
        "rows": rows,
        "markdown": "\n".join(lines),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "las_training.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "las_training.md").write_text(result["markdown"] + "\n")
    print(result["markdown"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
