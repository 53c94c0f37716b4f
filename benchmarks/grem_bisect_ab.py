"""One GREM bisection by two builds of gnncore taking turns: where its time goes.

Runs one bisection of ``gnncore partition --method grem`` alone, as one
``grem_bisect`` call (every id a member, as the recursion calls it) over
``SOURCE``: a graph directory's ``edges_shuffled.npy`` (its top bisection:
the capacities of the first split into ``--parts``), or, with ``--nodes``, an
edge file of int32 pairs, ``.npy`` or raw (a bisection's per-side file: a
sub-problem in its own ids, split in two). ``--rows`` takes the first rows
only; a chunk is ``--chunk`` of them or ``--chunk-rows``; ``--passes``
restreaming passes; the split into per-side files unless ``--no-split``; the
first chunk's nodes seeded at random. Each run is a fresh process, this
checkout and the build installed in ``--other-site`` alternating (each goes
first every other round). With ``--limit`` (root: a cgroup v1 memory limit)
each run is under it after the file's pages are dropped, as a stage of ``bench
scale`` reads a file past its page cache. Prints each run's GREM pass (also
per row), passes and split seconds, and a hash of the sides: the builds must
agree on it. ``--out`` also writes ``grem_bisect_ab.json`` and ``.md`` (medians).

    .venv/bin/python benchmarks/grem_bisect_ab.py GRAPH_DIR --other-site /work/site-base \\
        [--chunk 0.01] [--parts 16] [--rounds 2] [--scratch /tmp/grem-ab]
    .venv/bin/python benchmarks/grem_bisect_ab.py EDGES --nodes N --rows 200000000 \\
        --chunk-rows 10000000 --passes 0 --no-split [--limit 8GiB] [--out DIR]

``--other-site`` is a checkout (or a ``pip install --target`` folder) holding
the other build's compiled module (``gnncore/_C*.so``). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from gnncore.sizes import parse_size
from gnncore_bench.limits import run_limited

ONE_RUN = """
import hashlib, json, os, sys, time
site = sys.argv[1]
if site:
    sys.meta_path = [f for f in sys.meta_path if "skbc" not in type(f).__module__]
    sys.path.insert(0, site)
import numpy as np
from gnncore.partition.edge_stream import EdgeFile
from gnncore.partition.grem.bisect import grem_bisect, side_capacity
source, nodes, rows, chunk, chunk_rows, parts, passes, scratch = sys.argv[2:10]
if os.path.isdir(source):
    from gnncore.store import GraphDir
    n, path = GraphDir.open(source).num_nodes, f"{source}/edges_shuffled.npy"
    q0 = int(parts) // 2
    caps = tuple(side_capacity(n, q, int(parts), 0.03) for q in (q0, int(parts) - q0))
else:  # a sub-problem's file: split in two halves
    n, path = int(nodes), source
    caps = (side_capacity(n, 1, 2, 0.03),) * 2
