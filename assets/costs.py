"""What a stage cost, as Dagster metadata: seconds per phase, peak RSS, bytes,
and the deployment's memory budget the stage ran under (the ``memory``
resource, :class:`resources.MemoryBudgetResource`)."""

from collections.abc import Mapping
from typing import Any

import dagster as dg

from gnncore.usage import MemoryBudgetError, StageBudget
from resources import MemoryBudgetResource


def phases_table(phases: Mapping[str, float]) -> str:
    """Markdown: one row per phase with its seconds and share of the total."""
    total = sum(phases.values()) or 1.0
    rows = [f"| {name} | {s:.2f} | {s / total:.0%} |" for name, s in phases.items()]
    return "\n".join(["| phase | seconds | share |", "|---|---:|---:|", *rows])


def stage_budget(memory: MemoryBudgetResource, override: str = "") -> int | None:
    """The budget in bytes a stage runs under: the asset's own ``override``
    (its ``memory_budget`` config) when set, else the ``memory`` resource's
    (``None``: ``none``, unbounded). A bad setting fails the step with a
    :class:`dagster.Failure` naming it."""
    try:
        return memory.budget_bytes(override)
    except ValueError as error:
        raise dg.Failure(str(error)) from None


def data_share(budget: int | None, minimum: int, what: str) -> StageBudget:
    """``budget`` (the whole process's) split at the stage's start: what the
    process holds already, a margin, and the rest for the stage's data
    (:class:`gnncore.usage.StageBudget`); a :class:`dagster.Failure` naming
    the budget and the minimum when the rest is under ``minimum`` bytes."""
    share = StageBudget.start(budget)
    try:
        share.require(minimum, what)
    except MemoryBudgetError as error:
        raise dg.Failure(str(error)) from None
    return share


def budget_metadata(setting: str, budget: int | None, peak_rss_bytes: int) -> dict[str, Any]:
    """A stage's peak RSS against its budget: ``memory_budget`` (the setting:
    ``auto``, ``none`` or a size), ``memory_budget_bytes`` (absent for
    ``none``), ``peak_rss_bytes`` and ``peak_rss_of_budget`` (the peak as a
    fraction of the budget; above 1 the process went past it)."""
    return {
        "memory_budget": setting,
        "peak_rss_bytes": dg.MetadataValue.int(int(peak_rss_bytes)),
        **_against_budget(budget, peak_rss_bytes),
    }


def _against_budget(budget: int | None, peak_rss_bytes: int | None) -> dict[str, Any]:
    """``memory_budget_bytes`` (when there is a budget) and ``peak_rss_of_budget``
    (when the peak is known too)."""
    if budget is None:
        return {}
    out: dict[str, Any] = {"memory_budget_bytes": dg.MetadataValue.int(int(budget))}
    if peak_rss_bytes is not None:
        out["peak_rss_of_budget"] = dg.MetadataValue.float(peak_rss_bytes / budget)
    return out


def cost_metadata(
    phases: Mapping[str, float],
    *,
    peak_rss_bytes: int | None,
    memory_budget: int | None = None,
    **byte_figures: int | None,
) -> dict[str, Any]:
    """The metadata every bounded stage reports: its phases (a table and each
    phase's seconds), its peak RSS, its memory budget (when it ran under one,
    with the peak as a fraction of it) and whichever byte figures are known
    (``input_bytes``, ``output_bytes``, ``storage_read_bytes``,
    ``storage_written_bytes``)."""
    out: dict[str, Any] = {}
    if phases:
        out["phases"] = dg.MetadataValue.md(phases_table(phases))
        out.update({f"phase_seconds/{k}": dg.MetadataValue.float(v) for k, v in phases.items()})
    if peak_rss_bytes is not None:
        out["peak_rss_bytes"] = dg.MetadataValue.int(int(peak_rss_bytes))
    out.update(_against_budget(memory_budget, peak_rss_bytes))
    out.update({k: dg.MetadataValue.int(int(v)) for k, v in byte_figures.items() if v is not None})
    return out
