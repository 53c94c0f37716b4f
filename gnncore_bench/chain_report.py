"""``gnncore bench chain``'s table (``chain.md``): the settings and machine, one
row per stage from what :func:`gnncore_bench.chain.bench_chain` measured."""

from __future__ import annotations

from typing import Any

from gnncore.sizes import format_size
from gnncore_bench.scale_report import size_text


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _communities(report: dict[str, Any]) -> str:
    """The planted communities, when the run set them (older reports did not)."""
    per_class, intra = report.get("communities_per_class"), report.get("intra_fraction")
    if per_class is None:
        return ""
    return f", {per_class} communities per class, {intra:.0%} of edges inside one"


def to_markdown(report: dict[str, Any]) -> str:
    """The run as a Markdown table with its settings above and its outcome below."""
    machine, limit = report["machine"], report.get("limit_bytes")
    enforced = report.get("limited", False)
    limit_text = (
        f"the Dagster run (every asset) in one cgroup v1 memory limit of {format_size(limit)} "
        "(page cache charged; the input files made without it)"
        if limit is not None and enforced
        else (
            "no memory limit"
            if limit is None
            else f"limit NOT enforced ({report.get('limit_reason')})"
        )
    )
    edges = report.get("input", {}).get("num_edges")
    load = report["load_average_before"][0]
    after = report.get("load_average_after", [load])[0]
    lines = [
        f"{report['nodes']:,} nodes, average degree {report['avg_degree']:g}"
        + (f" ({edges:,} generated undirected edges)" if edges else "")
        + _communities(report)
        + f", {report['features']} float32 features ({format_size(report['feature_bytes'])}); "
        f"{limit_text}. Machine: {machine['cpus']} CPUs, {size_text(machine['memory_bytes'])} "
        f"memory; load average {load:.1f} before, {after:.1f} after; disk estimated "
        f"{format_size(report['disk_needed_estimate_bytes'])}; "
        + (
            f"{report['seconds']:.0f} s in all."
            if "seconds" in report
            else "still running (the rows so far)."
        ),
        "",
        "| stage | status | seconds | peak RSS | held peak | asset's peak RSS | asset's budget "
        "| read | written | disk peak |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for stage in report["stages"]:
        meta = stage.get("metadata", {})
        lines.append(
            f"| {stage['stage']} | {stage['status']} | {_seconds(stage.get('seconds'))} "
            f"| {size_text(stage.get('peak_rss_bytes'))} "
            f"| {size_text(stage.get('peak_held_bytes'))} "
            f"| {size_text(meta.get('peak_rss_bytes'))} "
            f"| {size_text(meta.get('memory_budget_bytes'))} "
            f"| {size_text(stage.get('read_bytes'))} | {size_text(stage.get('written_bytes'))} "
            f"| {size_text(stage.get('peak_disk_bytes'))} |"
        )
    process = report.get("dagster_process")
    checks = ", ".join(f"{k} {v}" for k, v in report.get("checks", {}).items())
    if process:
        lines += [
            "",
            f"The Dagster process: {process['seconds']:.0f} s, cgroup peak "
            f"{size_text(process['cgroup_peak_bytes'])}, exit {process['exit_code']}"
            + (", killed for memory" if process["killed_for_memory"] else "")
            + f"; checks: {checks or 'none ran'}.",
        ]
    pred = report.get("predictions") or {}
    if pred.get("rows") is not None:
        test, trained = pred.get("test_accuracy"), pred.get("training_test_accuracy")
        lines.append(
            f"Predictions: {pred['rows']:,} rows for {pred.get('num_nodes') or 0:,} nodes"
            + (
                f"; test accuracy {test:.4f} (training run {trained:.4f})"
                if test and trained
                else ""
            )
            + "."
        )
    lines += [
        "",
        "peak RSS: the peak resident set of the step's own process (each step runs in a process "
        "of its own, one at a time; sampled every 0.25 s, or the asset's own peak where that is "
        "higher; csv: its own process); held peak: the most of it the kernel cannot take "
        "back (anonymous, shared and code pages, sampled every 0.25 s; RSS also counts the "
        "pages of mapped data files, which the cgroup reclaims like page cache); asset's: the "
        "`peak_rss_bytes` and `memory_budget_bytes` the asset put in its Dagster metadata; "
        "read / written: the step process's storage bytes (`/proc/<pid>/io`); disk peak: the "
        "run folder, sampled every 0.25 s.",
    ]
    return "\n".join(lines)
