"""The scale benchmark's table (``scale.md``): the run's settings and machine,
then one row per stage, from what :func:`gnncore_bench.scale.bench_scale`
measured."""

from __future__ import annotations

from typing import Any

from gnncore.sizes import format_size


def size_text(value: float | None) -> str:
    """A byte count as ``format_size`` writes it, ``—`` when unknown."""
    return "—" if value is None else format_size(value)


def _cell(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def to_markdown(result: dict[str, Any]) -> str:
    """The run as a Markdown table with its settings above it."""
    machine = result["machine"]
    limit = (
        f"each stage in a cgroup v1 memory cgroup limited to "
        f"{format_size(result['budget_bytes'])} (page cache charged)"
        if result["limited"]
        else f"limit NOT enforced ({result['limit_reason']})"
    )
    ingest: dict[str, Any] = next((s for s in result["stages"] if s["stage"] == "ingest"), {})
    canonical = ingest.get("summary", {}).get("num_canonical_edges")
    lines = [
        f"{result['num_edges']:,} generated undirected edges ({result['edges_choice']})"
        + (f", {canonical:,} canonical after ingestion" if canonical is not None else "")
        + f", {result['num_nodes']:,} nodes; {limit}; stage --memory-budget: ingest "
        f"{format_size(result['stage_budgets']['ingest'])}, partition post-processing "
        f"{format_size(result['stage_budgets']['partition'])}; p = {result['parts']}, "
        f"{result['threads']} threads. Machine: {machine['cpus']} CPUs, "
        f"{size_text(machine['memory_bytes'])} memory, {format_size(machine['disk_free_bytes'])}"
        f" free of {format_size(machine['disk_total_bytes'])} disk; load average "
        f"{result['load_average_before'][0]:.1f} before, {result['load_average_after'][0]:.1f} "
        f"after; {result['seconds']:.0f} s in all"
        + ("." if result.get("finished", True) else " so far (the run has not finished)."),
        "",
        "| stage | status | seconds | peak RSS | cgroup peak | read | written | output "
        "| peak disk | cut | max part / avg |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for stage in result["stages"]:
        summary = stage.get("summary", {})
        cut = summary.get("edge_cut_fraction")
        lines.append(
            f"| {stage['stage']} | {stage['status']} | {_cell(stage.get('seconds'))} "
            f"| {size_text(stage.get('peak_rss_bytes'))} "
            f"| {size_text(stage.get('cgroup_peak_bytes'))} "
            f"| {size_text(stage.get('read_bytes'))} | {size_text(stage.get('written_bytes'))} "
            f"| {size_text(stage.get('output_bytes'))} "
            f"| {size_text(stage.get('peak_disk_bytes'))} "
            f"| {_cell(None if cut is None else 100 * cut, 2)}{'' if cut is None else '%'} "
            f"| {_cell(summary.get('max_part_ratio'), 3)} |"
        )
    lines += [
        "",
        "peak RSS: the stage process's `ru_maxrss`; cgroup peak: the cgroup's "
        "`max_usage_in_bytes` (processes plus the page cache they brought in); read / "
        "written: storage bytes from the stage's rusage; output: the stage's output on "
        "disk; peak disk: the run folder sampled every 0.5 s during the stage (inputs, "
        "outputs and scratch).",
    ]
    return "\n".join(lines)
