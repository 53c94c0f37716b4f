"""``gnncore bench partition GRAPH_DIR --parts 2,4,8,16 --methods ... --out DIR``.

``gnncore bench sampling GRAPH_DIR --fanouts 15,10,5 [--fanouts 30,20,10]
--batch-size 1000 --out DIR [--batches N]``: DENSE vs per-layer sampling.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

HAS_SUBCOMMANDS = True


def _ints(text: str) -> list[int]:
    return [int(t) for t in text.split(",") if t]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from gnncore.cli.main import json_option
    from gnncore.cli.partition import add_method_arguments

    sub = parser.add_subparsers(dest="what", metavar="WHAT", required=True)
    part = sub.add_parser(
        "partition", help="partitioners side by side, one process each", parents=[json_option()]
    )
    part.add_argument("graph_dir", type=Path, metavar="GRAPH_DIR")
    part.add_argument("--parts", type=_ints, default=[2, 4, 8, 16])
    part.add_argument(
        "--methods", type=lambda t: [m for m in t.split(",") if m], default=["metis", "grem"]
    )
    part.add_argument("--out", type=Path, required=True, metavar="DIR")
    part.add_argument(
        "--shuffles",
        type=int,
        default=1,
        help="run grem/greedy on this many orders of the edge stream",
    )
    add_method_arguments(part)

    samp = sub.add_parser(
        "sampling", help="DENSE vs per-layer neighbour sampling", parents=[json_option()]
    )
    samp.add_argument("graph_dir", type=Path, metavar="GRAPH_DIR")
    samp.add_argument(
        "--fanouts",
        type=_ints,
        action="append",
        default=None,
        help="fanouts from the targets outward; repeat for several (default: 15,10,5)",
    )
    samp.add_argument("--batch-size", type=int, default=1000)
    samp.add_argument("--batches", type=int, default=50)
    samp.add_argument("--out", type=Path, required=True, metavar="DIR")
    samp.add_argument("--seed", type=int, default=0)
    samp.add_argument(
        "--threads", type=int, default=0, help="kernel threads; 0: every CPU this process may use"
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.what == "sampling":
        return _run_sampling(args)
    from gnncore.cli.partition import settings_from
    from gnncore.errors import InputError
    from gnncore.partition.bench import bench_partition

    try:
        result = bench_partition(
            args.graph_dir,
            args.out,
            args.methods,
            args.parts,
            seed=args.seed,
            imbalance=args.imbalance,
            settings=settings_from(args),
            shuffles=args.shuffles,
            progress=not args.no_progress,
        )
    except ValueError as exc:
        raise InputError(str(exc), args.graph_dir) from exc
    print(result.pop("markdown"))
    return result


def _run_sampling(args: argparse.Namespace) -> dict[str, Any]:
    from gnncore.errors import InputError
    from gnncore.sampler.bench import bench_sampling

    try:
        result = bench_sampling(
            args.graph_dir,
            args.fanouts or [[15, 10, 5]],
            args.batch_size,
            args.batches,
            args.out,
            seed=args.seed,
            num_threads=args.threads,
        )
    except ValueError as exc:
        raise InputError(str(exc), args.graph_dir) from exc
    print(result.pop("markdown"))
    return result
