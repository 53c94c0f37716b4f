"""``gnncore bench partition GRAPH_DIR --parts 2,4,8,16 --methods ... --out DIR``.

``gnncore bench sampling GRAPH_DIR --fanouts 15,10,5 [--fanouts 30,20,10]
--batch-size 1000 --out DIR [--batches N]``: DENSE vs per-layer sampling.

``gnncore bench plans placement GRAPH_DIR --out DIR [--devices 4 --cache-fraction
0.1 ...]``: the feature placement against random and METIS partition layouts;
``gnncore bench plans replication GRAPH_DIR --out DIR [--parts 4 --rates
0,0.001,0.01,0.05 ...]``: HDR's cross-partition neighbour ids by rate
(:mod:`gnncore.plan.bench`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gnncore.progress import on_terminal

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

    plans = sub.add_parser("plans", help="the plans' simulator tables (placement, replication)")
    add_plans_arguments(plans)


def _floats(text: str) -> list[float]:
    return [float(t) for t in text.split(",") if t]


def add_plans_arguments(parser: argparse.ArgumentParser) -> None:
    """``bench plans placement|replication``."""
    from gnncore.cli.main import json_option
    from gnncore.plan.estimators import ESTIMATORS
    from gnncore.sampler.factory import SAMPLER_MODES

    sub = parser.add_subparsers(dest="plans", metavar="PLAN", required=True)
    place = sub.add_parser(
        "placement",
        help="feature placement against random and METIS partition layouts (simulated reads)",
        parents=[json_option()],
    )
    rep = sub.add_parser(
        "replication",
        help="HDR: cross-partition neighbour ids by replication rate over METIS (simulated)",
        parents=[json_option()],
    )
    for plan in (place, rep):
        plan.add_argument("graph_dir", type=Path, metavar="GRAPH_DIR")
        plan.add_argument("--out", type=Path, required=True, metavar="DIR")
        plan.add_argument("--batch-size", type=int, default=1024)
        plan.add_argument("--epochs", type=int, default=1, help="simulated epochs")
        plan.add_argument("--seed", type=int, default=0)
        plan.add_argument("--sampler", choices=SAMPLER_MODES, default="dense")
    place.add_argument("--devices", type=int, default=4)
    place.add_argument(
        "--cache-fraction", type=float, default=0.1, help="cache per device, share of the nodes"
    )
    place.add_argument("--fanouts", type=_ints, default=[10, 5], metavar="F1,F2")
    place.add_argument("--alpha", type=float, default=0.0, help="peer-read cost C_gpu / C_cpu")
    place.add_argument("--estimator", choices=ESTIMATORS, default="spmv")
    place.add_argument("--repeats", type=int, default=3, help="placement timings (median)")
    place.add_argument("--no-metis", action="store_true", help="skip the METIS layout")
    place.add_argument(
        "--no-own-cache-rows",
        action="store_true",
        help="skip the partition layouts replayed without peer reads",
    )
    rep.add_argument("--parts", type=int, default=4)
    rep.add_argument("--rates", type=_floats, default=[0.0, 0.001, 0.01, 0.05], metavar="R1,R2")
    rep.add_argument("--fanouts", type=_ints, default=[25, 10], metavar="F1,F2")
    rep.add_argument("--train-nodes", choices=("auto", "split", "all"), default="auto")
    rep.add_argument(
        "--direction",
        choices=("in", "both"),
        default="in",
        help="adjacency sampled: the graph's rows (in) or in- and out-neighbours (both)",
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.what == "sampling":
        return _run_sampling(args)
    if args.what == "plans":
        return _run_plans(args)
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
            progress=not args.no_progress and on_terminal(),
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


def _run_plans(args: argparse.Namespace) -> dict[str, Any]:
    from gnncore.errors import InputError
    from gnncore.plan.bench import bench_placement, bench_replication

    try:
        if args.plans == "placement":
            result = bench_placement(
                args.graph_dir,
                devices=args.devices,
                cache_fraction=args.cache_fraction,
                fanouts=args.fanouts,
                batch_size=args.batch_size,
                epochs=args.epochs,
                seed=args.seed,
                sampler=args.sampler,
                alpha=args.alpha,
                estimator=args.estimator,
                metis=not args.no_metis,
                repeats=args.repeats,
                own_cache_rows=not args.no_own_cache_rows,
                out_dir=args.out,
            )
        else:
            result = bench_replication(
                args.graph_dir,
                parts=args.parts,
                rates=args.rates,
                fanouts=args.fanouts,
                batch_size=args.batch_size,
                epochs=args.epochs,
                seed=args.seed,
                sampler=args.sampler,
                train_nodes=args.train_nodes,
                direction=args.direction,
                out_dir=args.out,
            )
    except ValueError as exc:
        raise InputError(str(exc), args.graph_dir) from exc
    print(result.pop("markdown"))
    return result
