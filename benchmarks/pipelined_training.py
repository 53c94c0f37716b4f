"""Pipelined training: the same few epochs with 0, 1 and 2 prefetch threads, side by side.

Generates (once, with ``gnncore synth``) a planted-partition graph of
``--nodes`` nodes (default 200,000), or takes ``--graph-dir``, and trains
GraphSAGE on the first ``--train-nodes`` training nodes (validation on the
first ``--eval-nodes`` validation nodes) for ``--epochs`` epochs with each
``--workers`` setting (``NodeTrainConfig.prefetch_workers``), after one
warm-up run, in alternating order over ``--repeats`` rounds. Records per
configuration the median epoch seconds (training pass), batches/s, and the
per-epoch seconds of batch preparation (``sample_s``, summed over threads), of
the loop waiting for a batch (``wait_s``, the stall, and ``stall_fraction``,
its share of the epoch) and of compute; and checks that
every setting ends with the same parameters. ``gnncore`` is imported before
torch, so OpenMP runs with the library's default (``OMP_WAIT_POLICY=passive``
unless the environment sets it; ``gnncore/__init__.py``). Writes ``pipelined_training.json`` and
``pipelined_training.md`` into ``--out`` (default ``bench-out/pipelined``).

    .venv/bin/python benchmarks/pipelined_training.py [--nodes N] [--graph-dir DIR]
        [--workers 0,1,2] [--epochs 3] [--out DIR]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

# isort: off
import gnncore  # noqa: F401 - before torch, so the library's OpenMP default (passive) applies

# isort: on
import torch

from gnncore.store import GraphDir, GraphDirFeatureStore, GraphDirGraphStore
from gnncore.train import NodeTask, NodeTrainConfig, RunHooks, fit


def synth_graph(out: Path, nodes: int, seed: int) -> Path:
    """``gnncore synth`` into ``out`` unless a graph is already there."""
    if not (out / "manifest.json").is_file():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "gnncore.cli.main",
                "synth",
                str(out),
                "--nodes",
                str(nodes),
                "--seed",
                str(seed),
                "--no-progress",
            ],
            check=True,
        )
    return out


def run_once(
    graph: GraphDir, config: NodeTrainConfig, train_nodes: int, eval_nodes: int
) -> dict[str, Any]:
    """Train once; per-epoch throughput figures and a parameter checksum."""
    splits = [
        torch.from_numpy(graph.split(s)[:n].copy())
        for s, n in (("train", train_nodes), ("val", eval_nodes), ("test", eval_nodes))
    ]
    result = fit(
        NodeTask(
            GraphDirFeatureStore(graph),
            GraphDirGraphStore(graph),
            splits,
            graph.manifest.num_classes,
        ),
        config,
        hooks=RunHooks(progress=False),
    )
    params = torch.cat([p.detach().reshape(-1).double() for p in result.model.parameters()])
    return {
        "epochs": result.throughput,
        "train_loss": result.train_loss,
        "param_sum": float(params.sum()),
        "param_abs_sum": float(params.abs().sum()),
    }


def summarise(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Medians over every epoch of every run."""
    epochs = [e for run in runs for e in run["epochs"]]

    def median(key: str) -> float:
        return statistics.median(e[key] for e in epochs)

    return {
        "epoch_s": median("train_s"),
        "batches_per_s": median("batches_per_s"),
        "sample_s": median("sample_s"),
        "wait_s": median("wait_s"),
        "stall_fraction": median("stall_fraction"),
        "compute_s": median("compute_s"),
        "eval_s": median("eval_s"),
        "batches": median("batches"),
        "nodes_per_batch": median("nodes_per_batch"),
        "edges_per_batch": median("edges_per_batch"),
        "epochs_measured": len(epochs),
    }


