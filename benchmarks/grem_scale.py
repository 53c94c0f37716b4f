"""GREM against METIS on a generated graph of 20M+ undirected edges (p = 8).

Every run is its own process (``gnncore bench partition``), so peak RSS is per
method. Variants: GREM 10% chunks with default passes and with passes 0, and
GREM 10% chunks with passes 0 and two worker processes (``--workers 2``), and
GREM 1% chunks over several edge-stream shuffles, each with its default seed
(``clusters`` with passes, ``metis`` for passes 0). Writes JSON and Markdown
with the ratios to METIS under --out.

    .venv/bin/python benchmarks/grem_scale.py --out bench-out/grem_scale
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
from pathlib import Path

from gnncore.partition.run import MethodSettings
from gnncore_bench.partition import bench_partition


def ensure_graph(path: Path, nodes: int, degree: float) -> None:
    if (path / "manifest.json").exists():
        return
    subprocess.run(
        [
            sys.executable,
            "-m",
            "gnncore.cli.main",
            "synth",
            str(path),
            "--nodes",
            str(nodes),
            "--avg-degree",
            str(degree),
            "--classes",
            "16",
            "--features",
            "16",
            "--no-progress",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", type=Path, default=Path("bench-out/graphs/synth20m"))
    parser.add_argument("--nodes", type=int, default=2_000_000)
    parser.add_argument("--avg-degree", type=float, default=20.5)
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--shuffles", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("bench-out/grem_scale"))
    args = parser.parse_args()
    ensure_graph(args.graph, args.nodes, args.avg_degree)
    variants = {
        "grem 10% passes 3 (+ metis)": (["metis", "grem"], MethodSettings(chunk=0.1, passes=3), 1),
        "grem 10% passes 0": (["grem"], MethodSettings(chunk=0.1, passes=0), 1),
        "grem 10% passes 0 workers 2": (
            ["grem"],
            MethodSettings(chunk=0.1, passes=0, workers=2),
            1,
        ),
        "grem 1% passes 3": (["grem"], MethodSettings(chunk=0.01, passes=3), args.shuffles),
    }
    rows = []
    for name, (methods, settings, shuffles) in variants.items():
        out = args.out / name.split(" (")[0].replace(" ", "_").replace("%", "pct")
        result = bench_partition(
            args.graph, out, methods, [args.parts], settings=settings, shuffles=shuffles
        )
        rows += [{**r, "variant": name} for r in result["rows"]]
    metis = next(r for r in rows if r["method"] == "metis")
    lines = [
        f"# GREM vs METIS, {args.graph} (p = {args.parts})",
        "",
        f"Machine: {platform.machine()}, {platform.python_version()}, "
        f"{__import__('os').cpu_count()} cores.",
        "",
        "| run | shuffle | edge cut % | Δ cut vs METIS (points) | seconds | time / METIS | "
        "peak RSS MiB | RSS / METIS |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        label = "metis" if r["method"] == "metis" else r["variant"].split(" (")[0]
        lines.append(
            f"| {label} | {r.get('shuffle', '-')} | {100 * r['edge_cut_fraction']:.2f} | "
            f"{100 * (r['edge_cut_fraction'] - metis['edge_cut_fraction']):+.2f} | "
            f"{r['seconds']:.1f} | {r['seconds'] / metis['seconds']:.3f} | "
            f"{r['peak_rss_bytes'] / 2**20:,.0f} | "
            f"{r['peak_rss_bytes'] / metis['peak_rss_bytes']:.3f} |"
        )
    one = [r["edge_cut_fraction"] for r in rows if r["variant"] == "grem 1% passes 3"]
    lines += [
        "",
        f"GREM 1% passes 3 over {len(one)} shuffles: median cut "
        f"{100 * statistics.median(one):.2f}%, worst {100 * max(one):.2f}% "
        f"(METIS {100 * metis['edge_cut_fraction']:.2f}%).",
    ]
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "grem_scale.md").write_text(text)
    (args.out / "grem_scale.json").write_text(json.dumps(rows, indent=2, default=str) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
