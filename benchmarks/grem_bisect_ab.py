"""One GREM bisection by two builds of gnncore taking turns: where its time goes.

Runs the top bisection of ``gnncore partition --method grem`` alone, as one
``grem_bisect`` call over the graph's ``edges_shuffled.npy`` (``--chunk`` of the
rows a chunk, 3 restreaming passes, a random seed of the first chunk's nodes,
the capacities of the first split into ``--parts``), in a fresh process per run,
this checkout and the build installed in ``--other-site`` alternating (each
goes first every other round). Prints each run's GREM pass, passes and split
seconds, and a hash of the sides: the builds must agree on it.

    .venv/bin/python benchmarks/grem_bisect_ab.py GRAPH_DIR --other-site /work/site-base \\
        [--chunk 0.01] [--parts 16] [--rounds 2] [--scratch /tmp/grem-ab]

``--other-site`` is a checkout (or a ``pip install --target`` folder) holding
the other build's compiled module (``gnncore/_C*.so``). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ONE_RUN = """
import hashlib, sys, time
site = sys.argv[1]
if site:
    sys.meta_path = [f for f in sys.meta_path if "skbc" not in type(f).__module__]
    sys.path.insert(0, site)
import numpy as np
from gnncore.partition.edge_stream import EdgeFile
from gnncore.partition.grem.bisect import grem_bisect, side_capacity
from gnncore.store import GraphDir
graph, chunk, parts, scratch = sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
n = GraphDir.open(graph).num_nodes
edges = EdgeFile.from_npy(f"{graph}/edges_shuffled.npy")
rows = max(int(edges.rows * chunk), 1)
first = np.load(f"{graph}/edges_shuffled.npy", mmap_mode="r")[:rows]
seeds = np.unique(np.asarray(first)).astype(np.int32)
labels = np.random.default_rng(0).integers(0, 2, len(seeds)).astype(np.int8)
caps = tuple(side_capacity(n, q, parts, 0.03) for q in (parts // 2, parts - parts // 2))
t = time.perf_counter()
r = grem_bisect(edges, n, np.arange(n, dtype=np.int32), chunk_edges=rows, seed_nodes=seeds,
                seed_labels=labels, capacities=caps, passes=3,
                out_paths=(f"{scratch}/side0.bin", f"{scratch}/side1.bin"))
total = time.perf_counter() - t
sides = hashlib.sha1(np.asarray(r.side).tobytes()).hexdigest()[:12]
passes = "+".join(f"{s:.2f}" for s in r.seconds_passes)
print(f"total {total:.2f} s, GREM pass {r.seconds_grem:.2f}, passes {passes}, "
      f"split {r.seconds_split:.2f}, moves {list(r.moves)}, sides {sides}")
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph", type=Path)
    parser.add_argument("--other-site", type=Path, required=True)
    parser.add_argument("--chunk", type=float, default=0.01)
    parser.add_argument("--parts", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/grem-ab"))
    args = parser.parse_args(argv)
    args.scratch.mkdir(parents=True, exist_ok=True)
    builds = {"this checkout": "", str(args.other_site): str(args.other_site)}
    for turn in range(args.rounds):
        order = list(builds.items())
        for name, site in order if turn % 2 == 0 else order[::-1]:
            out = subprocess.run(
                [sys.executable, "-c", ONE_RUN, site, str(args.graph), str(args.chunk),
                 str(args.parts), str(args.scratch)],
                check=True, capture_output=True, text=True,
            ).stdout.strip()  # fmt: skip
            print(f"{name}: {out}", flush=True)
    for side in ("side0.bin", "side1.bin"):
        (args.scratch / side).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
