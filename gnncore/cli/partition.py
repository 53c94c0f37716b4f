"""``gnncore partition GRAPH_DIR OUT_DIR --method metis --parts P [--seed S]``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gnncore.partition.run import METHODS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph_dir", type=Path, metavar="GRAPH_DIR")
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    parser.add_argument("--method", choices=METHODS, default="metis")
    parser.add_argument("--parts", type=int, required=True, metavar="P")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--imbalance", type=float, default=0.03,
                        help="allowed excess of the largest part over N/P (default 0.03)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from gnncore.partition import partition_graph

    try:
        report = partition_graph(args.graph_dir, args.out_dir, method=args.method,
                                 parts=args.parts, seed=args.seed, imbalance=args.imbalance)
    except ValueError as exc:
        from gnncore.errors import InputError

        raise InputError(str(exc), args.graph_dir) from exc
    return report.to_dict()
