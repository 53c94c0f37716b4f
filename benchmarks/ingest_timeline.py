"""Where a bounded ingestion's wall time goes: per phase, the CPU seconds of each
thread and the core time left idle.

Runs ``gnncore ingest --memory-budget`` on CSV in a child process whose
``Phases.start`` also writes a time stamp per phase, and samples every thread's
CPU time (``/proc/PID/task/*/stat``) every ``--interval`` seconds. Prints, per
phase in the order run (``startup`` is the interpreter and the imports): wall
seconds, CPU seconds (of which system time: page faults, file writes),
``idle`` = cores x wall - CPU (core seconds nobody used:
the serial parts), the disks' GB read and written and busy seconds
(/proc/diskstats, the whole machine), and the busiest threads (the main thread is ``main``;
Polars' are ``async-executor``/``tokio``; the others, the CSV reader, the CSR
sink, the sha256 threads, show as ``python``). Threads that ended between two
samples lose their last interval, and short-lived ones (the radix sort's) may
not show among the threads; the CPU seconds are the process's own counters (its
ended threads included).

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


def _cpu_seconds(stat_path: str, hz: int) -> tuple[str, float, float] | None:
    """The command name, user + system and system CPU seconds of a ``stat`` file."""
    try:
        with open(stat_path) as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    user, system = int(fields[11]) / hz, int(fields[12]) / hz
    return stat[stat.index("(") + 1 : stat.rindex(")")], user + system, system


def thread_times(pid: int, hz: int) -> dict[str, float]:
    """CPU seconds so far of each thread of ``pid``, keyed ``tid:name``, and of the
    whole process (``process``, ``process:sys``: its threads that ended included)."""
    times: dict[str, float] = {}
    whole = _cpu_seconds(f"/proc/{pid}/stat", hz)
    if whole is None:
        return times
    times["process"], times["process:sys"] = whole[1:]
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return times
    for tid in tids:
        seconds = _cpu_seconds(f"/proc/{pid}/task/{tid}/stat", hz)
        if seconds is not None:
            key = f"{tid}:{'main' if int(tid) == pid else seconds[0]}"
            times[key], times[f"{key}:sys"] = seconds[1:]
    return times


def disk_counters() -> tuple[float, float, float]:
    """Whole-machine disk counters so far: GB read, GB written, seconds the devices were busy.

    Summed over the whole disks of ``/proc/diskstats`` (not partitions, loop or ram
    devices); busy seconds over wall seconds is the disk's utilisation.
    """
    read = written = busy = 0.0
    try:
        with open("/proc/diskstats") as fh:
            rows = [line.split() for line in fh]
    except OSError:
        return read, written, busy
    for row in rows:
        name = row[2]
        if name.startswith(("loop", "ram", "dm-")) or not os.path.exists(f"/sys/block/{name}"):
            continue
        read += int(row[5]) * 512 / 1e9
        written += int(row[9]) * 512 / 1e9
        busy += int(row[12]) / 1e3
    return read, written, busy


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
        times = thread_times(child.pid, hz)
        times.update(zip(("disk:read", "disk:written", "disk:busy"), disk_counters()))
        samples.append((time.time(), times))
        time.sleep(args.interval)
    end = time.time()
    if child.returncode:
        raise SystemExit(f"ingest failed ({child.returncode})")
    lines = [line.split() for line in marks.read_text().splitlines() if line]
    stamps = [(float(t), name) for t, name in lines]
    bounds = [(t0, "startup"), *stamps, (end, "")]
    cores = os.cpu_count() or 1

    # every counter's last value at or before each sample: a thread that ended
    # keeps the CPU time it had when last seen
    known: dict[str, float] = {}
    snapshots: list[tuple[float, dict[str, float]]] = []
    for when, times in samples:
        known.update(times)
        snapshots.append((when, dict(known)))

    def at(t: float) -> dict[str, float]:
        before = [times for when, times in snapshots if when <= t]
        return before[-1] if before else {}

    print(f"process {end - t0:.2f} s, load {load:.1f} at the start, {cores} cores")
    total = idle_total = 0.0
    for (ta, name), (tb, _) in zip(bounds, bounds[1:]):
        a, b = at(ta), at(tb)
        disk = {k: b.get(k, 0.0) - a.get(k, b.get(k, 0.0)) for k in
                ("disk:read", "disk:written", "disk:busy")}  # fmt: skip
        used = {k: b[k] - a.get(k, 0.0) for k in b if not k.startswith(("disk:", "process"))
                and b[k] - a.get(k, 0.0) > 0.005}  # fmt: skip
        cpu = b.get("process", 0.0) - a.get("process", 0.0)
        system = b.get("process:sys", 0.0) - a.get("process:sys", 0.0)
        used = {k: v for k, v in used.items() if not k.endswith(":sys")}
        idle = max(cores * (tb - ta) - cpu, 0.0)
        total += cpu
        idle_total += idle
        busiest = ", ".join(f"{k.split(':')[1]} {v:.2f}" for k, v in
                            sorted(used.items(), key=lambda kv: -kv[1])[:5])  # fmt: skip
        print(
            f"{name:11s} wall {tb - ta:5.2f}  cpu {cpu:5.2f} (sys {system:4.2f})  "
            f"idle {idle:5.2f}  disk {disk['disk:read']:5.1f} GB read, "
            f"{disk['disk:written']:5.1f} GB written, busy {disk['disk:busy']:5.1f} s  [{busiest}]"
        )
    print(f"sampled CPU {total:.2f} s, idle core seconds {idle_total:.2f}")
    shutil.rmtree(graph, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
