"""GREM's final k-way refinement on heavy-tailed, planted and real graphs (issue 28, item 5).

Generates (once, under ``--cache``, default ``/tmp/gnncore-bench/heavy_tail``)

- ``bipartite``: ``gnncore synth --model bipartite --nodes 800000 --avg-degree 5
  --exponent 2.2 --right-exponent 2.5`` (1.97M edges after deduplication),
- ``powerlaw``: ``gnncore synth --model powerlaw --nodes 400000 --avg-degree 10
  --exponent 2.3`` (1.94M edges),
- ``planted``: ``gnncore synth --nodes 200000 --avg-degree 20`` (2.0M edges),

and ingests ``/work/shared/datasets/FB15k-237`` (``format="kg"``, when present),
then runs GREM in this process on each, for p in ``--parts`` and chunks 10% and
1%, with the final refinement off (``final_passes=0``: the partition of the
bisections), node passes only (``coarse=False``) and the default (node passes,
one coarse level, node passes). Reports cut %, the largest part over N/p and
seconds; writes ``grem_heavy_tail.json`` and ``grem_heavy_tail.md`` into
``--out`` (default ``bench-out/grem_heavy_tail``). KaMinPar and METIS are
measured beside GREM by ``gnncore bench partition`` (docs/BENCHMARKS.md).

    .venv/bin/python benchmarks/grem_heavy_tail.py [--graphs bipartite,powerlaw,planted,fb15k]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from gnncore.partition import PartitionOptions, partition_metrics
from gnncore.partition.edge_stream import chunk_rows
from gnncore.partition.grem import GremPartitioner
from gnncore.partition.grem.partitioner import FINAL_PASSES
from gnncore.partition.grem.refine import block_entries_for, refine_kway
from gnncore.partition.metrics import max_part_size
from gnncore.store import GraphDir

SYNTH = {
    "bipartite": ["--model", "bipartite", "--nodes", "800000", "--avg-degree", "5",
                  "--exponent", "2.2", "--right-exponent", "2.5"],
    "powerlaw": ["--model", "powerlaw", "--nodes", "400000", "--avg-degree", "10",
                 "--exponent", "2.3"],
    "planted": ["--nodes", "200000", "--avg-degree", "20"],
}  # fmt: skip
FB15K = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets" / "FB15k-237"


def graph_dir(name: str, cache: Path) -> GraphDir | None:
    path = cache / name
    try:
        return GraphDir.open(path)
    except Exception:  # noqa: BLE001 - absent or stale: (re)make it
        cache.mkdir(parents=True, exist_ok=True)
    if name == "fb15k":
        if not FB15K.is_dir():
            print(f"skipping fb15k: {FB15K} is absent", file=sys.stderr)
            return None
        from gnncore.io import ingest

        ingest(FB15K, path, format="kg", seed=0)
    else:
        cmd = [sys.executable, "-m", "gnncore.cli.main", "synth", str(path), *SYNTH[name],
               "--classes", "4", "--features", "8", "--seed", "1", "--memory-budget", "1GiB",
               "--no-progress", "--overwrite"]  # fmt: skip
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return GraphDir.open(path)


def run(graph: GraphDir, parts: int, chunk: float) -> list[dict]:
    """GREM without the final refinement, then each refinement from its labels."""
    options = PartitionOptions(parts=parts)
    started = time.perf_counter()
    plain = np.ascontiguousarray(
        GremPartitioner(chunk=chunk, final_passes=0).assign(graph, options), dtype=np.int64
    )
    base = time.perf_counter() - started
    cap = max_part_size(graph.num_nodes, parts, options.imbalance)
    block = block_entries_for(chunk_rows(chunk, graph.manifest.num_undirected_edges))
    rows = []
    # a directed graph's CSR is not symmetric: GREM runs no final refinement there
    variants = ("off",) if graph.manifest.directed else ("off", "nodes", "default")
    for variant in variants:
        labels, extra = plain.copy(), 0.0
        if variant != "off":
            record = refine_kway(graph.path, labels, parts, cap, max_passes=FINAL_PASSES,
                                 block_entries=block, coarse=variant == "default")  # fmt: skip
            extra = record.seconds
        metrics = partition_metrics(graph, labels, parts)
        rows.append({
            "parts": parts,
            "chunk": chunk,
            "variant": variant,
            "cut_percent": round(100 * metrics.edge_cut_fraction, 2),
            "max_part_ratio": round(max(metrics.part_sizes) * parts / graph.num_nodes, 4),
            "seconds": round(base + extra, 2),
            "refine_seconds": round(extra, 2),
        })  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--graphs", default="bipartite,powerlaw,planted,fb15k")
    parser.add_argument("--parts", default="8,16")
    parser.add_argument("--chunks", default="0.1,0.01")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/gnncore-bench/heavy_tail"))
    parser.add_argument("--out", type=Path, default=Path("bench-out/grem_heavy_tail"))
    args = parser.parse_args()
    rows = []
    for name in args.graphs.split(","):
        graph = graph_dir(name, args.cache)
        if graph is None:
            continue
        for parts in (int(p) for p in args.parts.split(",")):
            for chunk in (float(c) for c in args.chunks.split(",")):
                for result in run(graph, parts, chunk):
                    row = {"graph": name, "edges": graph.manifest.num_undirected_edges,
                           **result, "load": round(os.getloadavg()[0], 1)}  # fmt: skip
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "grem_heavy_tail.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = ["| graph | p | chunk | final refinement | cut % | max part / (N/p) | s | refine s |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        lines.append(
            f"| {r['graph']} | {r['parts']} | {r['chunk']:g} | {r['variant']} | "
            f"{r['cut_percent']:.2f} | {r['max_part_ratio']:.4f} | {r['seconds']:.2f} | "
            f"{r['refine_seconds']:.2f} |"
        )
    (args.out / "grem_heavy_tail.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
