"""``gnncore partition GRAPH_DIR OUT_DIR --method M --parts P [--chunk F] [--passes K] …``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gnncore.cli.arg_types import (
    add_memory_budget_option,
    add_overwrite_option,
    non_negative_int,
    positive_int,
    with_memory_figures,
)
from gnncore.partition.run import METHODS, MethodSettings


def add_method_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by ``partition`` and ``bench partition``."""
    defaults = MethodSettings()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--imbalance",
        type=float,
        default=0.03,
        help="allowed excess of the largest part over N/P (default 0.03)",
    )
    parser.add_argument(
        "--chunk",
        type=float,
        default=defaults.chunk,
        help="grem/greedy: chunk size as a fraction of the edges (default 0.1)",
    )
    parser.add_argument(
        "--passes",
        type=int,
        default=defaults.passes,
        help="grem: restreaming refinement passes; 0 is the thesis' GREM",
    )
    parser.add_argument(
        "--seed-method",
        default=defaults.seed_method,
        choices=("metis", "random", "ldg", "clusters"),
        help="grem: first-chunk seeding (default: clusters with --passes > 0, "
        "metis, the thesis' seed, with --passes 0)",
    )
    parser.add_argument(
        "--clusters",
        type=int,
        default=defaults.clusters,
        metavar="N",
        help="grem --seed-method clusters: target cluster size "
        "prefix nodes / N (default: max(16 p, min(256, prefix nodes "
        "/ 1000)))",
    )
    parser.add_argument(
        "--workers",
        type=non_negative_int,
        default=defaults.workers,
        metavar="W",
        help="grem/greedy: bisections run at once in worker processes "
        "(more is faster and holds W chunks in memory; default 0: one per CPU "
        "from 2**26 edges up, as 3/4 of the memory holds them, else 1)",
    )
    parser.add_argument(
        "--final-passes",
        type=int,
        default=defaults.final_passes,
        metavar="K",
        help="grem: final k-way refinement passes at most over the whole partition "
        f"(size-constrained label propagation; default {defaults.final_passes}; 0: none)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=defaults.threads,
        metavar="T",
        help="kaminpar: threads (default 1, deterministic for a seed; 0: every CPU "
        "this process may use)",
    )
    parser.add_argument("--hops", type=int, default=defaults.hops, help="bytegnn: block radius")
    parser.add_argument(
        "--group-size",
        type=positive_int,
        default=defaults.group_size,
        metavar="N",
        help="hydra: nodes per degree-balanced greedy group (default 64)",
    )
    parser.add_argument(
        "--no-balance-splits",
        action="store_true",
        help="skip rebalancing train/val/test counts across parts",
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="print no progress lines on stderr (bench: no line per run)",
    )


def settings_from(args: argparse.Namespace) -> MethodSettings:
    return MethodSettings(
        chunk=args.chunk,
        passes=args.passes,
        seed_method=args.seed_method,
        hops=args.hops,
        clusters=args.clusters,
        workers=args.workers,
        group_size=args.group_size,
        threads=args.threads,
        final_passes=args.final_passes,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph_dir", type=Path, metavar="GRAPH_DIR")
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    add_overwrite_option(parser)
    parser.add_argument("--method", choices=METHODS, default="metis")
    parser.add_argument("--parts", type=int, required=True, metavar="P")
    add_memory_budget_option(
        parser,
        "memory of the post-processing's buffers beyond its O(|V|) arrays: edge rows "
        "per read, halo bits per read, the symmetric-CSR sort of directed graphs; "
        "changes no output. auto: a quarter of the memory this process may take, "
        "between 128MiB and 1GiB; none: 128MiB. The method's own memory is set by "
        "its options (grem: --chunk)",
    )
    add_method_arguments(parser)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from gnncore.errors import InputError
    from gnncore.heap import fix_mmap_threshold
    from gnncore.partition import partition_graph

    def say(message: str) -> None:
        print(f"[partition] {message}", file=sys.stderr, flush=True)

    # this process only partitions: blocks of 1 MiB and more go back to the system
    # when freed, not into a heap under every later phase's peak (issue 28, item 2)
    fix_mmap_threshold()

    try:
        report = partition_graph(
            args.graph_dir,
            args.out_dir,
            method=args.method,
            parts=args.parts,
            seed=args.seed,
            imbalance=args.imbalance,
            settings=settings_from(args),
            balance=not args.no_balance_splits,
            progress=None if args.no_progress else say,
            memory_budget=args.memory_budget,
        )
    except ValueError as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(str(exc), args.graph_dir) from exc
    from gnncore.partition.run import postprocess_budget

    # the post-processing's buffers, what --memory-budget bounds here
    return with_memory_figures(report.to_dict(), postprocess_budget(args.memory_budget))
