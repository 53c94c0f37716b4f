"""Side-by-side partitioning benchmark: every (method, p) in its own process.

A fresh process per run makes ``peak_rss_bytes`` the peak of that method
alone (the figure GREM's memory claim is about; its ``VmHWM`` after ``assign``)
and ``command_peak_rss_bytes`` the peak of the whole ``gnncore partition``
command (``VmHWM`` at its end: post-processing and writing included; worker
processes' peaks added). ``--threads`` reaches every method that runs threads
(KaMinPar); GREM's parallelism is ``--workers`` processes. Results are written
as JSON, a Markdown table and a cut / time / memory chart.

Outside partitioners (``externals``: :mod:`gnncore_bench.external`) run beside
the built-in methods on a METIS-format copy of the graph, written once per run
(its write time is reported on its own, as ``metis_graph``), and their rows go
into the same JSON, table and chart. A failed external (a non-zero exit, a
timeout, a malformed partition file) is listed under ``failed`` and in the
Markdown; the reports are written with the other rows, then
:func:`bench_partition` raises naming every failure.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from gnncore.errors import GnnCoreError
from gnncore.partition.comparison import comparison_chart, markdown_table, setting_label
from gnncore.partition.run import METHODS, MethodSettings
from gnncore_bench.external import METIS_GRAPH_NAME, run_external, write_metis_graph
from gnncore_bench.external_spec import DEFAULT_TIMEOUT, ExternalPartitioner, check_names


def run_in_subprocess(
    graph_dir: Path,
    out_dir: Path,
    method: str,
    parts: int,
    seed: int,
    imbalance: float,
    settings: MethodSettings,
) -> dict[str, Any]:
    """``gnncore partition`` in a child process; its JSON summary, plus
    ``process_peak_rss_bytes`` (the kernel's ``ru_maxrss`` of the command,
    through :func:`gnncore_bench.limits.run_limited`, so not inherited from this
    process), ``wall_seconds`` of the whole command and ``load_average`` (the
    1-minute load when it started: the machine may be shared)."""
    from gnncore_bench.limits import run_limited

    tmp = Path(tempfile.mkdtemp(prefix="gnncore-bench-"))
    json_path = str(tmp / "summary.json")
    cmd = [
        sys.executable,
        "-m",
        "gnncore.cli.main",
        "partition",
        str(graph_dir),
        str(out_dir),
        "--method",
        method,
        "--parts",
        str(parts),
        "--seed",
        str(seed),
        "--imbalance",
        str(imbalance),
        "--chunk",
        str(settings.chunk),
        "--passes",
        str(settings.passes),
        "--hops",
        str(settings.hops),
        "--workers",
        str(settings.workers),
        "--threads",
        str(settings.threads),
        "--no-progress",
        "--json",
        json_path,
    ]
    if settings.seed_method is not None:
        cmd += ["--seed-method", settings.seed_method]
    if settings.clusters is not None:
        cmd += ["--clusters", str(settings.clusters)]
    try:
        load = os.getloadavg()[0]
        done = run_limited(cmd, None, capture_dir=tmp, capture_name="partition")
        if done.exit_code != 0:
            stderr = (tmp / "partition.stderr").read_text(errors="replace")
            raise GnnCoreError(f"{method} p={parts} failed: {stderr.strip()[-2000:]}")
        return {
            **json.loads(Path(json_path).read_text()),
            "process_peak_rss_bytes": done.peak_rss_bytes,
            "wall_seconds": done.wall_seconds,
            "load_average": load,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def pivot_tables(rows: Sequence[dict[str, Any]]) -> str:
    """Edge cut %, seconds and peak RSS MiB as method-by-p tables (one row per
    method setting, one column per part count; the median over shuffles)."""
    values: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for row in rows:
        values.setdefault(setting_label(row), {}).setdefault(row["parts"], []).append(row)
    parts = sorted({row["parts"] for row in rows})
    out = []
    for title, value, digits in (
        ("Edge cut %", lambda r: 100 * r["edge_cut_fraction"], 2),
        ("Seconds", lambda r: r["seconds"], 3),
        ("Peak RSS MiB", lambda r: r["peak_rss_bytes"] / 2**20, 0),
        (
            "Command peak RSS MiB",
            lambda r: (r.get("command_peak_rss_bytes") or float("nan")) / 2**20,
            0,
        ),
    ):
        out += [
            f"{title} (median over shuffles):",
            "",
            "| method | " + " | ".join(f"p={p}" for p in parts) + " |",
            "|---" * (len(parts) + 1) + "|",
        ]
        for label, by_p in values.items():
            cells = [
                f"{np.median([value(r) for r in by_p[p]]):,.{digits}f}" if p in by_p else "-"
                for p in parts
            ]
            out.append(f"| {label} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


STREAM_ORDER_METHODS = ("grem", "greedy")


def shuffled_copies(graph_dir: Path, out_dir: Path, shuffles: int) -> list[tuple[int, Path]]:
    """``(shuffle seed, graph dir)`` for ``shuffles`` orders of the partition stream:
    the graph's own, then reshuffled copies (hard links but for the stream)."""
    from gnncore.store import GraphDir
    from gnncore.store.reshuffle import reshuffle_edges

    own = int(GraphDir.open(graph_dir).manifest.stats.get("shuffle_seed", 0))
    copies = [(own, graph_dir)]
    for k in range(1, shuffles):
        target = out_dir / "shuffles" / f"seed-{own + k}"
        if not target.exists():
            reshuffle_edges(graph_dir, target, own + k)
        copies.append((own + k, target))
    return copies


