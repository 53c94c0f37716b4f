"""Out-of-core training: in_memory, mmap and HierBatching under one memory budget.

Builds (once; reused while its parameters match) a planted-partition graph
whose feature matrix is larger than the budget -- by default 2,000,000 nodes
x 256 float32 features (1.9 GiB of features, 10M undirected edges, 16
classes) -- in ``--data`` (default ``/work/bench-data/out-of-core``; never in
the repository, and not on a tmpfs: the page cache must be evictable), then
runs ``gnncore bench out-of-core`` on it (:func:`gnncore_bench.outofcore.
bench_out_of_core`): the store is written once outside the limit, then each
mode trains in its own process under the kernel-enforced budget (cgroup v1,
page cache counted) with the graph and store evicted from the page cache
first. Writes ``out_of_core.json`` and ``out_of_core.md`` into ``--out``
(default ``bench-out/out-of-core``).

The graph's splits are small on purpose (2% train, 0.5% validation, 1% test,
stratified; the other nodes are unlabelled for the splits): the mmap baseline
reads every sampled row at random from disk, and evaluating 80% of 2M nodes
(the generator's default test split) with it would take hours. Sampling
fanouts default to 10,5 for training and evaluation for the same reason.

    .venv/bin/python benchmarks/out_of_core.py [--data DIR] [--nodes 2000000]
        [--features 256] [--budget 1GiB] [--epochs 1] [--hierbatching-budget SIZE]
        [--timeout S] [--out DIR] [--keep-data]

``--mega-batch-passes`` defaults to 1 here (the training default is 2) so that
an epoch of every mode trains each training node once: the same work.

Not part of the test suite. Without ``--keep-data`` the graph and the store
are deleted at the end (about 4.5 GiB with the defaults).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
from generated_graph import cached_graph

from gnncore.sizes import format_size, parse_size

DEFAULT_DATA = Path("/work/bench-data/out-of-core")


def build_graph(
    out: Path,
    nodes: int,
    features: int,
    avg_degree: float,
    classes: int,
    communities_per_class: int,
    seed: int,
    train_fraction: float,
    val_fraction: float,
    test_fraction: float,
) -> dict[str, Any]:
    """Write the planted-partition graph into ``out`` unless the same one is there.

    Edges, labels and features come from :func:`gnncore.synth.generate_graph`
    (features written in row chunks, never whole in memory); the splits are
    random subsets of the generator's stratified train/val/test split, each
    cut down to the fraction given, as share of all nodes
    (:func:`generated_graph.cached_graph`).
    """
    params = {
        "nodes": nodes,
        "features": features,
        "avg_degree": avg_degree,
        "classes": classes,
        "communities_per_class": communities_per_class,
        "seed": seed,
        "train_fraction": train_fraction,
        "val_fraction": val_fraction,
        "test_fraction": test_fraction,
    }

    def choose(y: np.ndarray, splits: tuple[np.ndarray, ...], rng: np.random.Generator) -> Any:
        wanted = (train_fraction, val_fraction, test_fraction)
        return tuple(
            rng.choice(part, min(len(part), int(round(frac * nodes))), replace=False)
            for part, frac in zip(splits, wanted)
        )

    return cached_graph(out, params, "ooc-synth", choose)


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="graph + store live here")
    parser.add_argument("--nodes", type=int, default=2_000_000)
    parser.add_argument("--features", type=int, default=256)
    parser.add_argument("--avg-degree", type=float, default=10.0)
    parser.add_argument("--classes", type=int, default=16)
    parser.add_argument(
        "--communities-per-class",
        type=int,
        default=1,
        help="generator communities per class (1: a class is one community of N/classes nodes)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-fraction", type=float, default=0.02)
    parser.add_argument("--val-fraction", type=float, default=0.005)
    parser.add_argument("--test-fraction", type=float, default=0.01)
    parser.add_argument("--budget", type=parse_size, default=parse_size("1GiB"))
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--parts", type=int, default=64)
    parser.add_argument("--modes", default="in_memory,mmap,hierbatching")
    parser.add_argument("--fanouts", default="10,5")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--mega-batch-passes", type=int, default=1)
    parser.add_argument(
        "--hierbatching-budget",
        type=parse_size,
        default=None,
        help="hierbatching's --memory-budget, the whole process's (default: --budget)",
    )
    parser.add_argument(
        "--in-memory-budget",
        type=parse_size,
        default=None,
        help="the in_memory run's limit (default --budget): the accuracy reference",
    )
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per mode")
    parser.add_argument("--out", type=Path, default=Path("bench-out/out-of-core"))
    parser.add_argument("--keep-data", action="store_true", help="keep graph and store")
    parser.add_argument("--build-only", action="store_true")
    args = parser.parse_args(argv)

    args.data.mkdir(parents=True, exist_ok=True)
    graph = args.data / "graph"
    built = build_graph(
        graph,
        args.nodes,
        args.features,
        args.avg_degree,
        args.classes,
        args.communities_per_class,
        args.seed,
        args.train_fraction,
        args.val_fraction,
        args.test_fraction,
    )
    features_bytes = args.nodes * args.features * 4
    print(
        f"features {format_size(features_bytes)} against a budget of {format_size(args.budget)}",
        file=sys.stderr,
    )
    if args.build_only:
        return 0
    from gnncore_bench.outofcore import bench_out_of_core

    result = bench_out_of_core(
        graph,
        args.out,
        args.budget,
        args.epochs,
        modes=tuple(m for m in args.modes.split(",") if m),
        parts=args.parts,
        work_dir=args.data / "work",
        hierbatching_budget_bytes=args.hierbatching_budget,
        in_memory_budget_bytes=args.in_memory_budget,
        train_args=[
            "--fanouts",
            args.fanouts,
            "--eval-fanouts",
            args.fanouts,
            "--batch-size",
            str(args.batch_size),
            "--mega-batch-passes",
            str(args.mega_batch_passes),
        ],
        timeout=args.timeout,
    )
    result["dataset"] = {**built, "feature_bytes": features_bytes, "path": str(graph)}
    (args.out / "out_of_core.json").write_text(json.dumps(result, indent=2) + "\n")
    print(result["markdown"])
    if not args.keep_data:
        size = _du(args.data)
        shutil.rmtree(graph)
        shutil.rmtree(args.data / "work", ignore_errors=True)
        os.unlink(graph.parent / f"{graph.name}.params.json")
        print(f"removed {format_size(size)} under {args.data}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
