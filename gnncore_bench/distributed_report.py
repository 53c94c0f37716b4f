"""The distributed benchmark's table (``distributed.md``): a line of context, then
one table per sampling setting, from what
:func:`gnncore_bench.distributed.bench_distributed` measured."""

from __future__ import annotations

from typing import Any


def _where(result: dict[str, Any]) -> str:
    """``gloo`` on the CPU, or the backend and the GPU (older results: gloo, CPU)."""
    backend = result.get("backend", "gloo")
    gpu = result.get("gpu")
    if not gpu:
        return backend
    shared = ", the ranks sharing it" if backend == "gloo" else ", one per rank"
    return f"{backend} on {gpu}{shared}"


def _f(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _int(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _share(config: dict[str, Any]) -> str:
    """Compute's share of the epoch (the model's forward, backward and step)."""
    compute, epoch = config.get("compute_s"), config.get("epoch_s")
    return "—" if compute is None or not epoch else f"{100 * compute / epoch:.0f}%"


def to_markdown(result: dict[str, Any]) -> str:
    """The result as Markdown: a line of context, then one table per setting."""
    lines = [
        f"Graph `{result['graph_dir']}`: {result['num_nodes']:,} nodes, "
        f"{result['num_edges']:,} undirected edges, {result['num_features']} features "
        f"({result['graph_bytes'] / 2**20:.0f} MiB on disk); model {result['model']}, "
        f"seed {result['seed']}, {result['epochs']} epoch(s) per configuration; "
        f"GREM chunk {result['grem_chunk']:.0%}; {result['cpus']} CPUs; "
        f"{result.get('prefetch_workers', 1)} prefetch thread(s) per rank; "
        f"{_where(result)}.",
    ]
    for s in result["settings"]:
        configs = [c for c in result["configs"] if c["setting"] == s["name"]]
        what = (
            "full training (epoch = the training pass, evaluation not included)"
            if s["mode"] == "train"
            else "sampling and feature gathering only, no model (epoch = the slowest rank's pass)"
        )
        lines += [
            "",
            f"**{s['name']}**: fanouts {','.join(map(str, s['fanouts']))}, global batch "
            f"{s['batch_size']:,}; {what}. Remote rows and bytes: summed over the ranks, "
            "mean per epoch; epoch s: median; stall s: rank 0's loop waiting for its next "
            "batch.",
            "",
            "| partitioner | ranks | edge cut | epoch s | stall s | compute share "
            "| sample / exchange / compute s "
            "| remote rows / epoch | remote MB / epoch | remote share | vs random "
            "| peak RSS per rank, MB | rank data, MB | test acc |",
            "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---|---:|",
        ]
        for c in configs:
            if c.get("status") != "ok":
                lines.append(
                    f"| {c['partitioner']} | {c['nproc']} | | {c['status']} | | | | | | | | | | |"
                )
                continue
            rss = ", ".join(f"{v:.0f}" for v in c["peak_rss_mb"])
            data = ", ".join(f"{r['rank_data_bytes'] / 1e6:.0f}" for r in c["per_rank"])
            split = f"{_f(c['sample_s'])} / {_f(c['exchange_s'])} / {_f(c['compute_s'])}"
            lines.append(
                f"| {c['partitioner']} | {c['nproc']} | {_f(c['edge_cut_fraction'], 3)} "
                f"| {_f(c['epoch_s'])} | {_f(c.get('stall_s'))} | {_share(c)} | {split} "
                f"| {_int(c['remote_rows_per_epoch'])} "
                f"| {_f(c['remote_bytes_per_epoch'] / 1e6, 1)} | {_f(c['remote_share'], 3)} "
                f"| {_f(c.get('remote_rows_vs_random'))} | {rss} | {data} "
                f"| {_f(c['test_accuracy'], 4)} |"
            )
    return "\n".join(lines)
