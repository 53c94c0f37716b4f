"""GREM's streaming pass alone, on the first rows of an edge file, by two builds taking turns.

Times one ``gnncore._C.grem_bisect`` call (the GREM pass, then ``--passes``
restreaming passes; no split) over the first ``--rows`` rows of ``EDGES`` (an
``[E, 2]`` int32 ``.npy`` such as a graph's ``edges_shuffled.npy``, or a raw
int32 pair file such as a bisection's per-side file), ``--nodes`` ids, chunks
of ``--chunk`` rows, the first chunk seeded with random sides. It separates
what the pass costs per row at a scale (the billion's top level: 100M nodes,
10M-row chunks) from the rest of a partitioning run, in seconds, not
minutes. Each run is a child process: this checkout's build and, with
``--other-site DIR``, a build installed there (``pip install
--no-build-isolation --no-deps --target DIR CHECKOUT``), alternating for
``--rounds``. With ``--limit`` (root: a cgroup v1 memory limit, e.g. 8GiB)
each child runs under it after the file's pages are dropped, as a stage of
``bench scale`` reads a file larger than its page cache.

    .venv/bin/python benchmarks/grem_pass.py EDGES --nodes 99980061 --rows 200000000 \\
        --chunk 10000000 [--passes 3] [--other-site /tmp/old-site] [--rounds 3] \\
        [--limit 8GiB] [--out bench-out/grem_pass]

Writes ``grem_pass.json`` and ``grem_pass.md`` into ``--out``. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from pathlib import Path

from gnncore.sizes import parse_size
from gnncore_bench.limits import run_limited

CHILD = r"""
import json, os, sys, time
site = sys.argv.pop(1)
if site:  # another build, installed into a folder: this checkout's editable finder dropped
    sys.meta_path = [f for f in sys.meta_path if "skbc" not in type(f).__module__]
    sys.path.insert(0, site)
import numpy as np
from gnncore.partition.edge_stream import EdgeFile
from gnncore.partition.grem.bisect import grem_bisect, side_capacity

path, nodes, rows, chunk, passes = sys.argv[1], *map(int, sys.argv[2:6])
if path.endswith(".npy"):
    edges = EdgeFile.from_npy(path)
else:  # raw int32 pairs
    edges = EdgeFile(path, 0, "int32", os.path.getsize(path) // 8)
if edges.dtype != "int32":
    raise SystemExit(f"{path}: int32 pairs only")
edges = EdgeFile(edges.path, edges.offset, edges.dtype, min(rows, edges.rows))
first = np.fromfile(path, dtype=np.int32, count=2 * min(chunk, edges.rows), offset=edges.offset)
seeds = np.unique(first)
sides = np.random.default_rng(0).integers(0, 2, len(seeds)).astype(np.int8)
cap = side_capacity(nodes, 1, 2, 0.03)
start = time.perf_counter()
out = grem_bisect(edges, nodes, None, chunk_edges=chunk, seed_nodes=seeds, seed_labels=sides,
                  capacities=(cap, cap), passes=passes)
print(json.dumps({"rows": edges.rows, "seconds": time.perf_counter() - start,
                  "grem_seconds": out.seconds_grem, "pass_seconds": list(out.seconds_passes),
                  "sizes": list(out.sizes)}))
"""


def run_child(args: argparse.Namespace, site: str) -> dict:
    """One child's measurement (its JSON line), under ``--limit`` when given."""
    cmd = [sys.executable, "-c", CHILD, site, str(args.edges), str(args.nodes), str(args.rows),
           str(args.chunk), str(args.passes)]  # fmt: skip
    limit = parse_size(args.limit) if args.limit else None
    evict = [args.edges] if limit else []
    run = run_limited(cmd, limit, evict=evict, capture_dir=args.out, capture_name="child",
                      require_limit=bool(limit))  # fmt: skip
    if run.exit_code != 0:
        raise SystemExit(f"the child failed ({run.exit_code}): see {args.out}/child.stderr")
    result = json.loads((args.out / "child.stdout").read_text().strip().splitlines()[-1])
    result["ns_per_row"] = 1e9 * result["grem_seconds"] / result["rows"]
    result["peak_rss_mib"] = (run.peak_rss_bytes or 0) / 2**20
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("edges", type=Path)
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--rows", type=int, default=200_000_000)
    parser.add_argument("--chunk", type=int, default=10_000_000)
    parser.add_argument("--passes", type=int, default=0)
    parser.add_argument("--other-site", default="", help="a build installed in this folder")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limit", default="", help="memory cgroup limit, e.g. 8GiB (root)")
    parser.add_argument("--out", type=Path, default=Path("bench-out/grem_pass"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    builds = {"this checkout": ""}
    if args.other_site:
        builds["other build"] = str(Path(args.other_site).resolve())
    runs: dict[str, list[dict]] = {label: [] for label in builds}
    for round_ in range(args.rounds):
        order = list(builds.items())
        for label, site in order if round_ % 2 == 0 else order[::-1]:  # each goes first in turn
            result = run_child(args, site)
            runs[label].append(result)
            passes = [round(s, 2) for s in result["pass_seconds"]]
            print(f"round {round_ + 1}, {label}: {result['ns_per_row']:.1f} ns a row, "
                  f"passes {passes}", file=sys.stderr)  # fmt: skip
    summary = {
        label: {
            "ns_per_row_median": statistics.median(r["ns_per_row"] for r in results),
            "ns_per_row": [round(r["ns_per_row"], 1) for r in results],
            "pass_seconds": [r["pass_seconds"] for r in results],
            "sizes": results[0]["sizes"],
            "peak_rss_mib": max(r["peak_rss_mib"] for r in results),
        }
        for label, results in runs.items()
    }
    report = {"benchmark": "grem_pass", "edges": str(args.edges), "nodes": args.nodes,
              "rows": runs["this checkout"][0]["rows"], "chunk": args.chunk, "passes": args.passes,
              "limit": args.limit or None, "builds": builds, "results": summary,
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}}  # fmt: skip
    (args.out / "grem_pass.json").write_text(json.dumps(report, indent=2))
    lines = [
        "# GREM's pass alone",
        "",
        f"`{args.edges}`: the first {report['rows']:,} rows, {args.nodes:,} nodes, chunks of "
        f"{args.chunk:,} rows, {args.passes} restreaming passes"
        + (f", each child under {args.limit} with the file's pages dropped" if args.limit else "")
        + f"; {args.rounds} rounds, the builds taking turns.",
        "",
        "| build | ns a row (median) | rounds | sides | peak RSS |",
        "|---|---:|---|---|---:|",
    ]
    for label, s in summary.items():
        lines.append(f"| {label} | {s['ns_per_row_median']:.1f} | {s['ns_per_row']} | "
                     f"{s['sizes']} | {s['peak_rss_mib']:.0f} MiB |")  # fmt: skip
    (args.out / "grem_pass.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
