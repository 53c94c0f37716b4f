"""Exact evaluation (every neighbour): sampled per batch vs the layer-wise engine.

Builds (once; reused while its parameters match) a graph with the project's
generator in ``--data`` (default ``/work/bench-data/layerwise-eval``; never in
the repository): ``--nodes`` nodes of mean degree ``--avg-degree`` (the
manifest counts each undirected edge twice, so 10 gives ``10 N`` edges),
``--features`` float32 features, ``--classes`` classes, and the generator's
own split (10% train, 10% validation, 80% test: for 1M nodes the issue's
100k / 100k / 800k). Then trains GraphSAGE with fanouts ``5,5`` for
``--epochs`` epoch(s) (default 1) once per ``--ways`` entry:

* ``sampled``: exact evaluation as before issue 27 -- validation and test
  batches of ``eval_batch_size`` seeds sampled with every neighbour (the
  all-neighbour sampler handed to the task, so the layer-wise rule is off);
* ``layerwise``: the default now -- :mod:`gnncore.train.node.exact` chooses
  the layer-wise engine by its cost rule (the chosen way is reported).

Reports per way: training seconds (the epochs' ``train_s``), validation
seconds (all epochs), test seconds, validation and test accuracy, and the
way each split took. The model weights of both runs are compared (evaluation
must not change training). Prints the results and writes
``layerwise_eval.json`` and ``layerwise_eval.md`` into ``--out`` (default
``bench-out/layerwise_eval``)::

    .venv/bin/python benchmarks/layerwise_eval.py --nodes 200000 --ways sampled,layerwise
    .venv/bin/python benchmarks/layerwise_eval.py --nodes 1000000 --ways layerwise

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch
from generated_graph import cached_graph

from gnncore.sampler import build_sampler
from gnncore.store import GraphDir, GraphDirFeatureStore, GraphDirGraphStore
from gnncore.train import NodeTrainConfig
from gnncore.train.fitting import Built, Measures, RunHooks, fit
from gnncore.train.node.task import NodeTask

DEFAULT_DATA = Path("/work/bench-data/layerwise-eval")


class TimedNodeTask(NodeTask):
    """A :class:`NodeTask` that times its validation and test passes."""

    seconds: dict[str, float]

    def measures(self, config: Any, built: Built, *args: Any) -> Measures:
        measures = super().measures(config, built, *args)
        self.seconds = {"val": 0.0, "test": 0.0}

        def timed(name: str, call: Any) -> Any:
            def run() -> Any:
                started = time.perf_counter()
                out = call()
                self.seconds[name] += time.perf_counter() - started
                return out

            return run

        validate, test = timed("val", measures.validate), timed("test", measures.test)
        return Measures(measures.step, validate, test)


def run_way(graph: GraphDir, way: str, config: NodeTrainConfig) -> tuple[dict[str, Any], Any]:
    """Train once with exact evaluation the way ``way``; its figures and model."""
    features, topology = GraphDirFeatureStore(graph), GraphDirGraphStore(graph)
    eval_sampler = None
    if way == "sampled":
        fanouts = (-1,) * config.num_layers
        eval_sampler = build_sampler(config.sampler, topology, fanouts, seed=config.seed + 1)
    splits = [graph.split(s) for s in ("train", "val", "test")]
    task = TimedNodeTask(
        features, topology, splits, graph.manifest.num_classes, eval_sampler=eval_sampler
    )
    started = time.perf_counter()
    result = fit(task, config, None, RunHooks(None, False, None, False, None))
    total = time.perf_counter() - started
    row = {
        "way": way,
        "evaluation_ways": task.evaluation_ways,
        "train_s": sum(t["train_s"] for t in result.throughput),
        "val_s": task.seconds["val"],
        "test_s": task.seconds["test"],
        "total_s": total,
        "val_accuracy": result.val_accuracy,
        "test_accuracy": result.test_accuracy,
        "test_macro_f1": result.test_macro_f1,
    }
    print(json.dumps(row), flush=True)
    return row, result.model


def markdown(report: dict[str, Any]) -> str:
    g = report["graph"]
    lines = [
        f"Graph: {g['num_nodes']:,} nodes, {g['num_edges']:,} edges, {g['num_features']} "
        f"features; splits {g['train']:,} / {g['val']:,} / {g['test']:,}. "
        f"GraphSAGE fanouts 5,5, {report['epochs']} epoch(s), {report['machine']['cpus']} CPUs.",
        "",
        "| exact evaluation | train s | validation s | test s | val acc | test acc | ways |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in report["runs"]:
        ways = ", ".join(f"{k}: {v}" for k, v in r["evaluation_ways"].items())
        lines.append(
            f"| {r['way']} | {r['train_s']:.1f} | {r['val_s']:.1f} | {r['test_s']:.1f} "
            f"| {r['val_accuracy'][-1]:.4f} | {r['test_accuracy']:.4f} | {ways} |"
        )
    if "same_weights" in report:
        lines += ["", f"Same trained weights both ways: {report['same_weights']}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--nodes", type=int, default=200_000)
    parser.add_argument("--avg-degree", type=float, default=10.0)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--ways", default="sampled,layerwise")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, default=Path("bench-out/layerwise_eval"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    params = {
        "nodes": args.nodes,
        "features": args.features,
        "avg_degree": args.avg_degree,
        "classes": args.classes,
        "communities_per_class": 1,
        "seed": args.seed,
    }
    path = args.data / f"n{args.nodes}-d{args.avg_degree:g}-f{args.features}"
    path.parent.mkdir(parents=True, exist_ok=True)
    built = cached_graph(path, params, "layerwise-eval", lambda y, splits, rng: splits)
    graph = GraphDir.open(path)
    config = NodeTrainConfig(
        model="sage", fanouts=(5, 5), epochs=args.epochs, device=args.device, seed=args.seed
    )
    report: dict[str, Any] = {
        "graph": {
            "path": str(path),
            "num_nodes": graph.num_nodes,
            "num_edges": graph.manifest.num_edges,
            "num_features": graph.manifest.num_features,
            **{s: len(graph.split(s)) for s in ("train", "val", "test")},
            "built": built,
        },
        "epochs": args.epochs,
        "config": config.to_params(),
        "machine": {
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
        },
        "runs": [],
    }
    models = []
    args.out.mkdir(parents=True, exist_ok=True)
    for way in args.ways.split(","):
        row, model = run_way(graph, way, config)
        report["runs"].append(row)
        models.append(model)
        (args.out / "layerwise_eval.json").write_text(json.dumps(report, indent=2) + "\n")
    if len(models) == 2:
        a, b = (m.state_dict() for m in models)
        report["same_weights"] = all(torch.equal(a[k], b[k]) for k in a)
    (args.out / "layerwise_eval.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "layerwise_eval.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
