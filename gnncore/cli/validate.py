"""``gnncore validate GRAPH_DIR [--checksums]``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph_dir", type=Path, metavar="GRAPH_DIR")
    parser.add_argument(
        "--checksums", action="store_true", help="also verify the sha256 of every file"
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    from gnncore.store import GraphDir

    graph = GraphDir.open(args.graph_dir)
    graph.validate(checksums=args.checksums)
    m = graph.manifest
    return {
        "graph_dir": str(args.graph_dir),
        "valid": True,
        "num_nodes": m.num_nodes,
        "num_edges": m.num_edges,
        "num_canonical_edges": m.num_canonical_edges,
        "checksums_verified": bool(args.checksums),
    }