def markdown(results: dict[str, Any]) -> str:
    """The side-by-side table."""
    lines = [
        f"Graph: `{results['graph']}` ({results['num_nodes']:,} nodes, "
        f"{results['num_edges']:,} edges); {results['train_nodes']:,} training nodes, "
        f"batch {results['config']['batch_size']}, fanouts "
        f"{results['config']['fanouts']}, {results['config']['model']} hidden "
        f"{results['config']['hidden']}; {results['machine']['affinity_cpus']} CPUs, "
        f"torch {results['machine']['torch']}; OpenMP env "
        f"{ {k: v for k, v in results['machine']['env'].items() if v} or 'default' }; "
        f"device {results['config']['device']}.",
        "",
        "| prefetch threads | epoch s (median) | batches/s | sample s | wait (stall) s "
        "| stall % | compute s | compute % | eval s | same parameters |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    for workers, row in results["by_workers"].items():
        lines.append(
            f"| {workers} | {row['epoch_s']:.2f} | {row['batches_per_s']:.1f} | "
            f"{row['sample_s']:.2f} | {row['wait_s']:.2f} | {100 * row['stall_fraction']:.1f} | "
            f"{row['compute_s']:.2f} | {100 * row['compute_s'] / row['epoch_s']:.0f} | "
            f"{row['eval_s']:.2f} | {'yes' if row['same_parameters'] else 'NO'} |"
        )
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200_000)
    parser.add_argument(
        "--graph-dir",
        type=Path,
        default=None,
        help="an existing graph directory (default: synthesise OUT/graph)",
    )
    parser.add_argument("--workers", default="0,1,2", help="prefetch thread counts to compare")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=1, help="rounds over the settings")
    parser.add_argument("--train-nodes", type=int, default=20_000)
    parser.add_argument("--eval-nodes", type=int, default=2_000)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--fanouts", default="15,10")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--device", default="cpu", help="cpu or cuda (on CUDA the parameters differ in float noise)"
    )
    parser.add_argument("--out", type=Path, default=Path("bench-out/pipelined"))
    args = parser.parse_args(argv)

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.graph_dir or synth_graph(args.out / "graph", args.nodes, args.seed)
    graph = GraphDir.open(path)
    fanouts = tuple(int(f) for f in args.fanouts.split(","))
    base = NodeTrainConfig(
        model="sage",
        hidden=args.hidden,
        fanouts=fanouts,
        eval_fanouts=fanouts,
        batch_size=args.batch_size,
        epochs=args.epochs,
        patience=0,
        device=args.device,
        seed=args.seed,
        lr=0.005,
    )
    settings = [int(w) for w in args.workers.split(",")]
    runs: dict[int, list[dict[str, Any]]] = {w: [] for w in settings}
    # Warm-up (first-call costs of torch and the page cache), not recorded.
    run_once(
        graph,
        NodeTrainConfig(**{**base.to_dict(), "epochs": 1}),
        min(args.train_nodes, 4 * args.batch_size),
        args.eval_nodes,
    )
    for repeat in range(args.repeats):
        for workers in settings if repeat % 2 == 0 else settings[::-1]:
            config = NodeTrainConfig(**{**base.to_dict(), "prefetch_workers": workers})
            runs[workers].append(run_once(graph, config, args.train_nodes, args.eval_nodes))
            print(
                f"workers={workers}: epochs "
                f"{[round(e['train_s'], 2) for e in runs[workers][-1]['epochs']]}",
                flush=True,
            )
    reference = runs[settings[0]][0]
    by_workers = {}
    for workers in settings:
        row = summarise(runs[workers])
        row["same_parameters"] = all(
            (r["param_sum"], r["param_abs_sum"], r["train_loss"])
            == (reference["param_sum"], reference["param_abs_sum"], reference["train_loss"])
            for r in runs[workers]
        )
        by_workers[str(workers)] = row
    results = {
        "graph": str(path),
        "num_nodes": graph.manifest.num_nodes,
        "num_edges": graph.manifest.num_edges,
        "train_nodes": args.train_nodes,
        "eval_nodes": args.eval_nodes,
        "epochs": args.epochs,
        "repeats": args.repeats,
        "config": {**base.to_params()},
        "by_workers": by_workers,
        "runs": {str(w): r for w, r in runs.items()},
        "machine": {
            "cpus": os.cpu_count(),
            "affinity_cpus": len(os.sched_getaffinity(0)),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "loadavg": os.getloadavg(),
            "env": {
                k: os.environ.get(k)
                for k in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
            },
        },
    }
    (args.out / "pipelined_training.json").write_text(json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    (args.out / "pipelined_training.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
