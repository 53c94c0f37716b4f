"""GREM's ``clusters`` plan at scale: does each planted community stay in one part?

On a planted-partition graph made the way ``gnncore bench scale`` makes it
(``gnncore synth --layout csv``, then ``gnncore ingest``), this measures, for
each GREM seed:

* the plan (:func:`~gnncore.partition.grem.plan.cluster_plan`, in process):
  for every community, the share of its planned prefix nodes that the plan puts
  in the community's most common part, and the communities "split" (that share
  below 1/2);
* the whole ``gnncore partition --method grem`` run (its own process): cut,
  seconds, the final refinement's passes, and the same per-community shares over
  the final parts;
* optionally KaMinPar (``--kaminpar``) on the same graph, as the cut to reach.

The node ids of the ingested graph are mapped back to the generator's through
``node_ids.parquet``, and the communities come from
:func:`gnncore.synth.model.node_labels` of the same spec (one community per
class). Writes ``results.json`` and ``results.md`` under ``--out``.

    gnncore synth G.csv --layout csv --nodes 10000000 --avg-degree 20 --classes 16 \\
        --features 1 --seed 0
    gnncore ingest G.csv G --format edgelist --seed 0 --memory-budget 1GiB
    .venv/bin/python benchmarks/grem_plan_scale.py --graph G --nodes 10000000 \\
        --avg-degree 20 --classes 16 --seeds 0,1,2 --kaminpar --out bench-out/plan_scale
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from gnncore.partition.edge_stream import EdgeFile, chunk_rows
from gnncore.partition.grem.plan import cluster_plan
from gnncore.synth.model import SynthSpec, node_labels

FINAL_PASSES = re.compile(r"final refinement, (\d+) passes")


def community_shares(parts: np.ndarray, community: np.ndarray, k: int) -> np.ndarray:
    """Per community, the share of its nodes in its most common part."""
    table = np.zeros((k, int(parts.max()) + 1 if len(parts) else 1), dtype=np.int64)
    np.add.at(table, (community, parts), 1)
    totals = np.maximum(table.sum(axis=1), 1)
    return table.max(axis=1) / totals


def summary(shares: np.ndarray) -> dict[str, Any]:
    return {
        "split_communities": int((shares < 0.5).sum()),
        "min_share": round(float(shares.min()), 4),
        "median_share": round(float(np.median(shares)), 4),
        "shares": [round(float(s), 4) for s in shares],
    }


def plan_row(graph: Path, community: np.ndarray, parts: int, chunk: float, seed: int) -> dict:
    edges = EdgeFile.from_npy(graph / "edges_shuffled.npy")
    started = time.perf_counter()
    plan = cluster_plan(
        edges, len(community), parts, chunk_edges=chunk_rows(chunk, edges.rows), seed=seed
    )
    seconds = time.perf_counter() - started
    clustered = plan.cluster >= 0
    planned = np.full(len(community), -1, dtype=np.int64)
    planned[clustered] = plan.part[plan.cluster[clustered]]
    kept = planned >= 0
    shares = community_shares(planned[kept], community[kept], int(community.max()) + 1)
    return {"seconds": round(seconds, 2), "planned_nodes": int(kept.sum()), **summary(shares)}


def partition_row(
    graph: Path, out: Path, community: np.ndarray, method: str, parts: int, seed: int,
    extra: list[str],
) -> dict:  # fmt: skip
    target = out / f"partition-{method}-s{seed}"
    report = out / f"partition-{method}-s{seed}.json"
    cmd = [sys.executable, "-m", "gnncore.cli.main", "partition", str(graph), str(target),
           "--method", method, "--parts", str(parts), "--seed", str(seed),
           "--no-balance-splits", "--overwrite", "--json", str(report), *extra]  # fmt: skip
    started = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    result = json.loads(report.read_text())
    passes = FINAL_PASSES.search(run.stderr)
    assignment = np.load(target / "assignment.npy")
    shares = community_shares(assignment, community, int(community.max()) + 1)
    shutil.rmtree(target)
    return {
        "command": " ".join(cmd[2:]),
        "cut": round(100 * result["edge_cut_fraction"], 4),
        "seconds": round(result["seconds"], 2),
        "process_seconds": round(wall, 2),
        "peak_rss_mib": round(result["command_peak_rss_bytes"] / 2**20),
        "final_passes": int(passes.group(1)) if passes else None,
        **summary(shares),
    }


def markdown(results: dict) -> str:
    lines = [
        "# GREM's plan at scale",
        "",
        f"Graph `{results['graph']}`: {results['num_nodes']:,} nodes, "
        f"{results['num_edges']:,} undirected edges, {results['communities']} planted "
        f"communities; p = {results['parts']}, chunk {results['chunk']}.",
        "",
        "| run | seed | cut % | seconds | final passes | split communities | min share "
        "| plan: split | plan: min share | plan s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in results["rows"]:
        run, plan = row["run"], row.get("plan")
        passes = "—" if run["final_passes"] is None else run["final_passes"]
        plan_cells = (
            f"{plan['split_communities']} | {plan['min_share']:.2f} | {plan['seconds']:.1f}"
            if plan
            else "— | — | —"
        )
        lines.append(
            f"| {row['method']} | {row['seed']} | {run['cut']:.2f} | {run['seconds']:.1f} | "
            f"{passes} | {run['split_communities']} | {run['min_share']:.2f} | {plan_cells} |"
        )
    lines += ["", f"Machine: {results['machine']}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", type=Path, required=True)
    parser.add_argument("--nodes", type=int, required=True, help="the synth spec's --nodes")
    parser.add_argument("--avg-degree", type=float, required=True)
    parser.add_argument("--classes", type=int, required=True)
    parser.add_argument("--synth-seed", type=int, default=0)
    parser.add_argument("--parts", type=int, default=16)
    parser.add_argument("--chunk", type=float, default=0.01)
    parser.add_argument("--memory-budget", default="1073741824")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--kaminpar", action="store_true", help="also KaMinPar, 2 threads")
    parser.add_argument("--out", type=Path, default=Path("bench-out/grem_plan_scale"))
    args = parser.parse_args(argv)

    spec = SynthSpec(num_nodes=args.nodes, avg_degree=args.avg_degree,
                     num_classes=args.classes, num_features=1, seed=args.synth_seed)  # fmt: skip
    raw = pl.read_parquet(args.graph / "node_ids.parquet").to_series(0).to_numpy()
    community = node_labels(spec)[raw.astype(np.int64)]
    edges = EdgeFile.from_npy(args.graph / "edges_shuffled.npy")
    args.out.mkdir(parents=True, exist_ok=True)
    grem = ["--chunk", str(args.chunk), "--memory-budget", args.memory_budget]
    rows = []
    for seed in [int(s) for s in args.seeds.split(",") if s.strip()]:
        plan = plan_row(args.graph, community, args.parts, args.chunk, seed)
        run = partition_row(args.graph, args.out, community, "grem", args.parts, seed, grem)
        rows.append({"method": "grem", "seed": seed, "plan": plan, "run": run})
        print(f"grem seed {seed}: cut {run['cut']:.2f}%, {run['seconds']:.1f} s, final passes "
              f"{run['final_passes']}, split communities {run['split_communities']} "
              f"(plan {plan['split_communities']})", file=sys.stderr)  # fmt: skip
    if args.kaminpar:
        run = partition_row(
            args.graph, args.out, community, "kaminpar", args.parts, 0, ["--threads", "2"]
        )
        rows.append({"method": "kaminpar (2 threads)", "seed": 0, "plan": None, "run": run})
        print(f"kaminpar: cut {run['cut']:.2f}%, {run['seconds']:.1f} s", file=sys.stderr)
    results = {
        "graph": str(args.graph),
        "num_nodes": len(community),
        "num_edges": edges.rows,
        "communities": int(community.max()) + 1,
        "parts": args.parts,
        "chunk": args.chunk,
        "rows": rows,
        "machine": f"{platform.node()} ({platform.machine()}), Python {platform.python_version()}",
    }
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    (args.out / "results.md").write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
