"""GREM's ``clusters`` seed against METIS and against GREM's ``metis`` seed.

Every run is its own ``gnncore partition`` process (``--no-balance-splits``), so
``seconds`` and ``peak_rss_bytes`` are per run. Runs:

* the large graph (default: a 2M-node / 20.4M-edge planted partition, p = 8):
  METIS once, GREM ``clusters`` with 10% chunks, and with 1% chunks over
  ``--shuffles`` edge-stream shuffles (``reshuffle_edges`` copies, hard links);
* FB15k-237 (``--kg``, a graph directory from ``ingest(..., format="kg")``):
  GREM with seed ``metis`` and ``clusters`` at p = 2..32, chunks 10% and 1%.

Writes ``results.json`` and ``results.md`` under ``--out``.

    .venv/bin/python benchmarks/grem_cluster_seed.py --graph /tmp/synth20m --kg /tmp/fbk
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

KEYS = ("edge_cut_fraction", "max_part_ratio", "seconds", "peak_rss_bytes")


def partition(
    graph: Path,
    out: Path,
    tag: str,
    method: str,
    parts: int,
    chunk: float | None = None,
    seed_method: str | None = None,
) -> dict[str, Any]:
    report = out / f"{tag}.json"
    cmd = [
        str(Path(sys.executable).with_name("gnncore")),
        "partition",
        str(graph),
        str(out / tag),
        "--method",
        method,
        "--parts",
        str(parts),
        "--no-balance-splits",
        "--json",
        str(report),
    ]
    if method == "grem":
        cmd += ["--chunk", str(chunk), "--passes", "3", "--seed-method", str(seed_method)]
    print(f"[grem_cluster_seed] {tag}", flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    row = {k: json.loads(report.read_text())[k] for k in KEYS}
    subprocess.run(["rm", "-rf", str(out / tag)], check=True)
    return {
        "run": tag,
        "graph": str(graph),
        "method": method,
        "parts": parts,
        "chunk": chunk,
        "seed_method": seed_method,
        **row,
    }


def shuffled(graph: Path, k: int) -> Path:
    if k == 0:
        return graph
    copy = graph.with_name(f"{graph.name}_s{k}")
    if not (copy / "manifest.json").exists():
        from gnncore.store.reshuffle import reshuffle_edges

        reshuffle_edges(graph, copy, k)
    return copy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", type=Path, help="large graph directory (p = 8 runs)")
    parser.add_argument("--kg", type=Path, help="FB15k-237 graph directory")
    parser.add_argument("--shuffles", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("bench-out/grem_cluster_seed"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    lines = [
        "# GREM seed `clusters` (passes 3)",
        "",
        f"Machine: {platform.machine()}, Python {platform.python_version()}.",
        "",
    ]
    if args.graph:
        metis = partition(args.graph, args.out, "large-metis", "metis", 8)
        rows.append(metis)
        runs = [partition(args.graph, args.out, "large-10pct", "grem", 8, 0.1, "clusters")]
        runs += [
            partition(
                shuffled(args.graph, k), args.out, f"large-1pct-s{k}", "grem", 8, 0.01, "clusters"
            )
            for k in range(args.shuffles)
        ]
        rows += runs
        lines += [
            f"## {args.graph} (p = 8)",
            "",
            "| run | cut % | Δ vs METIS (points) | max part | seconds | time / METIS "
            "| peak RSS MiB | RSS / METIS |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in [metis] + runs:
            lines.append(
                f"| {r['run']} | {100 * r['edge_cut_fraction']:.2f} | "
                f"{100 * (r['edge_cut_fraction'] - metis['edge_cut_fraction']):+.2f} | "
                f"{r['max_part_ratio']:.4f} | {r['seconds']:.1f} | "
                f"{r['seconds'] / metis['seconds']:.3f} | {r['peak_rss_bytes'] / 2**20:,.0f} | "
                f"{r['peak_rss_bytes'] / metis['peak_rss_bytes']:.3f} |"
            )
        lines.append("")
    if args.kg:
        table: dict[tuple[str, float], dict[int, float]] = {}
        for chunk in (0.1, 0.01):
            for seed_method in ("metis", "clusters"):
                for parts in (2, 4, 8, 16, 32):
                    r = partition(
                        args.kg,
                        args.out,
                        f"kg-{seed_method}-{chunk}-p{parts}",
                        "grem",
                        parts,
                        chunk,
                        seed_method,
                    )
                    rows.append(r)
                    table.setdefault((seed_method, chunk), {})[parts] = r["edge_cut_fraction"]
        lines += [
            f"## {args.kg}",
            "",
            "| seed (chunk) | p=2 | p=4 | p=8 | p=16 | p=32 |",
            "|---|---|---|---|---|---|",
        ]
        for (seed_method, chunk), cuts in table.items():
            lines.append(
                f"| {seed_method} ({chunk:.0%}) | "
                + " | ".join(f"{cuts[p]:.3f}" for p in (2, 4, 8, 16, 32))
                + " |"
            )
        lines.append("")
    (args.out / "results.json").write_text(json.dumps(rows, indent=2))
    (args.out / "results.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
