"""KaMinPar as an *outside* partitioner for ``gnncore bench partition --external``:
reads a METIS text graph, writes a METIS partition file (one 0-based part id per
line), as KaMinPar's own binary (``KaMinPar -G GRAPH -k K -o OUTPUT``) would.

It uses the ``kaminpar`` Python package (the one the built-in ``kaminpar``
method uses, there through a ParHIP binary file), so the two rows of a bench
run differ by the path the graph takes in, not by the algorithm; and KaMinPar's
own METIS parser reads the file the bench wrote. The part cap is the built-in
methods' ``ceil((1 + imbalance) N / k)``::

    .venv/bin/gnncore bench partition G --parts 8 --methods kaminpar --out OUT \\
        --external "kaminpar-metis=.venv/bin/python benchmarks/external_kaminpar.py \\
            {metis_graph} {parts} {output} --seed {seed} --threads {threads} \\
            --imbalance {imbalance}"
"""

from __future__ import annotations

import argparse
import math

import kaminpar


def main() -> None:
    """Partition the METIS graph given on the command line into the output file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph", help="a METIS text graph")
    parser.add_argument("parts", type=int)
    parser.add_argument("output", help="the partition file to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--imbalance", type=float, default=0.03)
    args = parser.parse_args()
    with open(args.graph) as header:
        nodes = int(header.readline().split()[0])
    graph = kaminpar.load_graph(args.graph, kaminpar.GraphFileFormat.METIS)
    kaminpar.reseed(args.seed)
    solver = kaminpar.KaMinPar(args.threads, kaminpar.default_context())
    cap = math.ceil((1 + args.imbalance) * nodes / args.parts - 1e-9)
    labels = solver.compute_partition(graph, [cap] * args.parts)
    with open(args.output, "w") as out:
        out.write("".join(f"{label}\n" for label in labels))


if __name__ == "__main__":
    main()
