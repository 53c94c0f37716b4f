"""Distributed link prediction against one process: test MRR and epoch time.

For each graph and seed, trains a link predictor on a generated graph with
features with plain
single-process training (``train_graph_dir``) and with
:func:`gnncore.distributed.training.train_distributed_link` on each world
size of ``--nproc`` (gloo ranks spawned on this machine, METIS partitions with
as many parts), the same config (global batch, negatives per positive,
epochs). Tabulates the test MRR per seed, the mean and its difference from one
process, and the median training seconds per epoch (rank 0's wall time of an
epoch's batches; evaluation apart), with the remote share of gathered feature
rows. Writes ``link.json`` and ``link.md`` into ``--out``.

The graphs (``--graphs``): ``synth``, ``gnncore.synth``'s degree-corrected
planted partition (features tell only the class, so links are hard to predict
beyond class and degree: a low MRR ceiling), and ``knn``, each node joined to
its 5 nearest neighbours in a random 16-dimensional space with the noisy
coordinates as features (links a GNN can learn: the accuracy comparison means
more there).

    .venv/bin/python benchmarks/distributed_link.py --nproc 2,4 --seeds 0,1,2 \\
        --out bench-out/distributed-link

FB15k-237 has no node features, and distributed link prediction does not
shard learned embeddings yet, so it is not run here. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

DEFAULT_DATA = Path("/work/bench-data/distributed-link")


def build_graph(out: Path, nodes: int, degree: float, features: int, seed: int = 0) -> Path:
    """The synth graph (written once; reused when its directory exists)."""
    from gnncore.synth import SynthSpec, generate_graph

    if not (out / "manifest.json").is_file():
        spec = SynthSpec(
            num_nodes=nodes,
            avg_degree=degree,
            num_classes=8,
            num_features=features,
            seed=seed,
            communities_per_class=4,
        )
        generate_graph(out, spec, name=f"synth-link-{nodes}")
    return out


def knn_graph(out: Path, nodes: int, dim: int = 16, k: int = 5, seed: int = 0) -> Path:
    """Each node joined to its ``k`` nearest neighbours (undirected) in a random
    ``dim``-dimensional space, the coordinates plus noise (sd 0.1) as features
    (written once; reused when its directory exists)."""
    import numpy as np

    from gnncore.store import create_graph_dir

    if (out / "manifest.json").is_file():
        return out
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((nodes, dim)).astype(np.float32)
    norms = (u * u).sum(1)
    nearest = np.empty((nodes, k), dtype=np.int64)
    for start in range(0, nodes, 2048):
        block = u[start : start + 2048]
        d = norms[start : start + len(block), None] - 2 * block @ u.T + norms[None]
        d[np.arange(len(block)), np.arange(start, start + len(block))] = np.inf
        nearest[start : start + len(block)] = np.argpartition(d, k, axis=1)[:, :k]
    src = np.repeat(np.arange(nodes), k)
    dst = nearest.reshape(-1)
    key = np.unique(np.minimum(src, dst) * nodes + np.maximum(src, dst))
    with create_graph_dir(out, name=f"knn-{nodes}") as w:
        w.write_topology(nodes, key // nodes, key % nodes, directed=False)
        w.save_array("features", u + 0.1 * rng.standard_normal(u.shape).astype(np.float32))
        w.num_features = dim
    return out


def config_of(args: argparse.Namespace, seed: int) -> Any:
    from gnncore.train import LinkTrainConfig

    return LinkTrainConfig(
        model="sage",
        decoder=args.decoder,
        fanouts=tuple(int(f) for f in args.fanouts.split(",")),
        dim=args.dim,
        batch_size=args.batch_size,
        num_negatives=args.negatives,
        epochs=args.epochs,
        patience=0,
        seed=seed,
        device="cpu",
    )


def _figures(result: Any) -> dict[str, Any]:
    epochs = result.throughput
    return {
        "test_mrr": float(result.test.mrr),
        "test_hits10": float(result.test.hits[10]),
        "best_epoch": int(result.best_epoch),
        "train_s_median": statistics.median(e["train_s"] for e in epochs),
        "eval_s_median": statistics.median(e.get("eval_s", 0.0) for e in epochs),
        "remote_share": statistics.mean(e.get("dist_remote_share", 0.0) for e in epochs),
    }


def run_seed(graph: Path, parts: dict[int, Path], args: argparse.Namespace, seed: int) -> dict:
    """One seed: one process, then each world size."""
    from gnncore.distributed.training import DistributedConfig, Launch, train_distributed_link
    from gnncore.modes import RunRecording, train_graph_dir

    config = config_of(args, seed)
    out: dict[str, Any] = {}
    started = time.perf_counter()
    out["1"] = {
        **_figures(train_graph_dir(graph, config, recording=RunRecording(progress=False))),
        "kind": "plain",
    }
    out["1"]["wall_s"] = time.perf_counter() - started
    print(f"seed {seed} one process: {out['1']}", flush=True)
    for world, part in parts.items():
        started = time.perf_counter()
        result = train_distributed_link(
            graph,
            part,
            config,
            DistributedConfig(
                nproc=world,
                launch=Launch(launcher="spawn"),
                run_timeout=3600,
                ranks_dir=part.parent / f"{part.name}.link-ranks",
            ),
        )
        out[str(world)] = {**_figures(result), "kind": "ranks"}
        out[str(world)]["wall_s"] = time.perf_counter() - started
        print(f"seed {seed} {world} ranks: {out[str(world)]}", flush=True)
    return out


def tabulate(runs: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per world size: MRR per seed, mean, difference from one process, medians."""
    worlds = sorted({int(w) for r in runs.values() for w in r})
    single = statistics.mean(r["1"]["test_mrr"] for r in runs.values())
    rows = []
    for world in worlds:
        per_seed = {s: r[str(world)] for s, r in runs.items()}
        mean = statistics.mean(f["test_mrr"] for f in per_seed.values())
        rows.append(
            {
                "world": world,
                "test_mrr": {s: f["test_mrr"] for s, f in per_seed.items()},
                "mean_test_mrr": mean,
                "minus_one_process": mean - single,
                "train_s_per_epoch": statistics.median(
                    f["train_s_median"] for f in per_seed.values()
                ),
                "eval_s_per_epoch": statistics.median(
                    f["eval_s_median"] for f in per_seed.values()
                ),
                "remote_share": statistics.mean(f["remote_share"] for f in per_seed.values()),
            }
        )
    return rows


