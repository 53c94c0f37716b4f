"""Bounded ingestion of one CSV, per phase, by two builds of gnncore taking turns.

Finds which code moved a phase: the build of this checkout against another one
installed into a folder (``pip install --no-build-isolation --no-deps --target
DIR CHECKOUT``), each run in its own process (the other build's process drops
this checkout's editable-install finder and imports from DIR), alternated with
Polars' parse of the same file so the load hits all three alike. Prints, per
build, the median seconds of the whole ingestion and of each phase, and the
rounds' 1-minute load averages. The builds take turns going first (the
second of a round ran faster at load ~10, whichever build it was): use an even
number of rounds. ``cpu`` is the process's CPU seconds (user +
system, all threads): on a shared machine the steadier figure. ``--this-site``
runs a second installed folder in place of this checkout (two scratch builds).

    .venv/bin/python benchmarks/ingest_ab.py CSV --other-site /tmp/wt-site \\
        [--this-site /tmp/new-site] [--budget 1GiB] [--rounds 4] [--out /tmp/ingest-ab]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

OTHER = """
import sys
sys.meta_path = [f for f in sys.meta_path if "skbc" not in type(f).__module__]
sys.path.insert(0, sys.argv.pop(1))
from gnncore.cli.main import main
sys.argv = ["gnncore"] + sys.argv[1:]
sys.exit(main())
"""

PARSE = """
import sys, time, polars as pl
t = time.perf_counter()
pl.read_csv(sys.argv[1], schema={"src": pl.Int64, "dst": pl.Int64})
print(time.perf_counter() - t)
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=Path)
    parser.add_argument("--other-site", type=Path, required=True)
    parser.add_argument("--this-site", type=Path, default=None)
    parser.add_argument("--budget", default="1GiB")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", type=Path, default=Path("/tmp/ingest-ab"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    builds = {
        "this checkout": [sys.executable, "-m", "gnncore.cli.main"],
        str(args.other_site): [sys.executable, "-c", OTHER, str(args.other_site)],
    }
    if args.this_site is not None:
        del builds["this checkout"]
        builds = {str(args.this_site): [sys.executable, "-c", OTHER, str(args.this_site)], **builds}
    runs: dict[str, list[dict]] = {name: [] for name in builds}
    polars: list[float] = []
    for turn in range(args.rounds):
        load = os.getloadavg()[0]
        out = subprocess.run([sys.executable, "-c", PARSE, str(args.csv)], check=True,
                             capture_output=True, text=True).stdout  # fmt: skip
        polars.append(float(out.split()[0]))
        order = list(builds.items())  # each build goes first every other round:
        for name, command in order if turn % 2 == 0 else order[::-1]:  # the second gains
            graph, summary = args.out / "graph", args.out / "summary.json"
            shutil.rmtree(graph, ignore_errors=True)
            t0, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(command + ["ingest", str(args.csv), str(graph), "--format",
                                      "edgelist", "--no-progress", "--memory-budget",
                                      args.budget, "--json", str(summary)],
                           check=True, capture_output=True)  # fmt: skip
            elapsed, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            report = json.loads(summary.read_text())
            runs[name].append({"process": elapsed, "cpu": cpu, "load": load,
                               "seconds": report["seconds"], **report["phases"]})  # fmt: skip
        shutil.rmtree(args.out / "graph", ignore_errors=True)
    each = ", ".join(f"{p:.2f}" for p in polars)
    print(f"Polars' parse: median {np.median(polars):.2f} s ({each})")
    for name, rs in runs.items():
        keys = [k for k in rs[0] if k != "load"]
        medians = ", ".join(f"{k} {np.median([r[k] for r in rs]):.2f}" for k in keys)
        loads = ", ".join(f"{r['load']:.1f}" for r in rs)
        print(f"{name}: {medians} (medians of {len(rs)}; load {loads})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
