"""Ingestion throughput: ``gnncore ingest`` on a large synthetic integer edge list.

Generates (once; numpy, chunked, seeded) a CSV edge list with ``--edges`` rows
(default 20,000,000) whose endpoints follow a power-law-ish distribution over
``--nodes`` (default ~2,000,000) ids, then runs, each in its own subprocess and
side by side in this one run: Polars' parse of the file (``pl.read_csv``, the
reference, at Polars' default thread count: all CPUs), ``gnncore ingest`` in
memory and ``gnncore ingest --memory-budget`` (default 1GiB; ``--budgets`` for
several), recording wall seconds, the ratio to Polars' parse, edges per second,
each child's own peak RSS and CPU seconds (``os.wait4``), the ingestion's phase
times, the load average around each child, and whether the graph directories
are identical (sha256 of every file, via the manifests). ``--string-ids`` writes
the ids as strings (``user_<id>``) and ingests them with ``--id-type string``
(bounded: :mod:`gnncore.io.bounded.string_ids`; Polars' parse reads them as strings).
``--repeat N`` runs the
whole round (Polars' parse, then every variant) N times and reports medians,
and the median of each round's ratio: on a shared machine the load moves
between rounds. Writes ``ingest_throughput.json`` and ``ingest_throughput.md``
into ``--out`` (default ``bench-out/ingest``).

    .venv/bin/python benchmarks/ingest_throughput.py [--edges N] [--nodes N] [--out DIR]
        [--budgets 1GiB,256MiB] [--no-in-memory] [--repeat N] [--string-ids]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

CHUNK = 1 << 21


STRING_PREFIX = "user_"


def generate(
    path: Path, num_edges: int, num_nodes: int, seed: int, string_ids: bool = False
) -> None:
    """Write a ``src,dst`` CSV (with header) in chunks; atomic (temp file, rename).
    ``string_ids``: each id ``i`` written as ``user_<i>``."""
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
            frame = pl.DataFrame({"src": src, "dst": dst})
            if string_ids:
                frame = frame.select(pl.format(STRING_PREFIX + "{}", pl.col(c)).alias(c)
                                     for c in ("src", "dst"))  # fmt: skip
            frame.write_csv(fh, include_header=False)
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


PARSE = """
import sys, time, polars as pl
t = time.perf_counter()
dtype = pl.String if sys.argv[2] == "string" else pl.Int64
df = pl.read_csv(sys.argv[1], schema={"src": dtype, "dst": dtype})
print(time.perf_counter() - t, df.height)
"""


def run_measured(command: list[str]) -> tuple[float, int, str, float, float]:
    """Run ``command``: ``(wall seconds, its own peak RSS in bytes, its stdout, its
    CPU seconds (user + system), the 1-minute load average when it began)``.

    Dirty pages are written back first (``os.sync``): a child should not pay for
    the writeback of the CSV just generated or of the previous child's output
    (the first round of a fresh run otherwise ingests while the 284 MiB CSV is
    still being written out)."""
    os.sync()
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()  # the outputs here are small: no pipe deadlock
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{err.decode(errors='replace')}")
    cpu = usage.ru_utime + usage.ru_stime
    return wall, usage.ru_maxrss * 1024, out.decode(), cpu, load


def compile_bytecode() -> None:
    """Write gnncore's bytecode, as an installed package has it (Polars' has):
    an editable install run with ``PYTHONDONTWRITEBYTECODE=1`` (this sandbox
    sets it) would otherwise compile every module in every child, 0.06 s of
    its start-up."""
    import compileall

    import gnncore

    compileall.compile_dir(Path(gnncore.__file__).parent, quiet=1)


def file_hashes(graph: Path) -> dict[str, str]:
    manifest = json.loads((graph / "manifest.json").read_text())
    return {name: entry["sha256"] for name, entry in manifest["files"].items()}


def main(argv: list[str] | None = None) -> int:
    from gnncore.sizes import format_size, parse_size

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
        "--string-ids", action="store_true", help="ids written as user_<id>, ingested as strings"
    )
    parser.add_argument(
        "--budgets",
        default="1GiB",
        help="comma-separated --memory-budget sizes to run (empty: none)",
    )
    parser.add_argument("--no-in-memory", action="store_true", help="skip the in-memory ingestion")
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds (Polars' parse, then each variant)"
    )
    parser.add_argument(
        "--keep-graph", action="store_true", help="keep the ingested graph directories"
    )
    args = parser.parse_args(argv)

    out = args.out
    data_dir = args.data_dir or out / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    kind = "-str" if args.string_ids else ""
    id_type = "string" if args.string_ids else "int"
    csv = data_dir / f"edges-{args.edges}-{args.nodes}-s{args.seed}{kind}.csv"
    gen_seconds = None
    if not csv.exists():
        t0 = time.perf_counter()
        generate(csv, args.edges, args.nodes, args.seed, args.string_ids)
        gen_seconds = round(time.perf_counter() - t0, 2)
        print(
            f"generated {csv} ({csv.stat().st_size / 2**20:.0f} MiB) in {gen_seconds} s",
            file=sys.stderr,
        )

    exe = Path(sys.executable).parent / "gnncore"
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "gnncore.cli.main"]
    compile_bytecode()
    variants: list[tuple[str, list[str]]] = []
    if not args.no_in_memory:
        variants.append(("in memory", ["--memory-budget", "none"]))
    for budget in [b.strip() for b in args.budgets.split(",") if b.strip()]:
        variants.append((f"--memory-budget {budget}", ["--memory-budget", budget]))
        parse_size(budget)  # fail early on a bad size
    parses: list[dict] = []
    rounds: dict[str, list[dict]] = {label: [] for label, _ in variants}
    commands: dict[str, str] = {}
    hashes: dict[str, dict[str, str]] = {}
    for round_ in range(args.repeat):
        # Polars' parse of the same file: the reference (a child process, like the ingestions)
        wall, rss, text, cpu, load = run_measured([sys.executable, "-c", PARSE, str(csv), id_type])
        parse = {"seconds": float(text.split()[0]), "process_seconds": wall, "cpu_seconds": cpu,
                 "peak_rss_mib": rss / 2**20, "load": load}  # fmt: skip
        parses.append(parse)
        print(f"round {round_ + 1}: Polars parse {parse['seconds']:.2f} s", file=sys.stderr)
        for label, extra in variants:
            slug = "mem" if extra[1] == "none" else "budget-" + extra[1]
            graph = out / f"graph-{slug}"
            summary_file = out / f"ingest_summary-{slug}.json"
            command = base + ["ingest", str(csv), str(graph), "--format", "edgelist",
                              "--id-type", id_type, "--no-progress",
                              "--json", str(summary_file)]  # fmt: skip
            command += extra + (["--directed"] if args.directed else [])
            commands[label] = " ".join(command)
            wall, rss, _, cpu, load = run_measured(command)
            report = json.loads(summary_file.read_text())
            hashes[label] = file_hashes(graph)
            rounds[label].append(
                {
                    "ingest_seconds": report["seconds"],
                    "process_seconds": wall,
                    "cpu_seconds": cpu,
                    "peak_rss_mib": rss / 2**20,
                    "load": load,
                    # this round's ingestion seconds over its Polars parse seconds (imports
                    # excluded on both sides), and process over process
                    "x_polars_parse": report["seconds"] / parse["seconds"],
                    "x_polars_parse_process": wall / parse["process_seconds"],
                    "phases": report.get("phases", {}),
                    "graph_dir_bytes": sum(p.stat().st_size for p in graph.iterdir()),
                    "report": report,
                }
            )
            print(f"  {label}: {report['seconds']:.2f} s, {rss / 2**20:.0f} MiB", file=sys.stderr)
            if not args.keep_graph:
                shutil.rmtree(graph)
    identical = len({json.dumps(h, sort_keys=True) for h in hashes.values()}) <= 1
    # per variant, the files whose sha256 differs from the first variant's (a
    # bounded run past its budget shuffles edges_shuffled.npy its own way)
    first = variants[0][0] if variants else None
    differing = {
        label: sorted(f for f in hashes[first] if hashes[label].get(f) != hashes[first][f])
        for label, _ in variants
    } if first is not None else {}  # fmt: skip

    def median(values: list[float], digits: int = 2) -> float:
        return round(float(np.median(values)), digits)

    parse_inner = median([p["seconds"] for p in parses])
    parse_wall = median([p["process_seconds"] for p in parses])
    parse_cpu = median([p["cpu_seconds"] for p in parses])
    parse_rss = max(p["peak_rss_mib"] for p in parses)
    runs = []
    for label, _ in variants:
        rs = rounds[label]
        seconds = median([r["ingest_seconds"] for r in rs])
        runs.append(
            {
                "variant": label,
                "command": commands[label],
                "ingest_seconds": seconds,
                "wall_seconds": median([r["process_seconds"] for r in rs]),
                "cpu_seconds": median([r["cpu_seconds"] for r in rs]),
                "x_polars_parse": median([r["x_polars_parse"] for r in rs]),
                "x_polars_parse_process": median([r["x_polars_parse_process"] for r in rs]),
                "x_polars_parse_cpu": median([r["cpu_seconds"] / parse_cpu for r in rs]),
                "edges_per_second": round(args.edges / seconds),
                "peak_rss_mib": round(max(r["peak_rss_mib"] for r in rs)),
                "phases": {
                    k: median([r["phases"].get(k, 0.0) for r in rs], 3) for k in rs[0]["phases"]
                },  # fmt: skip
                "graph_dir_bytes": rs[0]["graph_dir_bytes"],
                "file_sha256": hashes[label],
                "files_differing_from_first": differing[label],
                "rounds": [{k: v for k, v in r.items() if k != "report"} for r in rs],
                "report": rs[0]["report"],
            }
        )

    results = {
        "benchmark": "ingest_throughput",
        "edges": args.edges,
        "nodes_requested": args.nodes,
        "id_type": id_type,
        "csv": str(csv),
        "csv_bytes": csv.stat().st_size,
        "generate_seconds": gen_seconds,
        "repeat": args.repeat,
        "polars_parse_seconds": parse_inner,
        "polars_parse_process_seconds": parse_wall,
        "polars_parse_cpu_seconds": parse_cpu,
        "polars_parse_peak_rss_mib": round(parse_rss),
        "polars_parse_rounds": parses,
        "runs": runs,
        "identical_graph_dirs": identical,
        "machine": machine(),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "ingest_throughput.json").write_text(json.dumps(results, indent=2) + "\n")
    m = results["machine"]
    report0 = runs[0]["report"] if runs else {}
    md = [
        "# Ingestion throughput",
        "",
        f"`gnncore ingest` on a synthetic CSV edge list with {id_type} ids "
        + (f"(`{STRING_PREFIX}<id>`) " if args.string_ids else "")
        + f"({args.edges:,} edges, ids over ~{args.nodes:,} nodes, seed {args.seed}; "
        f"{results['csv_bytes'] / 2**20:,.0f} MiB"
        + (f", {report0.get('num_nodes', 0):,} nodes, "
           f"{report0.get('num_canonical_edges', 0):,} canonical edges" if report0 else "")
        + ").",
        "",
        f"Polars' parse (`pl.read_csv`, same file, same run, all CPUs): {parse_inner:.2f} s "
        f"({parse_wall:.2f} s as a process, {parse_cpu:.2f} CPU s), peak RSS "
        f"{parse_rss:,.0f} MiB. Medians of {args.repeat} round(s); 1-minute load average "
        f"at the start of the children: "
        + ", ".join(f"{p['load']:.1f}" for p in parses) + " (Polars' parses).",
        "",
        "| variant | ingest s | x Polars parse | process s (x) | CPU s (x) | edges/s | peak RSS "
        "| phases (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for r in runs:
        phases = ", ".join(f"{k} {v}" for k, v in r["phases"].items()) or "-"
        rss = format_size(r["peak_rss_mib"] * 2**20)
        md.append(
            f"| {r['variant']} | {r['ingest_seconds']} | {r['x_polars_parse']} | "
            f"{r['wall_seconds']} ({r['x_polars_parse_process']}) | "
            f"{r['cpu_seconds']} ({r['x_polars_parse_cpu']}) | "
            f"{r['edges_per_second']:,} | {rss} | {phases} |"
        )
    md += [
        "",
        f"Graph directories identical (sha256 of every file): {identical}."
        + (
            ""
            if identical or first is None
            else " Files differing from "
            + first
            + "'s: "
            + "; ".join(
                f"{label}: {', '.join(files) or 'none'}"
                for label, files in differing.items()
                if label != first
            )
            + "."
        ),
        "",
        f"Machine: {m['affinity_cpus']} CPUs ({m['processor']}), "
        f"{(m['memory_mib'] or 0) / 1024:.0f} GiB RAM, {m['platform']}, "
        f"Python {m['python']}, Polars {m['polars']}, NumPy {m['numpy']}. gnncore's "
        "bytecode is compiled before the rounds, as an installed package's is.",
        "",
    ]
    (out / "ingest_throughput.md").write_text("\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