def to_markdown(summary: dict[str, Any]) -> str:
    lines = [
        f"graph: {summary['graph']} ({summary['num_nodes']:,} nodes, "
        f"{summary['num_edges']:,} edges, {summary['num_features']} features); "
        f"config: {summary['config']}; load average at start {summary['load_start']}, "
        f"at end {summary['load_end']}",
        "",
        "| ranks | test MRR per seed | mean | minus 1 process | train s / epoch (median) "
        "| eval s / epoch | remote share |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in summary["rows"]:
        seeds = " / ".join(f"{v:.5f}" for v in row["test_mrr"].values())
        label = "1 process" if row["world"] == 1 else str(row["world"])
        lines.append(
            f"| {label} | {seeds} | {row['mean_test_mrr']:.5f} | "
            f"{row['minus_one_process']:+.5f} | {row['train_s_per_epoch']:.1f} | "
            f"{row['eval_s_per_epoch']:.1f} | {row['remote_share']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    import os

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20_000)
    parser.add_argument("--avg-degree", type=float, default=10.0)
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--nproc", default="2,4", help="world sizes besides one process")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--negatives", type=int, default=1000)
    parser.add_argument("--fanouts", default="10")
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--decoder", default="dot")
    parser.add_argument("--graphs", default="synth,knn", help="synth, knn or both")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    from gnncore.partition.run import partition_graph
    from gnncore.store import GraphDir

    args.out.mkdir(parents=True, exist_ok=True)
    summaries = []
    for kind in args.graphs.split(","):
        load_start = os.getloadavg()[0]
        if kind == "synth":
            graph = build_graph(
                args.data / f"synth-{args.nodes}", args.nodes, args.avg_degree, args.features
            )
        elif kind == "knn":
            graph = knn_graph(args.data / f"knn-{args.nodes}", args.nodes)
        else:
            raise SystemExit(f"unknown graph {kind!r}: synth or knn")
        parts = {}
        for world in (int(w) for w in args.nproc.split(",")):
            part = graph.parent / f"{graph.name}-metis-p{world}"
            if not (part / "manifest.json").is_file():
                partition_graph(graph, part, method="metis", parts=world)
            parts[world] = part
        seeds = [int(s) for s in args.seeds.split(",")]
        runs = {seed: run_seed(graph, parts, args, seed) for seed in seeds}
        m = GraphDir.open(graph).manifest
        summaries.append(
            {
                "graph": str(graph),
                "num_nodes": m.num_nodes,
                "num_edges": m.num_edges,
                "num_features": m.num_features,
                "config": config_of(args, 0).to_params() | {"seed": args.seeds},
                "cpu_count": os.cpu_count(),
                "load_start": round(load_start, 1),
                "load_end": round(os.getloadavg()[0], 1),
                "runs": runs,
                "rows": tabulate(runs),
            }
        )
        (args.out / "link.json").write_text(json.dumps(summaries, indent=2, default=str) + "\n")
        markdown = "\n".join(to_markdown(s) for s in summaries)
        (args.out / "link.md").write_text(markdown)
        print(markdown, flush=True)


if __name__ == "__main__":
    main()