edges = (EdgeFile.from_npy(path) if path.endswith(".npy")
         else EdgeFile(path, 0, "int32", os.path.getsize(path) // 8))
edges = EdgeFile(edges.path, edges.offset, edges.dtype, min(int(rows) or edges.rows, edges.rows))
take = int(chunk_rows) or max(int(edges.rows * float(chunk)), 1)
first = np.fromfile(path, dtype=edges.dtype, count=2 * min(take, edges.rows), offset=edges.offset)
seeds = np.unique(first).astype(np.int32)
labels = np.random.default_rng(0).integers(0, 2, len(seeds)).astype(np.int8)
outs = (f"{scratch}/side0.bin", f"{scratch}/side1.bin") if scratch else ("", "")
t = time.perf_counter()
r = grem_bisect(edges, n, None, chunk_edges=take, seed_nodes=seeds, seed_labels=labels,
                capacities=caps, passes=int(passes), out_paths=outs)
print(json.dumps({"total": time.perf_counter() - t, "grem": r.seconds_grem, "rows": edges.rows,
                  "passes": list(r.seconds_passes), "split": r.seconds_split,
                  "moves": list(r.moves),
                  "sides": hashlib.sha1(np.asarray(r.side).tobytes()).hexdigest()[:12]}))
"""


def one_run(args: argparse.Namespace, site: str) -> dict:
    """One process's figures (its JSON line), under ``--limit`` when given."""
    scratch = "" if args.no_split else str(args.scratch)
    cmd = [sys.executable, "-c", ONE_RUN, site, str(args.source), str(args.nodes or 0),
           str(args.rows), str(args.chunk), str(args.chunk_rows), str(args.parts),
           str(args.passes), scratch]  # fmt: skip
    limit = parse_size(args.limit) if args.limit else None
    edges = args.source / "edges_shuffled.npy" if args.source.is_dir() else args.source
    run = run_limited(cmd, limit, evict=[edges] if limit else [], capture_dir=args.scratch,
                      capture_name="run", require_limit=bool(limit))  # fmt: skip
    if run.exit_code != 0:
        raise SystemExit(f"the run failed ({run.exit_code}): see {args.scratch}/run.stderr")
    result = json.loads((args.scratch / "run.stdout").read_text().strip().splitlines()[-1])
    result["ns_per_row"] = 1e9 * result["grem"] / result["rows"]
    result["peak_rss_mib"] = (run.peak_rss_bytes or 0) / 2**20
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a graph directory, or an edge file (--nodes)")
    parser.add_argument("--other-site", type=Path, default=None)
    parser.add_argument("--nodes", type=int, default=None, help="an edge file's node count")
    parser.add_argument("--rows", type=int, default=0, help="the first rows only (0: all)")
    parser.add_argument("--chunk", type=float, default=0.01)
    parser.add_argument("--chunk-rows", type=int, default=0, help="rows a chunk (over --chunk)")
    parser.add_argument("--parts", type=int, default=16)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--no-split", action="store_true", help="no per-side files")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--limit", default="", help="memory cgroup limit, e.g. 8GiB (root)")
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/grem-ab"))
    parser.add_argument("--out", type=Path, default=None, help="write JSON and Markdown here")
    args = parser.parse_args(argv)
    if not args.source.is_dir() and args.nodes is None:
        parser.error("an edge file needs --nodes")
    args.scratch.mkdir(parents=True, exist_ok=True)
    builds = {"this checkout": ""}
    if args.other_site is not None:
        builds[str(args.other_site)] = str(args.other_site.resolve())
    runs: dict[str, list[dict]] = {name: [] for name in builds}
    for turn in range(args.rounds):
        order = list(builds.items())
        for name, site in order if turn % 2 == 0 else order[::-1]:
            r = one_run(args, site)
            runs[name].append(r)
            passes = "+".join(f"{s:.2f}" for s in r["passes"])
            print(f"{name}: total {r['total']:.2f} s, GREM pass {r['grem']:.2f} "
                  f"({r['ns_per_row']:.1f} ns a row), passes {passes}, split {r['split']:.2f}, "
                  f"moves {r['moves']}, sides {r['sides']}", flush=True)  # fmt: skip
    for side in ("side0.bin", "side1.bin"):
        (args.scratch / side).unlink(missing_ok=True)
    if args.out is not None:
        write_report(args, runs)
    return 0


def write_report(args: argparse.Namespace, runs: dict[str, list[dict]]) -> None:
    """``grem_bisect_ab.json`` and ``.md`` in ``--out``: each build's runs and medians."""
    args.out.mkdir(parents=True, exist_ok=True)
    settings = {k: str(v) for k, v in vars(args).items() if k not in ("out", "scratch")}
    medians = {name: statistics.median(r["ns_per_row"] for r in rs) for name, rs in runs.items()}
    report = {"benchmark": "grem_bisect_ab", "settings": settings, "runs": runs,
              "ns_per_row_median": medians}  # fmt: skip
    (args.out / "grem_bisect_ab.json").write_text(json.dumps(report, indent=2))
    lines = [
        "# One GREM bisection, two builds taking turns",
        "",
        f"`{args.source}`, {runs['this checkout'][0]['rows']:,} rows, "
        + ", ".join(f"{k} {v}" for k, v in settings.items() if k != "source"),
        "",
        "| build | GREM pass, ns a row (median) | runs | sides | peak RSS |",
        "|---|---:|---|---|---:|",
    ]
    for name, rs in runs.items():
        per_row = [round(r["ns_per_row"], 1) for r in rs]
        peak = max(r["peak_rss_mib"] for r in rs)
        lines.append(
            f"| {name} | {medians[name]:.1f} | {per_row} | {rs[0]['sides']} | {peak:.0f} MiB |"
        )
    (args.out / "grem_bisect_ab.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
