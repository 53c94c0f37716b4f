"""``gnncore synth OUT_DIR --nodes N --avg-degree D --classes C --features F --seed S``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gnncore.progress import on_terminal


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    parser.add_argument("--nodes", type=int, default=20_000)
    parser.add_argument("--avg-degree", type=float, default=10.0)
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--intra-fraction",
        type=float,
        default=None,
        help="expected fraction of intra-community edges",
    )
    parser.add_argument("--feature-noise", type=float, default=None)
    parser.add_argument(
        "--communities-per-class",
        type=int,
        default=1,
        help="communities of each class (default 1: a class is one community)",
    )
    parser.add_argument("--name", default="synthetic", help="dataset name in the manifest")
    parser.add_argument(
        "--layout",
        choices=("graph", "ogb"),
        default="graph",
        help="graph: a graph directory (default); ogb: OGB raw files to ingest",
    )
    parser.add_argument("--no-progress", action="store_true")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from gnncore.errors import InputError
    from gnncore.synth import SynthSpec, generate_graph, write_ogb_raw

    extra = {
        k: v
        for k, v in (("intra_fraction", args.intra_fraction), ("feature_noise", args.feature_noise))
        if v is not None
    }
    try:  # the spec validates itself on construction
        spec = SynthSpec(
            num_nodes=args.nodes,
            avg_degree=args.avg_degree,
            num_classes=args.classes,
            num_features=args.features,
            seed=args.seed,
            communities_per_class=args.communities_per_class,
            **extra,
        )
    except ValueError as exc:
        raise InputError(f"bad generator setting: {exc}") from exc
    if args.layout == "ogb":
        return {
            "layout": "ogb",
            **write_ogb_raw(args.out_dir, spec, progress=not args.no_progress and on_terminal()),
        }
    report = generate_graph(
        args.out_dir, spec, name=args.name, progress=not args.no_progress and on_terminal()
    )
    return {"layout": "graph", **report.to_dict()}
