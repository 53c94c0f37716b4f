"""First touch of fresh memory: NumPy's huge-page advice against 4 KiB pages.

Each round runs two child processes, one after the other, that each allocate a
fresh ``--mib`` MiB NumPy array and write one byte per 4 KiB page: one with
NumPy's default advice (``MADV_HUGEPAGE`` on arrays of 4 MiB or more), one
inside :func:`gnncore.prefault.small_pages` (no advice: 4 KiB pages). Between
children the script sleeps ``--pause`` seconds, so that memory freed by the
previous child is what a stage started a moment later would get (on a VM whose
balloon reports free memory to the host, reported memory is faulted in by the
host again). Prints and writes ``first_touch.json`` and ``first_touch.md``
(medians of ``--repeat`` rounds) into ``--out`` (default ``bench-out/first_touch``).

    .venv/bin/python benchmarks/first_touch.py [--mib 512] [--repeat 5] [--pause 3]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import sys, time
import numpy as np
from gnncore.prefault import small_pages
mib, small = int(sys.argv[1]), sys.argv[2] == "small"
def touch():
    a = np.empty(mib << 20, dtype=np.uint8)
    start = time.perf_counter()
    a[::4096] = 1
    return time.perf_counter() - start
if small:
    with small_pages():
        seconds = touch()
else:
    seconds = touch()
print(seconds)
"""

MODES = ("huge-page advice (NumPy's default)", "4 KiB pages (small_pages)")


def run_child(mib: int, mode: str) -> float:
    """Seconds the child took to write one byte per page of a fresh array."""
    arg = "small" if mode.startswith("4 KiB") else "huge"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(mib), arg], check=True, capture_output=True, text=True
    )
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pause", type=float, default=3.0)
    parser.add_argument("--out", type=Path, default=Path("bench-out/first_touch"))
    args = parser.parse_args()
    seconds: dict[str, list[float]] = {mode: [] for mode in MODES}
    for round_ in range(args.repeat):
        for mode in MODES if round_ % 2 == 0 else MODES[::-1]:
            time.sleep(args.pause)
            seconds[mode].append(run_child(args.mib, mode))
            print(f"round {round_ + 1}: {mode}: {seconds[mode][-1]:.3f} s", file=sys.stderr)
    per_mib = {mode: statistics.median(s) * 1e3 / args.mib for mode, s in seconds.items()}
    result = {
        "mib": args.mib,
        "pause_s": args.pause,
        "rounds": seconds,
        "median_ms_per_mib": per_mib,
        "machine": f"{platform.platform()}, Python {platform.python_version()}",
    }
    lines = [
        "# First touch of fresh memory",
        "",
        f"A fresh {args.mib} MiB NumPy array written once per 4 KiB page, in a child "
        f"process started {args.pause:g} s after the previous one; medians of "
        f"{args.repeat} rounds, alternating.",
        "",
        "| pages | ms per MiB | seconds (rounds) |",
        "|---|---:|---|",
    ]
    for mode in MODES:
        rounds = ", ".join(f"{s:.3f}" for s in seconds[mode])
        lines.append(f"| {mode} | {per_mib[mode]:.3f} | {rounds} |")
    lines += ["", f"Machine: {result['machine']}."]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "first_touch.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "first_touch.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
