"""Where a bounded ingestion's wall time goes: per phase, the CPU seconds of each
thread and the core time left idle.

Runs ``gnncore ingest --memory-budget`` on CSV in a child process whose
``Phases.start`` also writes a time stamp per phase, and samples every thread's
CPU time (``/proc/PID/task/*/stat``) every ``--interval`` seconds. Prints, per
phase in the order run (``startup`` is the interpreter and the imports): wall
seconds, CPU seconds (of which system time: page faults, file writes),
``idle`` = cores x wall - CPU (core seconds nobody used:
the serial parts), and the busiest threads (the main thread is ``main``;
Polars' are ``async-executor``/``tokio``; the others, the CSV reader, the CSR
sink, the sha256 threads, show as ``python``). Threads that ended between two
samples lose their last interval, and short-lived ones (the radix sort's) may
not show at all: the totals are a lower bound.

    .venv/bin/python benchmarks/ingest_timeline.py CSV [--budget 1GiB] [--out /tmp/tl] \\
        [--site DIR]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

CHILD = r"""
import os, sys, time
site = os.environ.get("GNNCORE_TIMELINE_SITE")
if site:  # another build, installed into a folder (as benchmarks/ingest_ab.py runs it)
    sys.meta_path = [f for f in sys.meta_path if "skbc" not in type(f).__module__]
    sys.path.insert(0, site)
import gnncore.io.bounded.phases as phases
marks = open(os.environ["GNNCORE_TIMELINE_MARKS"], "w")
start = phases.Phases.start
def marked(self, name):
    marks.write(f"{time.time():.4f} {name}\n")
    marks.flush()
    start(self, name)
phases.Phases.start = marked
from gnncore.cli.main import main
sys.argv = ["gnncore"] + sys.argv[1:]
try:
    main()
finally:
    marks.write(f"{time.time():.4f} exit\n")
    marks.flush()
"""


def thread_times(pid: int, hz: int) -> dict[str, float]:
    """CPU seconds so far of each thread of ``pid``, keyed ``tid:name``."""
    times: dict[str, float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return times
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        name = "main" if int(tid) == pid else stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        times[f"{tid}:{name}"] = (int(fields[11]) + int(fields[12])) / hz
        times[f"{tid}:{name}:sys"] = int(fields[12]) / hz
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=Path)
    parser.add_argument("--budget", default="1GiB")
    parser.add_argument("--interval", type=float, default=0.02)
    parser.add_argument("--out", type=Path, default=Path("/tmp/ingest-timeline"))
    parser.add_argument("--site", type=Path, default=None,
                        help="the build installed in this folder, not the checkout")  # fmt: skip
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    graph, marks = args.out / "graph", args.out / "marks.txt"
    shutil.rmtree(graph, ignore_errors=True)
    env = dict(os.environ, GNNCORE_TIMELINE_MARKS=str(marks))
    if args.site is not None:
        env["GNNCORE_TIMELINE_SITE"] = str(args.site.absolute())
    command = [sys.executable, "-c", CHILD, "ingest", str(args.csv), str(graph), "--format",
               "edgelist", "--no-progress", "--memory-budget", args.budget]  # fmt: skip
    load = os.getloadavg()[0]
    t0 = time.time()
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    hz = os.sysconf("SC_CLK_TCK")
    samples: list[tuple[float, dict[str, float]]] = []
    while child.poll() is None:
        samples.append((time.time(), thread_times(child.pid, hz)))
        time.sleep(args.interval)
    end = time.time()
    if child.returncode:
        raise SystemExit(f"ingest failed ({child.returncode})")
    lines = [line.split() for line in marks.read_text().splitlines() if line]
    stamps = [(float(t), name) for t, name in lines]
    bounds = [(t0, "startup"), *stamps, (end, "")]
    cores = os.cpu_count() or 1

    def at(t: float) -> dict[str, float]:
        before = [times for when, times in samples if when <= t]
        return before[-1] if before else {}

    print(f"process {end - t0:.2f} s, load {load:.1f} at the start, {cores} cores")
    total = idle_total = 0.0
    for (ta, name), (tb, _) in zip(bounds, bounds[1:]):
        a, b = at(ta), at(tb)
        used = {k: b[k] - a.get(k, 0.0) for k in b if b[k] - a.get(k, 0.0) > 0.005}
        system = sum(v for k, v in used.items() if k.endswith(":sys"))
        used = {k: v for k, v in used.items() if not k.endswith(":sys")}
        cpu = sum(used.values())
        idle = max(cores * (tb - ta) - cpu, 0.0)
        total += cpu
        idle_total += idle
        busiest = ", ".join(f"{k.split(':')[1]} {v:.2f}" for k, v in
                            sorted(used.items(), key=lambda kv: -kv[1])[:5])  # fmt: skip
        print(
            f"{name:11s} wall {tb - ta:5.2f}  cpu {cpu:5.2f} (sys {system:4.2f})  "
            f"idle {idle:5.2f}  [{busiest}]"
        )
    print(f"sampled CPU {total:.2f} s, idle core seconds {idle_total:.2f}")
    shutil.rmtree(graph, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
