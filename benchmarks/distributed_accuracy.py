"""Distributed training's accuracy against one process, over several seeds.

For each seed, runs ``gnncore bench distributed`` (:func:`gnncore.distributed.
bench.bench_distributed`: each configuration in its own process tree) on one
graph with world sizes ``--nproc`` (1 is the one-process baseline with the same
global batch) and the ``--partitioners``, then tabulates test accuracy (the
best validation epoch's weights) per seed, the mean, and the difference from
one process. Beside the world-size-1 run of the distributed path, each seed
also trains once with plain single-process training (``train_graph_dir``, the
same config: ``plain`` in the table), the reference the issue names. Writes
``accuracy.json`` and ``accuracy.md`` into ``--out``.

    .venv/bin/python benchmarks/distributed_accuracy.py --cora \
        --nproc 1,2,4 --seeds 0,1,2 --out bench-out/distributed-cora

``--cora`` ingests ``../shared/datasets/planetoid/Cora`` (cached under
``--data``) and uses the single-process defaults of ``gnncore train --task node
--model sage`` (20 epochs, batch 64, fanouts 15,10); otherwise pass
``GRAPH_DIR`` and the settings. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
DEFAULT_DATA = Path("/work/bench-data/distributed-accuracy")


def cora_graph(data: Path, shared: Path) -> Path:
    """Cora's graph directory under ``data``, ingested once from ``shared``."""
    from gnncore.io import ingest_versioned

    raw = shared / "datasets" / "planetoid" / "Cora"
    if not raw.is_dir():
        raise SystemExit(f"Cora's raw files are not at {raw}")
    return ingest_versioned(raw, data / "graphs", "cora", format="planetoid").path


def plain_accuracy(graph: Path, spec: dict[str, Any]) -> float:
    """Test accuracy of plain single-process training with the benchmark's config."""
    from gnncore.modes import RunRecording, train_graph_dir
    from gnncore_bench.distributed_child import node_config

    return float(
        train_graph_dir(
            graph, node_config(spec), recording=RunRecording(progress=False)
        ).test_accuracy
    )


def tabulate(
    runs: dict[int, dict[str, Any]], plain: dict[int, float], nproc: list[int]
) -> dict[str, Any]:
    """Per (partitioner, world size): accuracy per seed, mean, difference from
    plain single-process training."""
    rows: dict[tuple[str, int], dict[int, float]] = {}
    if plain:
        rows[("plain", 1)] = dict(plain)
    for seed, result in runs.items():
        for c in result["configs"]:
            if c.get("status") == "ok":
                key = ("-" if c["nproc"] == 1 else c["partitioner"], c["nproc"])
                rows.setdefault(key, {})[seed] = c["test_accuracy"]
    baseline = rows.get(("plain", 1)) or rows.get(("-", 1), {})
    base_mean = statistics.fmean(baseline.values()) if baseline else None
    table = []
    for (method, n), by_seed in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        mean = statistics.fmean(by_seed.values())
        table.append(
            {
                "partitioner": method,
                "nproc": n,
                "test_accuracy": {str(s): a for s, a in sorted(by_seed.items())},
                "mean": mean,
                "minus_one_process": None if base_mean is None else mean - base_mean,
            }
        )
    return {"nproc": nproc, "seeds": sorted(runs), "rows": table}


def to_markdown(summary: dict[str, Any]) -> str:
    seeds = summary["seeds"]
    head = (
        "| partitioner | ranks | "
        + " | ".join(f"seed {s}" for s in seeds)
        + " | mean | vs 1 process |"
    )
    lines = [head, "|---|---:|" + "---:|" * (len(seeds) + 2)]
    for r in summary["rows"]:
        accs = " | ".join(f"{r['test_accuracy'].get(str(s), float('nan')):.4f}" for s in seeds)
        delta = "" if r["minus_one_process"] is None else f"{r['minus_one_process'] * 100:+.2f} pts"
        lines.append(f"| {r['partitioner']} | {r['nproc']} | {accs} | {r['mean']:.4f} | {delta} |")
    return "\n".join(lines)


def main() -> None:
    from gnncore_bench.distributed import bench_distributed

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("graph_dir", nargs="?", type=Path)
    parser.add_argument("--cora", action="store_true", help="Cora from ../shared, sage defaults")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--shared", type=Path, default=SHARED, help="where datasets/ lies")
    parser.add_argument("--nproc", default="1,2,4")
    parser.add_argument("--partitioners", default="metis")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--fanouts", default=None, help="default 15,10 (--cora) or 10,5")
    parser.add_argument("--batch-size", type=int, default=None, help="default 64 (--cora) or 1000")
    parser.add_argument("--epochs", type=int, default=None, help="default 20 (--cora) or 3")
    parser.add_argument("--out", type=Path, default=REPO / "bench-out" / "distributed-accuracy")
    args = parser.parse_args()
    if args.cora == (args.graph_dir is not None):
        parser.error("give GRAPH_DIR or --cora")
    graph = cora_graph(args.data, args.shared) if args.cora else args.graph_dir
    fanouts = args.fanouts or ("15,10" if args.cora else "10,5")
    batch = args.batch_size or (64 if args.cora else 1000)
    epochs = args.epochs or (20 if args.cora else 3)
    nproc = [int(n) for n in args.nproc.split(",")]
    runs, plain = {}, {}
    for seed in (int(s) for s in args.seeds.split(",")):
        spec = {"model": "sage", "fanouts": fanouts.split(","), "batch_size": batch}
        plain[seed] = plain_accuracy(Path(graph), {**spec, "epochs": epochs, "seed": seed})
        print(f"seed {seed}: plain single-process test accuracy {plain[seed]:.4f}", flush=True)
        runs[seed] = bench_distributed(
            graph,
            args.out / f"seed{seed}",
            nproc=nproc,
            partitioners=args.partitioners.split(","),
            fanouts=[int(f) for f in fanouts.split(",")],
            batch_size=batch,
            epochs=epochs,
            seed=seed,
            work_dir=args.data / "work" / Path(graph).name,
        )
    summary = {
        "graph": str(graph),
        "fanouts": fanouts,
        "batch_size": batch,
        "epochs": epochs,
        **tabulate(runs, plain, nproc),
    }
    summary["markdown"] = to_markdown(summary)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "accuracy.json").write_text(json.dumps(summary, indent=2) + "\n")
    (args.out / "accuracy.md").write_text(summary["markdown"] + "\n")
    print(summary["markdown"])


if __name__ == "__main__":
    main()
