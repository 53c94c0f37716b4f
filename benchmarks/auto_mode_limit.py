"""Mode auto under a real memory limit: ``in_memory`` is killed, ``auto`` trains.

Generates a graph whose features exceed the limit (``--nodes`` x ``--features``
float32), partitions it (METIS), writes its partitioned store, then runs
``gnncore train`` twice, each in a fresh cgroup v1 memory cgroup of ``--limit``
(``gnncore_bench.limits.run_limited``, page cache of the inputs evicted first):
``--mode in_memory``, and the default ``--mode auto`` with ``--store`` and no
budget (so auto compares with what the cgroup leaves, ``gnncore.memory``).
Prints and writes (``--out``) one JSON object: per mode the exit code, whether
the OOM killer struck, wall seconds, the cgroup's peak, and the training summary
(mode, mode_reason, test accuracy) where there is one. Needs root (cgroups).

    .venv/bin/python benchmarks/auto_mode_limit.py --work /tmp/auto-bench \\
        --nodes 250000 --features 1024 --parts 32 --limit 768MiB --out bench-out/auto-mode.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from gnncore.outofcore.store import write_partitioned_store
from gnncore.partition import partition_graph
from gnncore.sizes import format_size, parse_size
from gnncore.synth import SynthSpec, generate_graph
from gnncore_bench.limits import gnncore_command, run_limited

TRAIN_ARGS = (
    "--epochs",
    "1",
    "--fanouts",
    "5",
    "--batch-size",
    "1024",
    "--hidden",
    "32",
    "--device",
    "cpu",
    "--no-progress",
)


def prepare(work: Path, nodes: int, features: int, parts: int) -> tuple[Path, Path]:
    """The graph and its partitioned store under ``work`` (reused when present)."""
    graph, part, store = work / "graph", work / "part", work / "store"
    if not graph.exists():
        spec = SynthSpec(num_nodes=nodes, avg_degree=8, num_classes=8, num_features=features)
        generate_graph(graph, spec, memory_budget=None)
    if not part.exists():
        partition_graph(graph, part, method="metis", parts=parts, seed=0)
    if not store.exists():
        write_partitioned_store(graph, part, store, static_fraction=0.01)
    return graph, store


def run_mode(work: Path, graph: Path, store: Path, mode: str, limit: int, timeout: float) -> dict:
    """One ``gnncore train`` under ``limit``; what it measured and its summary."""
    summary = work / f"{mode}.json"
    summary.unlink(missing_ok=True)
    extra = ["--store", str(store)] if mode == "auto" else []
    cmd = gnncore_command(
        "train",
        graph,
        "--mode",
        mode,
        *extra,
        *TRAIN_ARGS,
        "--data-root",
        work / "root",
        "--json",
        summary,
    )
    run = run_limited(
        cmd,
        limit,
        timeout=timeout,
        evict=[graph, store],
        capture_dir=work / "logs",
        capture_name=mode,
        require_limit=True,
    )
    out: dict[str, Any] = {
        "command": " ".join(str(c) for c in cmd),
        "exit_code": run.exit_code,
        "killed_for_memory": run.killed_for_memory,
        "timed_out": run.timed_out,
        "wall_seconds": round(run.wall_seconds, 1),
        "peak_memory": format_size(run.peak_memory_bytes or 0),
    }
    if summary.exists():
        result = json.loads(summary.read_text())
        out.update(
            {k: result.get(k) for k in ("mode", "mode_requested", "mode_reason", "test_accuracy")}
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--nodes", type=int, default=250_000)
    parser.add_argument("--features", type=int, default=1024)
    parser.add_argument("--parts", type=int, default=32)
    parser.add_argument("--limit", default="768MiB")
    parser.add_argument("--timeout", type=float, default=420)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    graph, store = prepare(args.work, args.nodes, args.features, args.parts)
    limit = parse_size(args.limit)
    report = {
        "nodes": args.nodes,
        "features": args.features,
        "feature_bytes": format_size(args.nodes * args.features * 4),
        "limit": format_size(limit),
        "modes": {
            m: run_mode(args.work, graph, store, m, limit, args.timeout)
            for m in ("in_memory", "auto")
        },
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
