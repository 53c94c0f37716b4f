"""``gnncore ingest SOURCE OUT_DIR [--format F] [--directed] [--id-type T] ...``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gnncore.cli.arg_types import (
    add_memory_budget_option,
    add_overwrite_option,
    with_memory_figures,
)

FORMAT_CHOICES = ("auto", "edgelist", "parquet", "ogb", "planetoid", "kg")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source",
        type=Path,
        metavar="SOURCE",
        help="an edge-list/Parquet file or an OGB/Planetoid/KG dataset directory",
    )
    parser.add_argument(
        "out_dir",
        type=Path,
        metavar="OUT_DIR",
        help="the graph directory to create (a graph directory there is replaced; "
        "anything else is refused)",
    )
    add_overwrite_option(parser)
    parser.add_argument(
        "--format",
        choices=FORMAT_CHOICES,
        default="auto",
        help="input format (default: detected from SOURCE)",
    )
    parser.add_argument(
        "--directed",
        action="store_true",
        help="keep edge direction (default: undirected; kg is always directed)",
    )
    parser.add_argument(
        "--id-type",
        choices=("auto", "int", "string"),
        default="auto",
        help="node ids of edge lists and Parquet tables (default: auto)",
    )
    parser.add_argument(
        "--header",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="edge lists: the first data line is (not) a header (default: detected)",
    )
    parser.add_argument(
        "--nodes",
        type=Path,
        default=None,
        metavar="TABLE",
        help="edge lists and Parquet tables: a node table (Parquet/CSV/TSV with node_id, "
        "feature columns or a 'features' list, optional label and split; docs/FORMAT.md)",
    )
    parser.add_argument(
        "--standardize-features",
        action="store_true",
        help="with --nodes: scale each feature column to mean 0 and deviation 1 over the "
        "training nodes (kept as feature_mean.npy / feature_std.npy)",
    )
    add_memory_budget_option(
        parser,
        "the memory ingestion may take: ingest in bounded memory, parsing in batches "
        "and building the CSR from sorted runs on disk beside OUT_DIR; same graph "
        "directory. Text edge lists, integer or string ids; with --nodes a Parquet "
        "table and integer ids (CSV/TSV tables, --standardize-features and other formats "
        "are ingested in memory for now). auto: half the available memory, in bounded "
        "memory wherever that path takes the input (it is faster), else in memory; "
        "none: in memory",
    )
    parser.add_argument("--name", default=None, help="dataset name for the manifest")
    parser.add_argument(
        "--no-progress", action="store_true", help="hide the stage bar (shown on a terminal)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the shuffled edge stream")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from gnncore.errors import GnnCoreError
    from gnncore.io import detect_format
    from gnncore.names import safe_name

    if args.name is not None:
        safe_name(args.name, what="--name")  # before any work: it becomes paths
    fmt = detect_format(args.source) if args.format == "auto" else args.format
    if args.header is not None and fmt != "edgelist":
        raise GnnCoreError(f"--header/--no-header apply to edge lists, not to {fmt} input")
    if args.nodes is not None and fmt not in ("edgelist", "parquet"):
        raise GnnCoreError(f"--nodes applies to edge lists and Parquet tables, not to {fmt} input")
    if args.standardize_features and args.nodes is None:
        raise GnnCoreError("--standardize-features scales the features of a node table (--nodes)")
    if isinstance(args.memory_budget, int):
        if fmt != "edgelist":
            raise GnnCoreError(
                f"--memory-budget SIZE applies to text edge lists for now, not to {fmt} input"
            )
        if args.nodes is not None:
            from gnncore.io.bounded.node_table import bounded_node_table_refusal

            refusal = bounded_node_table_refusal(args.nodes, args.standardize_features)
            if refusal is not None:
                raise GnnCoreError(f"--memory-budget SIZE with --nodes: {refusal}")
    from gnncore.progress import StageBar

    with StageBar("ingest", enabled=None if not args.no_progress else False) as bar:
        report = _ingest(args, fmt, bar)
    return with_memory_figures(report.to_dict(), report.memory_budget)


def _ingest(args: argparse.Namespace, fmt: str, bar: Any) -> Any:
    from gnncore.io import ingest

    return ingest(
        args.source,
        args.out_dir,
        format=fmt,
        directed=args.directed,
        name=args.name,
        id_type=args.id_type,
        seed=args.seed,
        header=args.header,
        nodes=args.nodes,
        standardize_features=args.standardize_features,
        progress=bar,
        memory_budget=args.memory_budget,
    )