def bench_partition(
    graph_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    methods: Sequence[str],
    parts: Sequence[int],
    seed: int = 0,
    imbalance: float = 0.03,
    settings: MethodSettings | None = None,
    progress: bool = True,
    shuffles: int = 1,
    externals: Sequence[ExternalPartitioner] = (),
    external_timeout: float | None = DEFAULT_TIMEOUT,
) -> dict[str, Any]:
    """Run every method at every part count; write ``bench.json``/``.md``/``.png``.

    With ``shuffles > 1``, methods that depend on the edge-stream order
    (:data:`STREAM_ORDER_METHODS`) run on that many orders of the stream; rows
    carry ``shuffle`` (the stream's seed).

    ``externals`` (:func:`gnncore_bench.external_spec.parse_external`) run after the
    built-in methods at every part count, on the graph's own order, each
    within ``external_timeout`` seconds (``None``: no limit).

    Raises:
        ValueError: An unknown method or a repeated external name (before any work).
        GnnCoreError: An external failed (after the reports are written).
    """
    settings = settings or MethodSettings()
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; choose from {', '.join(METHODS)}")
    check_names(externals, METHODS)
    graph_dir, out_dir = Path(graph_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    streams = shuffled_copies(graph_dir, out_dir, max(shuffles, 1))
    rows = []
    for method in methods:
        orders = streams if method in STREAM_ORDER_METHODS else streams[:1]
        for p in parts:
            for shuffle, graph in orders:
                if progress:
                    print(
                        f"[bench partition] {method} p={p} shuffle={shuffle} ...",
                        file=sys.stderr,
                        flush=True,
                    )
                row = run_in_subprocess(
                    graph,
                    out_dir / "partitions" / f"{method}-p{p}-s{shuffle}",
                    method,
                    p,
                    seed,
                    imbalance,
                    settings,
                )
                rows.append({**row, "shuffle": shuffle})
    metis_graph: dict[str, Any] | None = None
    failed: list[dict[str, Any]] = []
    if externals:
        metis_graph, failed = _run_externals(
            externals,
            graph_dir,
            out_dir,
            parts,
            seed,
            imbalance,
            settings.threads,
            external_timeout,
            progress,
            rows,
            streams[0][0],
        )
    result = {
        "graph_dir": str(graph_dir),
        "methods": list(methods),
        "externals": {e.name: e.template for e in externals},
        "metis_graph": metis_graph,
        "failed": failed,
        "parts": list(parts),
        "seed": seed,
        "imbalance": imbalance,
        "settings": asdict(settings),
        "shuffles": [s for s, _ in streams],
        "rows": rows,
    }
    (out_dir / "bench.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    table = markdown_table(rows) + _external_notes(metis_graph, failed)
    (out_dir / "bench.md").write_text(
        f"# Partitioning benchmark: {graph_dir}\n\n{table}\n{pivot_tables(rows) if rows else ''}"
    )
    if rows:
        (out_dir / "bench.png").write_bytes(comparison_chart(rows))
    if failed:
        raise GnnCoreError(
            f"{len(failed)} external run(s) failed (the other rows are in "
            f"{out_dir / 'bench.json'}):\n" + "\n".join(f["error"] for f in failed)
        )
    result["markdown"] = table
    return result


def _run_externals(
    externals: Sequence[ExternalPartitioner],
    graph_dir: Path,
    out_dir: Path,
    parts: Sequence[int],
    seed: int,
    imbalance: float,
    threads: int,
    timeout: float | None,
    progress: bool,
    rows: list[dict[str, Any]],
    shuffle: int,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Write the METIS file, run every external at every part count, append
    their rows to ``rows``; return the METIS file's summary and the failures."""

    def say(message: str) -> None:
        if progress:
            print(f"[bench partition] {message}", file=sys.stderr, flush=True)

    metis_graph = write_metis_graph(graph_dir, out_dir / METIS_GRAPH_NAME)
    say(
        f"wrote {metis_graph['path']} ({metis_graph['bytes'] / 2**20:,.1f} MiB) "
        f"in {metis_graph['seconds']:.2f} s"
    )
    failed: list[dict[str, Any]] = []
    for external in externals:
        for p in parts:
            say(f"{external.name} p={p} ...")
            run_dir = out_dir / "partitions" / f"{external.name}-p{p}"
            try:
                row = run_external(
                    external,
                    graph_dir,
                    metis_graph["path"],
                    run_dir,
                    p,
                    seed=seed,
                    imbalance=imbalance,
                    threads=threads,
                    timeout=timeout,
                )
            except GnnCoreError as exc:
                failed.append({"method": external.name, "parts": p, "error": str(exc)})
                continue
            rows.append({**row, "shuffle": shuffle})
    return metis_graph, failed


def _external_notes(metis_graph: dict[str, Any] | None, failed: Sequence[dict[str, Any]]) -> str:
    """Below the table: the METIS file's write, and each failed external run."""
    notes = []
    if metis_graph is not None:
        notes.append(
            f"\nMETIS graph for the external partitioners: {metis_graph['path']} "
            f"({metis_graph['nodes']:,} nodes, {metis_graph['edges']:,} edges, "
            f"{metis_graph['bytes'] / 2**20:,.1f} MiB), written in "
            f"{metis_graph['seconds']:.2f} s (not in any row's seconds).\n"
        )
    if failed:
        notes.append("\nFailed:\n")
        notes += [f"- {f['method']} p={f['parts']}: {f['error'].splitlines()[0]}\n" for f in failed]
    return "".join(notes)
