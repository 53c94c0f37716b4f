"""Ingestion throughput: ``gnncore ingest`` on a large synthetic integer edge list.

Generates (once; numpy, chunked, seeded) a CSV edge list with ``--edges`` rows
(default 20,000,000) whose endpoints follow a power-law-ish distribution over
``--nodes`` (default ~2,000,000) ids, then runs ``gnncore ingest`` on it in a
subprocess and records wall seconds, edges per second and the child's peak RSS
(``getrusage(RUSAGE_CHILDREN).ru_maxrss``). Writes ``ingest_throughput.json``
and ``ingest_throughput.md`` into ``--out`` (default ``bench-out/ingest``).

    .venv/bin/python benchmarks/ingest_throughput.py [--edges N] [--nodes N] [--out DIR]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

CHUNK = 1 << 21


def generate(path: Path, num_edges: int, num_nodes: int, seed: int) -> None:
    """Write a ``src,dst`` CSV (with header) in chunks; atomic (temp file, rename)."""
    rng = np.random.default_rng(seed)
    # Skewed ids: P(rank < x) = (x / N) ** (1 / 3), a heavy head like a power law;
    # a random permutation scatters the hubs over the id range.
    perm = rng.permutation(num_nodes).astype(np.int64)
    tmp = path.with_name(f".{path.name}.partial")
    with open(tmp, "wb") as fh:
        fh.write(b"src,dst\n")
        for start in range(0, num_edges, CHUNK):
            n = min(CHUNK, num_edges - start)
            src = perm[np.minimum((num_nodes * rng.random(n) ** 3).astype(np.int64), num_nodes - 1)]
            dst = perm[np.minimum((num_nodes * rng.random(n) ** 2).astype(np.int64), num_nodes - 1)]
            pl.DataFrame({"src": src, "dst": dst}).write_csv(fh, include_header=False)
    os.replace(tmp, path)


def machine() -> dict:
    mem = None
    try:
        with open("/proc/meminfo") as fh:
            mem = int(fh.readline().split()[1]) // 1024  # MiB
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "affinity_cpus": len(os.sched_getaffinity(0)),
        "memory_mib": mem,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "polars": pl.__version__,
        "numpy": np.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", type=int, default=20_000_000)
    parser.add_argument("--nodes", type=int, default=2_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("bench-out/ingest"))
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where the generated CSV lives (default: OUT/data)",
    )
    parser.add_argument("--directed", action="store_true")
    parser.add_argument(
        "--keep-graph", action="store_true", help="keep the ingested graph directory (OUT/graph)"
    )
    args = parser.parse_args(argv)

    out = args.out
    data_dir = args.data_dir or out / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    csv = data_dir / f"edges-{args.edges}-{args.nodes}-s{args.seed}.csv"
    gen_seconds = None
    if not csv.exists():
        t0 = time.perf_counter()
        generate(csv, args.edges, args.nodes, args.seed)
        gen_seconds = round(time.perf_counter() - t0, 2)
        print(
            f"generated {csv} ({csv.stat().st_size / 2**20:.0f} MiB) in {gen_seconds} s",
            file=sys.stderr,
        )

    graph = out / "graph"
    summary_file = out / "ingest_summary.json"
    exe = Path(sys.executable).parent / "gnncore"
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "gnncore.cli.main"]
    command += [
        "ingest",
        str(csv),
        str(graph),
        "--format",
        "edgelist",
        "--id-type",
        "int",
        "--json",
        str(summary_file),
    ]
    if args.directed:
        command.append("--directed")
    t0 = time.perf_counter()
    result = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if result.returncode != 0:
        print(result.stderr, file=sys.stderr)
        return result.returncode
    peak_rss_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    report = json.loads(summary_file.read_text())
    graph_bytes = sum(p.stat().st_size for p in graph.iterdir())
    if not args.keep_graph:
        shutil.rmtree(graph)

    results = {
        "benchmark": "ingest_throughput",
        "edges": args.edges,
        "nodes_requested": args.nodes,
        "csv": str(csv),
        "csv_bytes": csv.stat().st_size,
        "generate_seconds": gen_seconds,
        "wall_seconds": round(wall, 2),
        "edges_per_second": round(args.edges / wall),
        "mb_per_second": round(csv.stat().st_size / 1e6 / wall, 1),
        "peak_rss_mib": round(peak_rss_mib),
        "graph_dir_bytes": graph_bytes,
        "report": report,
        "machine": machine(),
        "command": " ".join(command),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "ingest_throughput.json").write_text(json.dumps(results, indent=2) + "\n")
    m = results["machine"]
    md = [
        "# Ingestion throughput",
        "",
        f"`gnncore ingest` on a synthetic integer CSV edge list "
        f"({args.edges:,} edges, ids over ~{args.nodes:,} nodes, seed {args.seed}).",
        "",
        "| metric | value |",
        "|---|---|",
        f"| input | {results['csv_bytes'] / 2**20:,.0f} MiB CSV |",
        f"| nodes (distinct ids) | {report['num_nodes']:,} |",
        f"| canonical edges | {report['num_canonical_edges']:,} "
        f"({report['duplicates_removed']:,} duplicates, {report['self_loops_removed']:,} "
        "self-loops removed) |",
        f"| wall time (subprocess) | {results['wall_seconds']} s |",
        f"| ingest time (report) | {report['seconds']} s |",
        f"| throughput | {results['edges_per_second']:,} edges/s "
        f"({results['mb_per_second']} MB/s) |",
        f"| peak RSS (child) | {results['peak_rss_mib']:,} MiB |",
        f"| graph directory | {graph_bytes / 2**20:,.0f} MiB |",
        "",
        f"Machine: {m['affinity_cpus']} CPUs ({m['processor']}), "
        f"{(m['memory_mib'] or 0) / 1024:.0f} GiB RAM, {m['platform']}, "
        f"Python {m['python']}, Polars {m['polars']}, NumPy {m['numpy']}.",
        "",
    ]
    (out / "ingest_throughput.md").write_text("\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
