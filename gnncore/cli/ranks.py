"""``gnncore ranks GRAPH_DIR PARTITION_DIR OUT_DIR [--replication PLAN_DIR]
[--rewrite] [--memory-budget {auto,none,SIZE}]``: per-rank data for distributed
training (:func:`gnncore.distributed.rank_write.write_rank_data`).

The writer holds one rank's slice at a time, its size set by the partition, not
by a budget: ``--memory-budget`` (the whole process's) is checked at the start
against :func:`~gnncore.distributed.rank_write.rank_write_bytes` (the largest
rank's slice, from the graph's and partition's sizes) and the verb is refused,
naming the minimum, when the slice does not fit; the JSON reports the estimate
and the peak RSS against the budget."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from gnncore.cli.arg_types import add_memory_budget_option, add_overwrite_option

    parser.add_argument("graph_dir", type=Path, metavar="GRAPH_DIR")
    parser.add_argument(
        "partition_dir",
        type=Path,
        metavar="PARTITION_DIR",
        help="a partition of GRAPH_DIR (one rank per partition)",
    )
    parser.add_argument(
        "out_dir",
        type=Path,
        metavar="OUT_DIR",
        help="the rank-data directory (rank data there is replaced; anything else is refused)",
    )
    add_overwrite_option(parser)
    parser.add_argument(
        "--replication",
        type=Path,
        default=None,
        metavar="PLAN_DIR",
        help="an HDR replication plan of GRAPH_DIR (gnncore plan replication): each rank "
        "also holds the replicated nodes' features and labels",
    )
    parser.add_argument(
        "--rewrite",
        action="store_true",
        help="rewrite OUT_DIR even when it already holds this graph's and partition's rank data",
    )
    add_memory_budget_option(
        parser,
        "memory this whole process may take; the writer holds one rank's slice at a "
        "time, sized by the partition: refused at start, naming the minimum, when the "
        "largest rank's estimated slice does not fit (more parts make it smaller). "
        "auto: the lower of the cgroup limit and the available memory",
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    import time

    from gnncore.cli.arg_types import with_memory_figures
    from gnncore.distributed.rank_write import rank_write_bytes, write_rank_data
    from gnncore.store import GraphDir
    from gnncore.usage import StageBudget, resolve_process_budget

    # corrupt arrays: one line naming the file and row, before any rank data is written
    GraphDir.open(args.graph_dir).check_structure()
    budget = resolve_process_budget(args.memory_budget)
    needed = rank_write_bytes(args.graph_dir, args.partition_dir, args.replication)
    share = StageBudget.start(budget)
    share.require(needed, "gnncore ranks (its largest rank's slice)")
    started = time.perf_counter()
    out = write_rank_data(
        args.graph_dir,
        args.partition_dir,
        args.out_dir,
        reuse=not args.rewrite,
        replication=args.replication,
    )
    summary = {**_summary(Path(out), started), **share.to_dict(), "memory_estimate_bytes": needed}
    return with_memory_figures(summary, budget)


def _summary(out: Path, started: float) -> dict[str, Any]:
    """The verb's JSON: each rank's node, edge and byte counts."""
    import time

    from gnncore.distributed.rank_data import RankData

    first = RankData.open(out, 0)
    ranks = first.info["ranks"]
    return {
        "rank_data": str(out),
        "parts": first.parts,
        "num_nodes": first.num_nodes,
        "offsets": first.offsets.tolist(),
        "core_nodes": [r["num_core"] for r in ranks],
        "halo_nodes": [r["num_halo"] for r in ranks],
        "replica_nodes": [r.get("num_replica", 0) for r in ranks],
        "edges": [r["num_edges"] for r in ranks],
        "bytes": [sum(f["bytes"] for f in r["files"].values()) for r in ranks],
        "stage_key": first.info["stage_key"],
        "seconds": round(time.perf_counter() - started, 3),
    }
