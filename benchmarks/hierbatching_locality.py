"""HierBatching's accuracy against in-memory training, by how local the graph is.

HierBatching samples each mini-batch inside its mega-batch: the partitions in
memory plus the static set of high-degree nodes. A neighbour outside both is
dropped, so its accuracy depends on how much of a node's neighbourhood its
min-edge-cut partition keeps. This benchmark makes that visible on the
built-in planted-partition graph: with ``communities_per_class = 1`` each class
is one community of N/classes nodes whose inside is a random graph (no
partition finer than a class keeps neighbourhoods together: the worst case),
with ``communities_per_class > 1`` each class is many small tight communities
that METIS keeps inside partitions (the way real graphs are local below their
labels). For each setting it generates the graph, partitions it with METIS,
writes the store and trains in-memory and through mega-batches with the same
model, batches and epochs, and reports test accuracy, the partition's edge cut
and the share of edges a mega-batch keeps.

    .venv/bin/python benchmarks/hierbatching_locality.py [--nodes 200000]
        [--communities 1,32] [--parts 64] [--mega-batch-parts 2] [--epochs 1]
        [--out bench-out/hierbatching-locality] [--work DIR]

Writes ``hierbatching_locality.json`` and ``.md`` into ``--out``. Not part of
the test suite; the graphs (about 90 MB each with the defaults) go to
``--work`` (a temporary directory by default) and are deleted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gnncore_bench.limits import gnncore_command


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ})
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")


def _kept_share(store_dir: Path, mega_batch_parts: int) -> float:
    """Share of the in-edges of a mega-batch's nodes that ``G_cache`` keeps,
    over a random grouping of the partitions (all of them once)."""
    import numpy as np

    from gnncore.outofcore.megabatch import StaticCache, load_mega_batch
    from gnncore.outofcore.store import PartitionedStore

    store = PartitionedStore.open(store_dir)
    static = StaticCache.read(store)
    order = np.random.default_rng(0).permutation(store.parts)
    kept = total = 0
    for i in range(0, store.parts, mega_batch_parts):
        parts = [int(p) for p in order[i : i + mega_batch_parts]]
        mega = load_mega_batch(store, parts, static)
        n_t = sum(int(store.offsets[p + 1] - store.offsets[p]) for p in parts)
        kept += int(mega.indptr[n_t])  # edges into T (T's nodes come first)
        total += sum(hi - lo for lo, hi in (store.in_edge_range(p) for p in parts))
    return kept / max(total, 1)


def run_setting(work: Path, communities: int, args: argparse.Namespace) -> dict[str, Any]:
    """Generate, partition, store and train both ways for one community setting."""
    root = work / f"c{communities}"
    graph, part, store = root / "graph", root / "partition", root / "store"
    _run(
        gnncore_command(
            "synth", graph, "--nodes", str(args.nodes), "--classes", str(args.classes),
            "--features", str(args.features), "--avg-degree", str(args.avg_degree),
            "--communities-per-class", str(communities), "--no-progress",
        )
    )  # fmt: skip
    partition_json = root / "partition.json"
    _run(
        gnncore_command(
            "partition", graph, part, "--method", "metis", "--parts", str(args.parts),
            "--no-progress", "--json", partition_json,
        )
    )  # fmt: skip
    _run(gnncore_command("store", graph, part, store))
    cut = json.loads(partition_json.read_text()).get("edge_cut_fraction")
    result: dict[str, Any] = {
        "communities_per_class": communities,
        "edge_cut_fraction": cut,
        "mega_batch_edge_share": _kept_share(store, args.mega_batch_parts),
        "modes": {},
    }
    for mode in ("in_memory", "hierbatching"):
        out = root / f"{mode}.json"
        extra: list[str] = []
        if mode == "hierbatching":
            extra = ["--store", str(store), "--mega-batch-parts", str(args.mega_batch_parts)]
            extra += ["--mega-batch-passes", "1"]
        started = time.perf_counter()
        _run(
            gnncore_command(
                "train", graph, "--task", "node", "--model", "sage", "--hidden", "128",
                "--epochs", str(args.epochs), "--fanouts", "10,5", "--eval-fanouts", "10,5",
                "--batch-size", "512", "--mode", mode, *extra, "--device", "cpu",
                "--seed", "0", "--no-progress", "--data-root", root / "runs", "--json", out,
            )
        )  # fmt: skip
        summary = json.loads(out.read_text())
        result["modes"][mode] = {
            "test_accuracy": summary["test_accuracy"],
            "seconds": time.perf_counter() - started,
        }
        print(
            f"communities/class {communities}: {mode} test accuracy {summary['test_accuracy']:.4f}",
            file=sys.stderr,
        )
    modes = result["modes"]
    result["accuracy_gap"] = (
        modes["hierbatching"]["test_accuracy"] - modes["in_memory"]["test_accuracy"]
    )
    return result


def to_markdown(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        f"Planted-partition graphs: {args.nodes:,} nodes, {args.classes} classes, "
        f"{args.features} features, average degree {args.avg_degree}; METIS {args.parts} parts, "
        f"mega-batches of {args.mega_batch_parts} partitions, 1% static set; GraphSAGE "
        f"(hidden 128), fanouts 10,5, batches of 512, {args.epochs} epoch(s), seed 0, CPU.",
        "",
        "| communities per class | community size | edge cut | edges kept in a mega-batch "
        "| in-memory test acc | HierBatching test acc | difference |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        size = args.nodes // (args.classes * r["communities_per_class"])
        cut = r["edge_cut_fraction"]
        lines.append(
            f"| {r['communities_per_class']} | {size:,} | "
            f"{'—' if cut is None else f'{cut:.3f}'} | {r['mega_batch_edge_share']:.3f} | "
            f"{r['modes']['in_memory']['test_accuracy']:.4f} | "
            f"{r['modes']['hierbatching']['test_accuracy']:.4f} | "
            f"{100 * r['accuracy_gap']:+.1f} points |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=200_000)
    parser.add_argument("--classes", type=int, default=16)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--avg-degree", type=float, default=10.0)
    parser.add_argument("--communities", default="1,32", help="communities per class to try")
    parser.add_argument("--parts", type=int, default=64)
    parser.add_argument("--mega-batch-parts", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("bench-out/hierbatching-locality"))
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args(argv)

    work = args.work or Path(tempfile.mkdtemp(prefix="hb-locality-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        results = [run_setting(work, int(c), args) for c in args.communities.split(",") if c]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    markdown = to_markdown(results, args)
    params = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    (args.out / "hierbatching_locality.json").write_text(
        json.dumps({"params": params, "results": results}, indent=2) + "\n"
    )
    (args.out / "hierbatching_locality.md").write_text(markdown + "\n")
    print(markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
