"""HDR on FB15k-237 over a METIS partition (p = 4): neighbour ids crossing partitions by rate.

Ingests ``../shared/datasets/FB15k-237`` (``format="kg"``, edge shuffle seed 0;
cached under ``--cache``, default ``/tmp/gnncore-bench/plans``): 14,541 nodes,
270,490 stored (directed) edges, 210,946 undirected pairs. FB15k-237 has no node
splits, so every node is a training node. Runs
:func:`gnncore_bench.plan_replication.bench_replication` (what ``gnncore bench plans
replication`` runs) with METIS p = 4 and p_r in {0, 0.1%, 1%, 5%}: the
simulated cross-partition neighbour ids under DSP, whole-list sharing, HDR and
HDR + pruning with the memory increase of each rate, and HyDRA Table II's
whole-list / DSP for range, random and METIS partitions. Writes
``plans_replication.json`` / ``.md`` into ``--out`` (default
``bench-out/plans``; with ``--direction both``, ``bench-out/plans/both``) and
checks that HDR's ids fall as p_r grows.

    .venv/bin/python benchmarks/plan_replication.py [--out DIR] [--cache DIR] [--direction in|both]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gnncore.io import ingest
from gnncore.store import GraphDir
from gnncore_bench.plan_replication import bench_replication

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO.parent / "shared" / "datasets" / "FB15k-237"
RATES = (0.0, 0.001, 0.01, 0.05)


def graph(cache: Path) -> GraphDir:
    """FB15k-237 as a graph directory, ingested once and cached."""
    path = cache / "fb15k237-s0"
    try:
        return GraphDir.open(path)
    except Exception:  # absent or stale: (re-)ingest
        cache.mkdir(parents=True, exist_ok=True)
        ingest(DATASET, path, format="kg", seed=0)
        return GraphDir.open(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/gnncore-bench/plans"))
    parser.add_argument("--parts", type=int, default=4)
    parser.add_argument("--direction", choices=("in", "both"), default="in")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strict", action="store_true", help="exit 1 if a check fails")
    args = parser.parse_args(argv)
    out = args.out or Path("bench-out/plans") / ("both" if args.direction == "both" else "")
    g = graph(args.cache)
    result = bench_replication(
        g.path,
        parts=args.parts,
        rates=RATES,
        epochs=args.epochs,
        seed=args.seed,
        direction=args.direction,
        out_dir=out,
    )
    print(result["markdown"])
    hdr = [r["totals"]["hdr"] for r in result["rates"]]
    pruned = [r["totals"]["hdr_pruned"] for r in result["rates"]]
    falling = all(a > b for a, b in zip(hdr, hdr[1:]))
    print(f"{'MET' if falling else 'NOT MET'}: HDR ids fall strictly as p_r grows: {hdr}")
    print(f"HDR + pruning: {pruned}")
    print(f"wrote {out / 'plans_replication.json'} and .md")
    return 0 if falling or not args.strict else 1


if __name__ == "__main__":
    sys.exit(main())
