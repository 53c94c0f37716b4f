"""Distributed training: remote feature rows by partitioner, 1 / 2 / 4 gloo ranks.

Builds (once; reused while its parameters match) a planted-partition graph in
``--data`` (default ``/work/bench-data/distributed``; never in the
repository) -- by default 200,000 nodes of mean degree 11 (1.1M undirected
edges), 64 float32 features, 8 classes of 8 communities each (so that METIS
has locality to find beyond the classes), 5% of the nodes for training, 2%
for validation and 5% for testing (stratified subsets of the generator's
split) -- then runs ``gnncore bench distributed`` on it
(:func:`gnncore_bench.distributed.bench_distributed`) twice into one result:

* 2-layer sampling: fanouts ``10,5``, global batch 1,000;
* 3-layer sampling: fanouts ``15,10,5``, global batch 100 (the issue's
  simulation).

Each setting runs 1 process (the baseline; nothing is remote) and
``--nproc`` ranks with every partitioner of ``--partitioners``
(GREM with a 1% chunk). ``--mode`` is ``train`` (full training: epoch time,
remote rows and bytes per training epoch, per-rank peak RSS, test accuracy)
or ``sample`` (one epoch of the same training batches sampled and gathered,
no model: the remote rows only, the very batches training's epochs draw);
``--mode-3`` sets the 3-layer setting's mode (default ``train`` too: on 2
cores a 3-layer epoch of batch 100 takes about 30 s at 4 ranks, so full
training fits). Writes ``distributed.json`` and ``distributed.md`` into
``--out`` (default ``bench-out/distributed``).

    .venv/bin/python benchmarks/distributed.py [--data DIR] [--nodes 200000]
        [--avg-degree 11] [--nproc 1,2,4] [--partitioners random,metis,grem]
        [--epochs 3] [--mode train] [--mode-3 train] [--out DIR] [--build-only]

Not part of the test suite; the graph (89 MiB) and the partitions and rank data
(about 0.75 GB in all) are kept for reuse.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from generated_graph import cached_graph

DEFAULT_DATA = Path("/work/bench-data/distributed")


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

    Edges, labels and features come from :func:`gnncore.synth.generate_graph`;
    the splits are stratified subsets of the generator's train/val/test split,
    each cut down to the fraction given, as a share of all nodes
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
        chosen = []
        for part, frac in zip(splits, wanted):
            # Stratified: the same fraction of every class.
            picked = [
                rng.choice(
                    members, int(round(len(members) * frac * nodes / len(part))), replace=False
                )
                for members in (part[y[part] == c] for c in range(classes))
            ]
            chosen.append(np.sort(np.concatenate(picked)))
        return tuple(chosen)

    return cached_graph(out, params, "dist-synth", choose)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="graph + partitions here")
    parser.add_argument("--nodes", type=int, default=200_000)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--avg-degree", type=float, default=11.0)
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument("--communities-per-class", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-fraction", type=float, default=0.05)
    parser.add_argument("--val-fraction", type=float, default=0.02)
    parser.add_argument("--test-fraction", type=float, default=0.05)
    parser.add_argument("--nproc", default="1,2,4")
    parser.add_argument("--partitioners", default="random,metis,grem")
    parser.add_argument("--grem-chunk", type=float, default=0.01)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--mode", choices=("train", "sample"), default="train")
    parser.add_argument("--mode-3", choices=("train", "sample"), default="train")
    parser.add_argument("--no-3-layer", action="store_true", help="the 2-layer setting only")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per run")
    parser.add_argument("--out", type=Path, default=Path("bench-out/distributed"))
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (gnncore bench distributed)")
    parser.add_argument("--backend", choices=("gloo", "nccl"), default=None)
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
    if args.build_only:
        return 0
    from gnncore_bench.distributed import Setting, bench_distributed

    settings = [Setting("2-layer", (10, 5), 1000, args.mode)]
    if not args.no_3_layer:
        settings.append(Setting("3-layer", (15, 10, 5), 100, args.mode_3))
    result = bench_distributed(
        graph,
        args.out,
        nproc=[int(n) for n in args.nproc.split(",") if n],
        partitioners=[p for p in args.partitioners.split(",") if p],
        settings=settings,
        epochs=args.epochs,
        grem_chunk=args.grem_chunk,
        work_dir=args.data / "work",
        seed=args.seed,
        timeout=args.timeout,
        device=args.device,
        backend=args.backend,
    )
    result["dataset"] = {**built, "path": str(graph)}
    (args.out / "distributed.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(result["markdown"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
