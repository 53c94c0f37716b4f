"""``gnncore synth OUT_DIR --nodes N --avg-degree D --classes C --features F --seed S``.

``--layout csv`` writes the edges alone as one ``src,dst`` CSV file, OUT_DIR
then naming that file (the raw input of ``gnncore bench scale``).

``--memory-budget SIZE`` generates the graph directory in bounded memory (the
edges sorted and deduplicated in runs on disk beside OUT_DIR, the same files
byte for byte); the JSON summary then reports the peak RSS and the phase times.

``--model powerlaw`` (Chung-Lu, degree exponent ``--exponent``) and ``--model
bipartite`` (two node types, Zipf degrees of exponents ``--exponent`` and
``--right-exponent`` on the two sides) generate heavy-tailed graphs without
planted communities (gnncore.synth.heavy_tail), with uniform random labels.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gnncore.cli.arg_types import (
    add_memory_budget_option,
    add_overwrite_option,
    with_memory_figures,
)
from gnncore.progress import on_terminal


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    add_overwrite_option(parser)
    parser.add_argument("--nodes", type=int, default=20_000)
    parser.add_argument("--avg-degree", type=float, default=10.0)
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--model",
        choices=("planted", "powerlaw", "bipartite"),
        default="planted",
        help="planted: degree-corrected planted partition (default); powerlaw: Chung-Lu "
        "power-law degrees, no communities; bipartite: two node types, Zipf degrees on "
        "both sides, edges only across",
    )
    parser.add_argument(
        "--exponent",
        type=float,
        default=None,
        help="degree exponent (above 2; default 2.5): planted and powerlaw, and the left "
        "side of bipartite",
    )
    parser.add_argument(
        "--right-exponent",
        type=float,
        default=None,
        help="bipartite: the right side's degree exponent (default: --exponent)",
    )
    parser.add_argument(
        "--left-fraction",
        type=float,
        default=None,
        help="bipartite: the share of the nodes on the left side (default 0.5)",
    )
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
        choices=("graph", "ogb", "csv"),
        default="graph",
        help="graph: a graph directory (default); ogb: OGB raw files to ingest; csv: the "
        "edges alone as one src,dst CSV file named OUT_DIR, written in bounded memory",
    )
    add_memory_budget_option(
        parser,
        "the memory generation may take: the edges stream through sorted runs on disk "
        "beside OUT_DIR instead of being held in memory; same graph directory. --layout "
        "graph only. auto: half the available memory, generating in memory when the "
        "estimated peak fits in it; none: in memory",
    )
    parser.add_argument("--no-progress", action="store_true")


def run(args: argparse.Namespace) -> dict[str, Any]:
    # lazy: `gnncore synth --help` (and the CLI reference) load no stage code
    from gnncore.errors import GnnCoreError, InputError
    from gnncore.io.bounded.budget import MIN_MEMORY_BUDGET
    from gnncore.names import safe_name
    from gnncore.synth import SynthSpec, generate_graph, write_ogb_raw

    safe_name(args.name, what="--name")  # before any work: it becomes paths
    budget = args.memory_budget
    if isinstance(budget, int) and budget < MIN_MEMORY_BUDGET:
        raise GnnCoreError(f"--memory-budget must be at least {MIN_MEMORY_BUDGET} bytes")
    if isinstance(budget, int) and args.layout != "graph":
        raise GnnCoreError(
            "--memory-budget applies to --layout graph (the ogb and csv layouts stream "
            "their edges to CSV already)"
        )

    extra = {
        k: v
        for k, v in (
            ("intra_fraction", args.intra_fraction),
            ("feature_noise", args.feature_noise),
            ("power_law_exponent", args.exponent),
            ("right_exponent", args.right_exponent),
            ("left_fraction", args.left_fraction),
        )
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
            model=args.model,
            **extra,
        )
    except ValueError as exc:
        raise InputError(f"bad generator setting: {exc}") from exc
    if args.layout == "csv":
        from gnncore.synth.edge_csv import write_edge_csv

        return {
            "layout": "csv",
            **write_edge_csv(args.out_dir, spec, progress=not args.no_progress and on_terminal()),
        }
    if args.layout == "ogb":
        return {
            "layout": "ogb",
            **write_ogb_raw(args.out_dir, spec, progress=not args.no_progress and on_terminal()),
        }
    report = generate_graph(
        args.out_dir,
        spec,
        name=args.name,
        progress=not args.no_progress and on_terminal(),
        memory_budget=budget,
    )
    return with_memory_figures({"layout": "graph", **report.to_dict()}, report.memory_budget)
