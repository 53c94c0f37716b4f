"""Bounded ingestion's memory phase by phase: peak anonymous and file-backed RSS.

Runs ``ingest_edgelist_external`` (``gnncore ingest --memory-budget``) in this
process for each ``--budgets`` size on an existing edge list, while a thread
reads ``/proc/self/status`` every ``--interval`` seconds and keeps, per phase
(parse, remap, sort/dedup, csr, shuffle, write, checksums -- the report's
phases; ``checksums`` includes the manifest and the validation), the largest
``RssAnon`` (heap: buffers, arrays) and ``RssFile`` (mapped files, libraries)
seen. Mapped pages count in a memory cgroup as anonymous ones do, so both
must stay within the budget plus the O(|V|) arrays. The phase is read from
the run's own :class:`gnncore.io.bounded.phases.Phases` (a subclass noting
the phase it starts). Prints a Markdown table and writes
``ingest_memory_phases.json`` / ``.md`` into ``--out``.

    .venv/bin/python benchmarks/ingest_memory_phases.py EDGES.csv \\
        [--budgets 256MiB,1GiB] [--out bench-out/ingest-memory]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from gnncore.io.bounded import text_ingest as external_ingest
from gnncore.io.bounded.phases import PHASES
from gnncore.sizes import format_size, parse_size

FIELDS = ("RssAnon", "RssFile", "VmRSS", "VmHWM")


def status() -> dict[str, int]:
    """This process's memory fields of ``/proc/self/status``, in bytes."""
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in FIELDS:
                out[key] = int(value.split()[0]) * 1024
    return out


def measure(source: Path, out_dir: Path, budget: int, interval: float) -> dict:
    """One bounded ingestion of ``source`` with per-phase peaks."""
    current = {"phase": "start"}
    peaks: dict[str, dict[str, int]] = {}

    class NotingPhases(external_ingest.Phases):
        def start(self, name: str) -> None:
            super().start(name)
            current["phase"] = name

    def sample(stop: threading.Event) -> None:
        while not stop.is_set():
            now = status()
            peak = peaks.setdefault(current["phase"], {"anon": 0, "file": 0})
            peak["anon"] = max(peak["anon"], now["RssAnon"])
            peak["file"] = max(peak["file"], now["RssFile"])
            stop.wait(interval)

    with open("/proc/self/clear_refs", "w") as fh:  # VmHWM back to VmRSS: this run's peak
        fh.write("5")
    before = status()
    original = external_ingest.Phases
    external_ingest.Phases = NotingPhases  # type: ignore[misc]
    stop = threading.Event()
    sampler = threading.Thread(target=sample, args=(stop,), daemon=True)
    sampler.start()
    started = time.perf_counter()
    try:
        report = external_ingest.ingest_edgelist_external(source, out_dir, memory_budget=budget)
    finally:
        stop.set()
        sampler.join()
        external_ingest.Phases = original  # type: ignore[misc]
    return {
        "budget_bytes": budget,
        "seconds": round(time.perf_counter() - started, 3),
        "num_nodes": report.num_nodes,
        "num_canonical_edges": report.num_canonical_edges,
        "phases_seconds": report.phases,
        "start": {"anon": before["RssAnon"], "file": before["RssFile"]},
        "phase_peaks": peaks,
        "vm_hwm_bytes": status()["VmHWM"],
    }


def markdown(source: Path, runs: list[dict]) -> str:
    lines = [
        "# Bounded ingestion's memory by phase",
        "",
        f"`{source}`; peak RssAnon + RssFile per phase (sampled), and the process's VmHWM "
        "during the run; each budget in its own process.",
        "",
        "| budget | start | " + " | ".join(PHASES) + " | VmHWM | seconds |",
        "|---|---:|" + "---:|" * len(PHASES) + "---:|---:|",
    ]
    for run in runs:
        cells = []
        for phase in PHASES:
            peak = run["phase_peaks"].get(phase)
            cells.append("—" if peak is None else f"{peak['anon'] >> 20} + {peak['file'] >> 20}")
        start = f"{run['start']['anon'] >> 20} + {run['start']['file'] >> 20}"
        lines.append(
            f"| {format_size(run['budget_bytes'])} | {start} | "
            + " | ".join(cells)
            + f" | {run['vm_hwm_bytes'] >> 20} | {run['seconds']} |"
        )
    lines += ["", "MiB: anonymous + file-backed."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="an edge list with integer ids (CSV or text)")
    parser.add_argument("--budgets", default="256MiB,1GiB")
    parser.add_argument("--out", type=Path, default=Path("bench-out/ingest-memory"))
    parser.add_argument("--interval", type=float, default=0.01, help="seconds between samples")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    sizes = args.budgets.split(",")
    if len(sizes) == 1:
        graph = args.out / "graph"
        runs = [measure(args.source, graph, parse_size(sizes[0]), args.interval)]
        shutil.rmtree(graph, ignore_errors=True)
    else:  # each budget in a fresh process: no heap left over from the one before
        runs = []
        for size in sizes:
            child = args.out / size
            subprocess.run(
                [sys.executable, __file__, str(args.source), "--budgets", size, "--out",
                 str(child), "--interval", str(args.interval)],
                check=True, stdout=subprocess.DEVNULL,
            )  # fmt: skip
            runs += json.loads((child / "ingest_memory_phases.json").read_text())["runs"]
    text = markdown(args.source, runs)
    (args.out / "ingest_memory_phases.md").write_text(text)
    (args.out / "ingest_memory_phases.json").write_text(
        json.dumps({"source": str(args.source), "runs": runs}, indent=2) + "\n"
    )
    print(text)


if __name__ == "__main__":
    main()
