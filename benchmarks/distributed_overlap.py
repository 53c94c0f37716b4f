"""Distributed training with the exchanges in the loop or in a thread ahead, side by side.

Trains GraphSAGE on ``--nproc`` gloo ranks (CPU) over a random partition of
``--graph-dir`` (or of a ``gnncore synth`` graph of ``--nodes`` nodes) with
``prefetch_workers`` 0 (each batch sampled and its rows exchanged in the
training thread) and 1 (the next batches sampled and exchanged in a thread, on
a process group of their own: ``gnncore/distributed/source/ahead.py``), in
alternating order over ``--repeats`` rounds. Records per setting the median
per-epoch wall time, the loop's stall (``wait_s``, the loop blocked on the
next batch) and its share, sampling and exchange (``dist_sample_s``,
``dist_exchange_s``: means over the ranks) and compute; and checks that both
settings train the same model (losses and validation accuracies). Writes
``distributed_overlap.json`` and ``.md`` into ``--out``.

    .venv/bin/python benchmarks/distributed_overlap.py [--nodes N] [--graph-dir DIR]
        [--nproc 2] [--epochs 3] [--out DIR]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from gnncore.distributed.training import DistributedConfig, train_distributed
from gnncore.partition.run import partition_graph
from gnncore.store import GraphDir
from gnncore.train import NodeTrainConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pipelined_training import synth_graph  # noqa: E402

KEYS = ("train_s", "wait_s", "stall_fraction", "dist_sample_s", "dist_exchange_s", "compute_s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--graph-dir", type=Path, default=None)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--fanouts", default="15,10")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("bench-out/distributed-overlap"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.graph_dir or synth_graph(args.out / "graph", args.nodes, args.seed)
    graph = GraphDir.open(path)
    part = args.out / f"part-random-{args.nproc}"
    if not (part / "manifest.json").is_file():
        partition_graph(path, part, method="random", parts=args.nproc)
    base = NodeTrainConfig(
        model="sage",
        hidden=64,
        fanouts=tuple(int(f) for f in args.fanouts.split(",")),
        batch_size=args.batch_size,
        epochs=args.epochs,
        patience=0,
        device="cpu",
        seed=args.seed,
    )
    runs: dict[int, list[Any]] = {0: [], 1: []}
    for repeat in range(args.repeats):
        for workers in (0, 1) if repeat % 2 == 0 else (1, 0):
            config = NodeTrainConfig(**{**base.to_dict(), "prefetch_workers": workers})
            result = train_distributed(
                path,
                part,
                config,
                DistributedConfig(nproc=args.nproc, ranks_dir=args.out / "ranks"),
            )
            runs[workers].append(result)
            print(
                f"prefetch_workers={workers}: "
                + ", ".join(f"{e['train_s']:.1f}s/{e['wait_s']:.1f}s" for e in result.throughput),
                flush=True,
            )
    rows = {}
    for workers, results in runs.items():
        epochs = [e for r in results for e in r.throughput]
        rows[str(workers)] = {k: statistics.median(e[k] for e in epochs) for k in KEYS}
    first = runs[0][0]
    same = all(
        (r.train_loss, r.val_accuracy) == (first.train_loss, first.val_accuracy)
        for rs in runs.values()
        for r in rs
    )
    results = {
        "graph": str(path),
        "num_nodes": graph.manifest.num_nodes,
        "num_edges": graph.manifest.num_edges,
        "nproc": args.nproc,
        "config": base.to_params(),
        "by_workers": rows,
        "same_model": same,
        "loadavg": os.getloadavg(),
        "cpus": len(os.sched_getaffinity(0)),
    }
    (args.out / "distributed_overlap.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        f"{args.nproc} gloo ranks, `{path}` ({graph.manifest.num_nodes:,} nodes, "
        f"{graph.manifest.num_edges:,} edges), batch {args.batch_size}, fanouts "
        f"{args.fanouts}; medians over {args.epochs} x {args.repeats} epochs; same model: "
        f"{'yes' if same else 'NO'}.",
        "",
        "| prefetch workers | epoch s | stall s | stall % | sample s | exchange s | compute s |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for workers, row in rows.items():
        lines.append(
            f"| {workers} | {row['train_s']:.2f} | {row['wait_s']:.2f} | "
            f"{100 * row['stall_fraction']:.1f} | {row['dist_sample_s']:.2f} | "
            f"{row['dist_exchange_s']:.2f} | {row['compute_s']:.2f} |"
        )
    table = "\n".join(lines) + "\n"
    (args.out / "distributed_overlap.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
