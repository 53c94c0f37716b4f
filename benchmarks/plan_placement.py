"""Feature placement against random and METIS partition layouts on a 10M+-edge graph.

Generates (once, cached under ``--cache``, default ``/tmp/gnncore-bench/plans``)
a degree-corrected planted-partition graph with ``gnncore synth`` -- by
default 1,000,000 nodes at average degree 20.5: about 10.25M undirected edges,
20.5M stored adjacency entries -- checks that the manifest holds at least 10M
edges (``num_edges``, stored) and 10M undirected ones, then runs
:func:`gnncore_bench.plan.bench_placement` (what ``gnncore bench plans
placement`` runs) with 4 devices caching 10% of the nodes each, and writes
``plans_placement.json`` / ``.md`` into ``--out`` (default
``bench-out/plans``). The issue's targets are checked and printed: host reads
at least 1.2x fewer than each partition layout's, and the placement (estimator
included) at least 20x faster than METIS.

    .venv/bin/python benchmarks/plan_placement.py [--out DIR] [--cache DIR] [--strict]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from gnncore.store import GraphDir
from gnncore_bench.plan import bench_placement

MIN_EDGES = 10_000_000
HOST_TARGET = 1.2
SPEED_TARGET = 20.0


def ensure_graph(path: Path, nodes: int, degree: float, seed: int) -> GraphDir:
    """The generated graph at ``path``, made with ``gnncore synth`` when absent."""
    if not (path / "manifest.json").exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "gnncore.cli.main",
                "synth",
                str(path),
                "--nodes",
                str(nodes),
                "--avg-degree",
                str(degree),
                "--classes",
                "16",
                "--features",
                "16",
                "--seed",
                str(seed),
                "--name",
                f"synth-{nodes // 1000}k-d{degree:g}",
                "--no-progress",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return GraphDir.open(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench-out/plans"))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/gnncore-bench/plans"))
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--avg-degree", type=float, default=20.5)
    parser.add_argument("--graph-seed", type=int, default=0)
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--cache-fraction", type=float, default=0.1)
    parser.add_argument("--alpha", type=float, default=0.0)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--strict", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args(argv)

    path = args.cache / f"synth-n{args.nodes}-d{args.avg_degree:g}-s{args.graph_seed}"
    graph = ensure_graph(path, args.nodes, args.avg_degree, args.graph_seed)
    m = graph.manifest
    print(
        f"graph {path}: {m.num_nodes:,} nodes, {m.num_edges:,} stored edges, "
        f"{m.num_undirected_edges:,} undirected",
        flush=True,
    )
    if m.num_edges < MIN_EDGES or m.num_undirected_edges < MIN_EDGES:
        print(f"the graph has fewer than {MIN_EDGES:,} edges; raise --nodes or --avg-degree")
        return 1
    result = bench_placement(
        path,
        devices=args.devices,
        cache_fraction=args.cache_fraction,
        alpha=args.alpha,
        epochs=args.epochs,
        repeats=args.repeats,
        out_dir=args.out,
    )
    print(result["markdown"])
    r = result["ratios"]
    checks = [
        (f"host(random) / host(placement) >= {HOST_TARGET}", r["host_random_over_placement"]),
        (f"host(metis) / host(placement) >= {HOST_TARGET}", r["host_metis_over_placement"]),
    ]
    failed = 0
    for text, value in checks:
        ok = value >= HOST_TARGET
        failed += not ok
        print(f"{'MET' if ok else 'NOT MET'}: {text}: {value:.3f}")
    speed = r["metis_over_placement_seconds"]
    ok = speed >= SPEED_TARGET
    failed += not ok
    print(
        f"{'MET' if ok else 'NOT MET'}: METIS / placement seconds >= {SPEED_TARGET:g}: {speed:.1f}"
    )
    print(f"wrote {args.out / 'plans_placement.json'} and .md")
    return 1 if failed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
