"""What a stage cost, as Dagster metadata: seconds per phase, peak RSS, bytes."""

from collections.abc import Mapping
from typing import Any

import dagster as dg


def phases_table(phases: Mapping[str, float]) -> str:
    """Markdown: one row per phase with its seconds and share of the total."""
    total = sum(phases.values()) or 1.0
    rows = [f"| {name} | {s:.2f} | {s / total:.0%} |" for name, s in phases.items()]
    return "\n".join(["| phase | seconds | share |", "|---|---:|---:|", *rows])


def cost_metadata(
    phases: Mapping[str, float],
    *,
    peak_rss_bytes: int | None,
    memory_budget: int | None = None,
    **byte_figures: int | None,
) -> dict[str, Any]:
    """The metadata every bounded stage reports: its phases (a table and each
    phase's seconds), its peak RSS, its memory budget (when it ran under one)
    and whichever byte figures are known (``input_bytes``, ``output_bytes``,
    ``storage_read_bytes``, ``storage_written_bytes``)."""
    out: dict[str, Any] = {}
    if phases:
        out["phases"] = dg.MetadataValue.md(phases_table(phases))
        out.update({f"phase_seconds/{k}": dg.MetadataValue.float(v) for k, v in phases.items()})
    if peak_rss_bytes is not None:
        out["peak_rss_bytes"] = dg.MetadataValue.int(int(peak_rss_bytes))
    if memory_budget is not None:
        out["memory_budget_bytes"] = dg.MetadataValue.int(int(memory_budget))
    out.update({k: dg.MetadataValue.int(int(v)) for k, v in byte_figures.items() if v is not None})
    return out
