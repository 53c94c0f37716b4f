"""What a stage cost, as Dagster metadata: seconds per phase, peak RSS, bytes,
and the deployment's memory budget the stage ran under (the ``memory``
resource, :class:`resources.MemoryBudgetResource`)."""

from collections.abc import Mapping
from typing import Any

import dagster as dg

from gnncore.usage import MemoryBudgetError, StageBudget, budget_figures, peak_held_bytes
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
    return {"memory_budget": setting, **_against_budget(int(peak_rss_bytes), budget)}


def _against_budget(peak_rss_bytes: int | None, budget: int | None) -> dict[str, Any]:
    """:func:`gnncore.usage.budget_figures` as Dagster metadata: ``peak_rss_bytes``
    (when known), ``peak_held_bytes`` (the step process's held peak, sampled
    since the ``memory`` resource started) and ``memory_budget_bytes`` (when
    there is a budget) as ints, each peak's ``..._of_budget`` as a float."""
    return {
        name: dg.MetadataValue.float(float(value))
        if name.endswith("_of_budget")
        else dg.MetadataValue.int(int(value))
        for name, value in budget_figures(peak_rss_bytes, budget, peak_held_bytes()).items()
    }


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
    out.update(_against_budget(peak_rss_bytes, memory_budget))
    out.update({k: dg.MetadataValue.int(int(v)) for k, v in byte_figures.items() if v is not None})
    return out
