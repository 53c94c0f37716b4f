"""Where a command's CPU goes, by process: every process on the machine, sampled.

Runs a command (typically ``pytest`` on one test file) while a sampler reads,
every ``--interval`` seconds, the cumulative CPU time (user + system) and the
command line of every process in ``/proc``. At the end it sums the CPU that
each process spent during the command, grouped by kind (Chromium, Dagster's
webserver, run workers, step processes, torchrun ranks, ...), and reports the
machine's busy CPU seconds over the same span (``/proc/stat``).

Why not ``getrusage``: a test's servers (``dagster dev``, ``mlflow ui``,
Chromium) start processes that their parents never reap before they are killed,
so their CPU never reaches the pytest process's ``RUSAGE_CHILDREN``. In session
23 the tutorial's browser test accounted 91 CPU seconds that way, and 394 to 419
by this sampler (docs/TESTING.md). A process that lives less than one interval,
and the last interval of each process, are missed: the groups are lower bounds,
the busy figure is not (it also counts anything else running on the machine).

    .venv/bin/python benchmarks/suite_cpu.py --out bench-out/suite-cpu -- \\
        .venv/bin/python -m pytest -q tests/ui/test_tutorial.py

Writes ``suite_cpu.json`` and ``suite_cpu.md`` into ``--out``. Linux only. Not
part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")

#: (substring of the command line, group), first match wins.
GROUPS = (
    ("chromium", "Chromium"),
    ("playwright", "Playwright driver"),
    ("dagster_webserver", "Dagster webserver"),
    ("dagster._daemon", "Dagster daemon"),
    ("dagster-daemon", "Dagster daemon"),
    ("api grpc", "Dagster code server"),
    ("code-server start", "Dagster code server"),
    ("dagster dev", "dagster dev"),
    ("multiprocessing.forkserver", "forkserver and forked steps"),
    ("multiprocessing.spawn", "spawned processes (run workers, ranks)"),
    ("gnncore-rank", "ranks (both launchers)"),
    ("uvicorn", "MLflow server"),
    ("mlflow ui", "MLflow server"),
    ("pytest", "pytest"),
    ("bin/gnncore", "gnncore CLI"),
    ("gnncore_bench", "bench harness children"),
)


def group_of(command: str) -> str:
    """The group a process belongs to, by its command line."""
    for needle, group in GROUPS:
        if needle in command:
            return group
    return "other: " + command[:60]


def _stat(pid: str) -> tuple[float, str, str] | None:
    """(CPU seconds, start time in ticks, process name) of ``pid``, or None once
    it is gone. A rank names itself (``gnncore-rank<N>``) after it forks."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    name = text[text.find("(") + 1 : text.rfind(")")]
    return (int(fields[11]) + int(fields[12])) / TICKS, fields[19], name


def _command(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def busy_seconds() -> float:
    """The machine's busy CPU seconds since boot (all but idle and iowait)."""
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(
            int, f.readline().split()[1:9]
        )
    return (user + nice + system + irq + softirq + steal) / TICKS


class Sampler(threading.Thread):
    """Every process's CPU during the sampled span: what it had at the first sample
    (zero for a process started later) and at the last."""

    def __init__(self, interval: float) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.first: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.commands: dict[str, str] = {}
        self.stopping = threading.Event()
        self._sample(initial=True)

    def _sample(self, initial: bool = False) -> None:
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            found = _stat(pid)
            if found is None:
                continue
            cpu, start, name = found
            key = f"{pid}:{start}"
            if key not in self.last:
                self.first[key] = cpu if initial else 0.0
                self.commands[key] = _command(pid)
            if name.startswith("gnncore-rank"):
                self.commands[key] = name
            self.last[key] = cpu

    def run(self) -> None:
        while not self.stopping.wait(self.interval):
            self._sample()

    def stop(self) -> None:
        self.stopping.set()
        self.join()
        self._sample()

    def by_group(self) -> dict[str, dict[str, float]]:
        """CPU seconds and process count per group, largest first."""
        groups: dict[str, dict[str, float]] = {}
        for key, cpu in self.last.items():
            spent = cpu - self.first[key]
            if spent <= 0:
                continue
            entry = groups.setdefault(group_of(self.commands[key]), {"cpu_s": 0.0, "processes": 0})
            entry["cpu_s"] += spent
            entry["processes"] += 1
        return dict(sorted(groups.items(), key=lambda item: -item[1]["cpu_s"]))


def measure(command: list[str], interval: float) -> dict[str, object]:
    """Run ``command`` under the sampler; its exit code, wall seconds, the machine's
    busy CPU seconds and the CPU by group."""
    sampler = Sampler(interval)
    busy, start = busy_seconds(), time.monotonic()
    sampler.start()
    code = subprocess.call(command)
    sampler.stop()
    groups = sampler.by_group()
    return {
        "command": command,
        "returncode": code,
        "wall_s": round(time.monotonic() - start, 2),
        "busy_cpu_s": round(busy_seconds() - busy, 2),
        "sampled_cpu_s": round(sum(g["cpu_s"] for g in groups.values()), 2),
        "groups": {
            k: {"cpu_s": round(v["cpu_s"], 2), "processes": v["processes"]}
            for k, v in groups.items()
        },
        "interval_s": interval,
        "machine": f"{platform.node()}, {os.cpu_count()} CPUs",
        "load_after": os.getloadavg()[0],
    }


def markdown(result: dict[str, object]) -> str:
    groups = result["groups"]
    assert isinstance(groups, dict)
    lines = [
        f"`{' '.join(map(str, result['command']))}`: exit {result['returncode']}, "
        f"{result['wall_s']} s wall, {result['busy_cpu_s']} busy CPU s on the machine "
        f"({result['sampled_cpu_s']} sampled in processes), {result['machine']}",
        "",
        "| group | processes | CPU s |",
        "|---|---:|---:|",
    ]
    lines += [f"| {name} | {g['processes']} | {g['cpu_s']:.1f} |" for name, g in groups.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench-out/suite-cpu"))
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between samples")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to measure after --")
    result = measure(command, args.interval)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "suite_cpu.json").write_text(json.dumps(result, indent=2) + "\n")
    text = markdown(result)
    (args.out / "suite_cpu.md").write_text(text)
    print(text, end="")
    return int(result["returncode"] != 0)  # type: ignore[call-overload]


if __name__ == "__main__":
    sys.exit(main())
