"""Partitioners side by side: a partition directory as a row, the rows as a
Markdown table and a cut / seconds / peak RSS chart.

The ``partition_report`` asset compares the methods' partitions with these, and
``gnncore bench partition`` (``gnncore_bench.partition``) writes its table and
chart with them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gnncore.partition.store import PartitionDir
from gnncore.plots import panels_png


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """method | p | settings | cut | balance | seconds | the method's peak RSS |
    the command's (VmHWM at its end, plus any workers' peaks) | the process's
    (the kernel's ``ru_maxrss``) | the load average at its start."""
    lines = [
        "| method | p | settings | shuffle | edge cut % | max part / (N/p) | seconds | "
        "peak RSS MiB | command peak RSS MiB | process peak RSS MiB | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        settings = ", ".join(f"{k}={r[k]}" for k in SETTING_KEYS if k in r) or "-"
        load = r.get("load_average")
        lines.append(
            f"| {r['method']} | {r['parts']} | {settings} | {r.get('shuffle', '-')} | "
            f"{100 * r['edge_cut_fraction']:.2f} | {r['max_part_ratio']:.4f} | "
            f"{r['seconds']:.2f} | {r['peak_rss_bytes'] / 2**20:,.0f} | "
            f"{_mib(r.get('command_peak_rss_bytes'))} | "
            f"{_mib(r.get('process_peak_rss_bytes'))} | "
            f"{'-' if load is None else f'{load:.1f}'} |"
        )
    return "\n".join(lines) + "\n"


#: Method settings a row may carry, shown in its label.
SETTING_KEYS = ("chunk", "passes", "seed_method", "clusters", "workers", "threads", "hops")


def _mib(size: int | None) -> str:
    return "-" if size is None else f"{size / 2**20:,.0f}"


def setting_label(row: dict[str, Any]) -> str:
    return row["method"] + "".join(f" {k}={row[k]}" for k in SETTING_KEYS if k in row)


def report_row(partition: PartitionDir) -> dict[str, Any]:
    """A partition directory as a row of the comparison (what :func:`markdown_table` reads)."""
    info = partition.info
    keys = (
        "method",
        "parts",
        "seed",
        "chunk",
        "passes",
        "seed_method",
        "clusters",
        "workers",
        "threads",
        "hops",
        "seconds",
        "peak_rss_bytes",
    )
    return {
        **{k: info[k] for k in keys if k in info},
        "edge_cut_fraction": info["metrics"]["edge_cut_fraction"],
        "max_part_ratio": info["metrics"]["max_part_ratio"],
    }


def comparison_chart(rows: Sequence[dict[str, Any]]) -> bytes:
    """Cut, seconds and peak RSS against the part count, one line per method setting
    (the median over shuffles where a method ran on several)."""
    values: dict[str, dict[str, dict[int, list[float]]]] = {
        "edge cut %": {},
        "seconds": {},
        "peak RSS MiB": {},
    }
    for row in rows:
        label = setting_label(row)
        for panel, value in (
            ("edge cut %", 100 * row["edge_cut_fraction"]),
            ("seconds", row["seconds"]),
            ("peak RSS MiB", row["peak_rss_bytes"] / 2**20),
        ):
            values[panel].setdefault(label, {}).setdefault(row["parts"], []).append(value)
    panels = {
        panel: {
            label: (sorted(by_p), [float(np.median(by_p[p])) for p in sorted(by_p)])
            for label, by_p in series.items()
        }
        for panel, series in values.items()
    }
    return panels_png(panels, "parts", log_y=("seconds",))
