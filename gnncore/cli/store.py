"""``gnncore store GRAPH_DIR PARTITION_DIR OUT_DIR [--static-fraction F]
[--memory-budget SIZE] [--verify]``.

The store is written within ``--memory-budget`` (``auto``: what this whole
process may take, the lower of the cgroup's limit and the available memory plus
what the process holds): features and edges stream
through buffers sized from what the budget leaves after the writer's fixed
overhead. The summary reports the budget, the fixed overhead, the buffers, the
disk estimated beforehand and the stage's peak RSS.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from gnncore.cli.arg_types import add_memory_budget_option, add_overwrite_option

    parser.add_argument("graph_dir", type=Path, metavar="GRAPH_DIR")
    parser.add_argument("partition_dir", type=Path, metavar="PARTITION_DIR")
    parser.add_argument(
        "out_dir",
        type=Path,
        metavar="OUT_DIR",
        help="the store directory (a store there is replaced; anything else is refused)",
    )
    add_overwrite_option(parser)
    parser.add_argument(
        "--static-fraction",
        type=float,
        default=0.01,
        help="share of nodes, highest in-degree first, kept as the static set (default 0.01)",
    )
    add_memory_budget_option(
        parser,
        "the memory the writer may take: features and edges stream through buffers sized "
        "from what it leaves after the per-node arrays (72 bytes a node) and the process's "
        "own memory; a budget below that is refused; same bytes whatever the budget. auto: "
        "what the whole process may take (the lower of the cgroup limit and the available "
        "memory plus what it holds); none: the "
        "largest buffers (2 GiB), unchecked",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="check an existing store's checksums instead of writing one (OUT_DIR only)",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="hide the stage bar (shown on a terminal)"
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    from gnncore.outofcore.store import PartitionedStore, build_partitioned_store
    from gnncore.progress import StageBar, reporting

    if args.verify:
        store = PartitionedStore.open(args.out_dir)
        store.verify()
        return {"store": str(store.path), "verified": True, "parts": store.parts}
    with StageBar("store", enabled=False if args.no_progress else None) as bar, reporting(bar):
        report = build_partitioned_store(
            args.graph_dir,
            args.partition_dir,
            args.out_dir,
            args.static_fraction,
            memory_budget=args.memory_budget,
        )
    from gnncore.cli.arg_types import with_memory_figures

    info = report.store.info
    # the report's own memory_budget_bytes and peak_rss_bytes win; adds peak_rss_of_budget
    summary = {
        **report.to_dict(),
        **{
            k: info[k]
            for k in (
                "num_nodes",
                "num_edges",
                "parts",
                "num_static",
                "partition_offsets",
                "seconds",
            )
        },
        "bytes": sum(entry["bytes"] for entry in info["files"].values()),
    }
    return with_memory_figures(summary, None)
