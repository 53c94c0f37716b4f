"""Where GREM's memory goes: peak RSS per phase and per chunk edge.

For each chunk fraction, two child processes run on the same graph:

* ``gnncore partition GRAPH OUT --method grem --chunk C --parts P``: the whole
  command's peak RSS (``command_peak_rss_bytes`` of its JSON: VmHWM at the end,
  post-processing included);
* this script's ``--profile`` mode: ``GremPartitioner.assign`` in process while a
  thread samples ``VmRSS`` every 2 ms; each sample is attributed to the phase
  running then: ``plan`` (the clusters plan), ``seed`` (the first chunk read and
  labelled, per bisection), ``refine`` (the final k-way refinement), and inside
  each C++ bisection call, from its own phase timers, ``grem`` (the streaming
  pass), ``passes`` (refinement) and ``split`` (the per-side edge files). The
  process fixes glibc's mmap threshold first, as the verb does
  (:func:`gnncore.heap.fix_mmap_threshold`).

The slope of the peaks against the chunk's edges (least squares over the
fractions) is the memory per chunk edge; what is left at zero chunk edges is
the O(|V|) base plus the interpreter. Writes ``grem_memory.json`` and
``grem_memory.md`` under ``--out``.

    .venv/bin/python benchmarks/grem_memory.py /work/bench-data/pp16/synth20m \\
        --chunks 0.01,0.1,0.25 --parts 16 --out bench-out/grem-memory
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MIB = 1 << 20


def _vm_rss() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _vm_hwm() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _reset_hwm() -> None:
    """Set VmHWM back to the current RSS (Linux ``clear_refs`` 5)."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def profile(graph_dir: Path, chunk: float, parts: int) -> dict[str, Any]:
    """Run GREM in this process and return the peak RSS of each phase.

    ``plan``, ``seed``, ``bisect`` (the C++ call), ``refine`` and ``python`` (the rest):
    exact, the process's VmHWM reset at each phase's start and read at its end.
    ``grem``, ``passes``, ``split`` inside the C++ call: VmRSS sampled every
    2 ms, attributed by the call's own phase timers (a lower bound).
    """
    import numpy as np

    from gnncore.heap import fix_mmap_threshold
    from gnncore.partition.base import PartitionOptions
    from gnncore.partition.grem import partitioner as grem_partitioner
    from gnncore.partition.grem import recursion as grem_recursion
    from gnncore.store import GraphDir

    fix_mmap_threshold()  # as gnncore partition does
    graph = GraphDir.open(graph_dir)
    exact: dict[str, int] = {}
    samples: list[tuple[float, int]] = []
    inside: list[tuple[float, float, Any]] = []  # (start, end, result) of each C++ call
    running = ["python"]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append((time.perf_counter(), _vm_rss()))
            time.sleep(0.002)

    def close(phase: str) -> None:
        exact[phase] = max(exact.get(phase, 0), _vm_hwm())
        _reset_hwm()

    def marked(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            if running[-1] != "python":  # nested (a read inside the plan): its caller's
                return fn(*args, **kwargs)
            close("python")
            running.append(name)
            start = time.perf_counter()
            try:
                result = fn(*args, **kwargs)
            finally:
                running.pop()
                close(name)
            if name == "bisect":
                inside.append((start, time.perf_counter(), result))
            return result

        return run

    # patched where they are called: the plan in both modules, the rest in the recursion
    grem_partitioner.cluster_plan = marked("plan", grem_partitioner.cluster_plan)
    grem_recursion.cluster_plan = marked("plan", grem_recursion.cluster_plan)
    grem_recursion.grem_bisect = marked("bisect", grem_recursion.grem_bisect)
    grem_recursion.seed_sides = marked("seed", grem_recursion.seed_sides)
    grem_partitioner.refine_kway = marked("refine", grem_partitioner.refine_kway)
    real_read = grem_recursion.EdgeFile.read
    grem_recursion.EdgeFile.read = marked("seed", real_read)  # type: ignore[method-assign]
    thread = threading.Thread(target=sample, daemon=True)
    base = _vm_rss()
    _reset_hwm()
    thread.start()
    start = time.perf_counter()
    partitioner = grem_partitioner.GremPartitioner(chunk=chunk)
    labels = partitioner.assign(graph, PartitionOptions(parts=parts, seed=0))
    seconds = time.perf_counter() - start
    close("python")
    stop.set()
    thread.join()
    sampled: dict[str, int] = {}
    for begin, _end, result in inside:
        cuts, t = [], begin
        for phase, length in (
            ("grem", result.seconds_grem),
            ("passes", sum(result.seconds_passes)),
            ("split", result.seconds_split),
        ):
            cuts.append((t, t + length, phase))
            t += length
        for when, rss in samples:
            for lo, hi, phase in cuts:
                if lo <= when < hi:
                    sampled[phase] = max(sampled.get(phase, 0), rss)
    return {
        "chunk": chunk,
        "seconds": seconds,
        "rss_before_bytes": base,
        "top_first_chunk_nodes": partitioner.last_stats[0].first_chunk_nodes,
        "num_nodes": graph.num_nodes,
        "phase_peak_bytes": exact,
        "bisect_sampled_peak_bytes": sampled,
        "labels_checksum": int(np.asarray(labels, dtype=np.int64).sum() * 1 + len(labels)),
    }


def whole_command(graph_dir: Path, chunk: float, parts: int, work: Path) -> dict[str, Any]:
    """``gnncore partition`` as its own process; its JSON summary."""
    out, summary = work / f"out{chunk}", work / f"grem{chunk}.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "gnncore.cli.main",
            "partition",
            str(graph_dir),
            str(out),
            "--method",
            "grem",
            "--chunk",
            str(chunk),
            "--parts",
            str(parts),
            "--json",
            str(summary),
            "--no-progress",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return json.loads(summary.read_text())


def slope(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares line ``y = a + b x``: ``(a, b)``."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - b * mx, b


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph", type=Path)
    parser.add_argument("--chunks", default="0.01,0.1,0.25")
    parser.add_argument("--parts", type=int, default=16)
    parser.add_argument("--out", type=Path, default=Path("bench-out/grem-memory"))
    parser.add_argument("--profile", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.profile is not None:
        print(json.dumps(profile(args.graph, args.profile, args.parts)))
        return 0
    from gnncore.store import GraphDir

    graph = GraphDir.open(args.graph)
    edges = graph.manifest.num_undirected_edges
    rows = []
    with tempfile.TemporaryDirectory(prefix="grem-memory-") as work:
        for chunk in [float(c) for c in args.chunks.split(",")]:
            load = os.getloadavg()[0]
            command = whole_command(args.graph, chunk, args.parts, Path(work))
            prof = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    str(args.graph),
                    "--profile",
                    str(chunk),
                    "--parts",
                    str(args.parts),
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            phases = json.loads(prof.stdout.splitlines()[-1])
            from gnncore.partition.edge_stream import chunk_rows

            rows.append(
                {
                    "chunk": chunk,
                    "chunk_edges": chunk_rows(chunk, edges),
                    "load_1min": load,
                    "command_peak_rss_bytes": command["command_peak_rss_bytes"],
                    "assign_seconds": command.get("seconds"),
                    "cut_fraction": command.get("edge_cut_fraction"),
                    **{k: v for k, v in phases.items() if k != "chunk"},
                }
            )
            print(
                f"chunk {chunk}: command peak {command['command_peak_rss_bytes'] / MIB:,.0f} MiB",
                flush=True,
            )
    xs = [r["chunk_edges"] for r in rows]
    intercept, per_edge = slope(xs, [r["command_peak_rss_bytes"] for r in rows])
    result = {
        "graph": str(args.graph),
        "num_nodes": graph.num_nodes,
        "num_undirected_edges": edges,
        "parts": args.parts,
        "rows": rows,
        "bytes_per_chunk_edge": per_edge,
        "intercept_bytes": intercept,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "grem_memory.json").write_text(json.dumps(result, indent=2))
    for r in rows:  # one table: exact phases, then the sampled parts of the C++ call
        r["table"] = {
            **r["phase_peak_bytes"],
            **{f"{k} (sampled)": v for k, v in r["bisect_sampled_peak_bytes"].items()},
        }
    names = list(dict.fromkeys(n for r in rows for n in r["table"]))
    lines = [
        f"| chunk | chunk edges | command peak MiB | {' | '.join(names)} (MiB) | load |",
        "|---|---:|---:|" + "---:|" * len(names) + "---:|",
    ]
    for r in rows:
        cells = " | ".join(f"{r['table'].get(n, 0) / MIB:,.0f}" for n in names)
        lines.append(
            f"| {r['chunk']} | {r['chunk_edges']:,} | {r['command_peak_rss_bytes'] / MIB:,.0f}"
            f" | {cells} | {r['load_1min']:.1f} |"
        )
    lines.append("")
    lines.append(
        f"Whole command: {per_edge:.1f} B per chunk edge, {intercept / MIB:,.0f} MiB at zero "
        f"chunk edges ({graph.num_nodes:,} nodes)."
    )
    phase_slopes = {}
    for name in names:
        a, b = slope(xs, [r["table"].get(name, 0) for r in rows])
        phase_slopes[name] = {"bytes_per_chunk_edge": b, "intercept_bytes": a}
    result["phase_slopes"] = phase_slopes
    (args.out / "grem_memory.json").write_text(json.dumps(result, indent=2))
    lines.append(
        "Per phase (least squares over the chunk sizes): "
        + "; ".join(
            f"{n} {v['bytes_per_chunk_edge']:.1f} B/edge + {v['intercept_bytes'] / MIB:,.0f} MiB"
            for n, v in phase_slopes.items()
        )
        + "."
    )
    text = "\n".join(lines) + "\n"
    (args.out / "grem_memory.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
