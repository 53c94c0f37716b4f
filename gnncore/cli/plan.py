"""``gnncore plan placement GRAPH_DIR OUT_DIR --devices N --cache-nodes B …`` and
``gnncore plan replication GRAPH_DIR PARTITION_DIR OUT_DIR --rate R …``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

HAS_SUBCOMMANDS = True


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(t) for t in text.split(",") if t)


def add_settings_arguments(parser: argparse.ArgumentParser, settings_cls: type) -> None:
    """One flag per option of ``settings_cls`` (:func:`gnncore.options.describe_options`);
    unset flags are absent from the namespace, so the class's defaults apply."""
    from gnncore.options import describe_options

    for spec in describe_options(settings_cls):
        kwargs: dict[str, Any] = {
            "dest": spec.name,
            "default": argparse.SUPPRESS,
            "help": spec.info.help
            + ("" if spec.default is None else f" (default: {spec.plain_default})"),
        }
        if spec.kind == "choice":
            kwargs["choices"] = spec.choices
        elif spec.kind == "ints":
            kwargs.update(type=_ints, metavar="F1,F2")
        else:
            kwargs["type"] = {"int": int, "float": float, "str": str}[spec.kind]
        parser.add_argument(spec.flag, **kwargs)


def settings_from(args: argparse.Namespace, settings_cls: type) -> Any:
    """``settings_cls`` built from the flags the user gave."""
    from gnncore.options import describe_options

    names = [spec.name for spec in describe_options(settings_cls)]
    return settings_cls(**{name: getattr(args, name) for name in names if hasattr(args, name)})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from gnncore.cli.arg_types import add_memory_budget_option, add_overwrite_option
    from gnncore.cli.main import json_option
    from gnncore.plan import PlacementSettings, ReplicationSettings

    sub = parser.add_subparsers(dest="what", metavar="WHAT", required=True)
    place = sub.add_parser(
        "placement",
        help="which nodes' features each device caches (Song & Jiang)",
        parents=[json_option()],
    )
    place.add_argument("graph_dir", type=Path, metavar="GRAPH_DIR")
    place.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    add_overwrite_option(place)
    add_settings_arguments(place, PlacementSettings)
    add_memory_budget_option(place, BUDGET_HELP)
    place.add_argument("--no-progress", action="store_true")

    rep = sub.add_parser(
        "replication",
        help="HDR: high-degree nodes whose neighbour lists every partition stores (HyDRA)",
        parents=[json_option()],
    )
    rep.add_argument("graph_dir", type=Path, metavar="GRAPH_DIR")
    rep.add_argument("partition_dir", type=Path, metavar="PARTITION_DIR")
    rep.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    add_overwrite_option(rep)
    add_settings_arguments(rep, ReplicationSettings)
    add_memory_budget_option(rep, BUDGET_HELP)
    rep.add_argument("--no-progress", action="store_true")


#: What ``--memory-budget`` means to both planners.
BUDGET_HELP = (
    "the memory the planner's whole process may take: refused, before any work, when its "
    "estimate is above it (auto: the lower of the cgroup limit and the available memory "
    "plus what the process holds; none: no check)"
)

#: Cached ids printed per device on stdout.
PRINTED_IDS = 20
#: Cached ids per device the summary (``--json``) lists; past it the list is cut and
#: ``devices_cut`` says so (the plan's ``cached_ids.npy`` holds them all: 20M ids of a
#: 50M-node graph made a 315 MB JSON file).
SUMMARY_IDS = 100_000


def brief(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary with each device's id list cut to :data:`PRINTED_IDS` on stdout."""
    if "devices" not in summary:
        return summary
    cut = [
        ids if len(ids) <= PRINTED_IDS else [*ids[:PRINTED_IDS], "..."]
        for ids in summary["devices"]
    ]
    return {**summary, "devices": cut}


def _say(message: str) -> None:
    print(f"[plan] {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from gnncore.cli.arg_types import with_memory_figures
    from gnncore.plan import (
        PlacementSettings,
        PlanError,
        ReplicationSettings,
        plan_placement,
        plan_replication,
    )
    from gnncore.usage import resolve_process_budget

    progress = None if args.no_progress else _say
    budget = resolve_process_budget(args.memory_budget)
    try:
        if args.what == "placement":
            settings = settings_from(args, PlacementSettings)
            report = plan_placement(
                args.graph_dir, args.out_dir, settings, progress=progress, memory_budget=budget
            )
            from gnncore.plan.placement import PlacementPlan

            caches = PlacementPlan.open(args.out_dir).caches()
            summary = {
                **report.to_dict(),
                "devices": [[int(v) for v in row[:SUMMARY_IDS]] for row in caches],
                "devices_cut": any(len(row) > SUMMARY_IDS for row in caches),
                "predicted_cost": report.metrics["predicted_cost"],
                "seconds": report.metrics["seconds"],
            }
            return with_memory_figures(summary, budget)
        report = plan_replication(
            args.graph_dir,
            args.partition_dir,
            args.out_dir,
            settings_from(args, ReplicationSettings),
            progress=progress,
            memory_budget=budget,
        )
        summary = {
            **report.to_dict(),
            "replicated_nodes": report.metrics["replicated_nodes"],
            "memory_increase": report.metrics["memory_increase"],
            "seconds": report.metrics["seconds"],
        }
        return with_memory_figures(summary, budget)
    except PlanError as exc:
        # Name the flag the user typed rather than the library's argument.
        flag = "--" + exc.argument.replace("_", "-")
        raise PlanError(flag, exc.problem.removeprefix(exc.argument).lstrip()) from exc
