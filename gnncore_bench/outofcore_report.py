"""The out-of-core benchmark's table (``out_of_core.md``): one row per training
mode, from what :func:`gnncore_bench.outofcore.bench_out_of_core` measured."""

from __future__ import annotations

from typing import Any

from gnncore.sizes import format_size


def _f(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _size(value: float | None) -> str:
    return "—" if value is None else format_size(value)


def to_markdown(result: dict[str, Any]) -> str:
    """The result as a Markdown table with a few lines of context."""
    disk = result["sequential_read"]
    limit = (
        f"cgroup v1 limit {format_size(result['budget_bytes'])} (page cache counted)"
        if result["limited"]
        else f"NOT limited ({result['limit_reason']})"
    )
    lines = [
        f"Graph `{result['graph_dir']}`: {result['num_nodes']:,} nodes, "
        f"{result['num_edges']:,} stored edges, {format_size(result['graph_bytes'])} on disk; "
        f"{limit}; {result['epochs']} epoch(s); OMP_NUM_THREADS={result['threads']}; "
        f"cold sequential read {format_size(disk['bytes_per_s'])}/s; "
        f"device read-ahead {result.get('read_ahead_kb')} KiB.",
    ]
    store = result.get("store")
    if store:
        lines.append(
            f"Store: {store['method']}, {store['parts']} parts, static fraction "
            f"{store['static_fraction']}, written outside the limit"
            + (
                " (reused)"
                if store.get("reused")
                else f" in {_f(store.get('partition_seconds'), 0)} s (partition) + "
                f"{_f(store.get('store_seconds'), 0)} s (store)"
            )
            + f"; HierBatching --memory-budget {_size(result['hierbatching_budget_bytes'])}."
        )
    lines += [
        "",
        "| mode | status | epoch s | speedup vs mmap | load s (wait) | sample s | compute s "
        "| bytes read | read MiB/s (% of seq) | store reads MiB/s (% of seq) "
        "| peak RSS | cgroup peak | test acc |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def rate_cell(rate: float | None, frac: float | None) -> str:
        if rate is None:
            return "—"
        return f"{_f(rate / 2**20, 1)} ({_f(None if frac is None else 100 * frac, 1)}%)"

    for mode, res in result["modes"].items():
        process_rate = rate_cell(
            res.get("read_bytes_per_s"), res.get("read_fraction_of_sequential")
        )
        store_rate = rate_cell(
            res.get("store_read_bytes_per_s"), res.get("store_read_fraction_of_sequential")
        )
        load = (
            f"{_f(res.get('load_s'))} ({_f(res.get('load_wait_s'))})"
            if res.get("load_s") is not None
            else "—"
        )
        label = mode
        if res.get("budget_bytes") not in (None, result["budget_bytes"]):
            label += f" (limit {format_size(res['budget_bytes'])})"
        lines.append(
            f"| {label} | {res['status']} | {_f(res.get('epoch_seconds'))} "
            f"| {_f(res.get('speedup_vs_mmap'))} | {load} | {_f(res.get('sample_s'))} "
            f"| {_f(res.get('compute_s'))} | {_size(res.get('bytes_read'))} "
            f"| {process_rate} | {store_rate} "
            f"| {_size(res.get('peak_rss_bytes'))} | {_size(res.get('peak_memory_bytes'))} "
            f"| {_f(res.get('test_accuracy'), 4)} |"
        )
    sources = {r.get("epoch_source") for r in result["modes"].values() if r.get("epoch_source")}
    lines += [
        "",
        "epoch s: the training pass (`train_s`), "
        + ("; ".join(sorted(sources)) if sources else "no mode finished")
        + ". "
        "load s: HierBatching's mega-batch reads (background thread), in brackets the time "
        "training blocked on them; mmap reads rows inside sampling (page faults). "
        "bytes read and read MiB/s: the whole process (start, training, evaluation) "
        "over its wall time. store reads: HierBatching's reads of the store in an epoch "
        "(bytes over the seconds spent inside them).",
    ]
    return "\n".join(lines)
