"""The bounded parse alone, the CSV read through the page cache or past it.

Runs the loop of ``gnncore.io.bounded.parse._native_pass`` (the C++ reader with
the next block parsed ahead, the ids marked, the keys packed, sorted and
spilled) over ``CSV`` under a 4 GiB budget, once buffered and once with
``direct=True`` (``O_DIRECT``, chunks read ahead on a thread), in turns, each
in a child process after the CSV's pages are dropped from the cache. Prints
and writes (``--out``: JSON and Markdown) each round's wall, user and system
seconds. Run it inside a memory cgroup to see the page cache's reclaim, e.g.
``echo $$ > /sys/fs/cgroup/memory/NAME/cgroup.procs`` first (the cache counts
against the limit there).

    .venv/bin/python benchmarks/parse_direct.py CSV [--rounds 2] [--out DIR]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import shutil, sys
from pathlib import Path
from gnncore.heap import fix_mmap_threshold
from gnncore.io.bounded.budget import batch_rows
from gnncore.io.bounded.ids import IdCollector
from gnncore.io.bounded.parse import KeySink
from gnncore.io.readers.edge_text import read_int_edge_blocks
from gnncore.io.readers.edgelist import sniff

text, scratch, direct = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "direct"
budget = 4 << 30
fix_mmap_threshold()  # as ingestion runs
ids = IdCollector(scratch, budget // 4, 64)
sink = KeySink(scratch, budget // 2, False, 64)
rows = batch_rows(budget)
for src, dst, top in read_int_edge_blocks(text, sniff(text, None), rows, ahead=True,
                                          direct=direct):
    ids.add(src, dst, top)
    sink.add(src, dst, top)
print(sink.count)
"""


def run_once(csv: Path, mode: str) -> dict[str, float | int | str]:
    """One parse in a child process, the CSV's pages dropped first."""
    from gnncore import _C

    _C.evict(str(csv))
    scratch = Path(tempfile.mkdtemp(prefix="parse-direct-", dir=csv.parent))
    try:
        start = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(csv), str(scratch), mode], stdout=subprocess.PIPE
        )
        out, _ = child.communicate()
        wall = time.perf_counter() - start
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if child.returncode != 0:
        raise SystemExit(f"the {mode} parse failed (exit {child.returncode})")
    rusage = _children_usage()
    return {"mode": mode, "wall_s": round(wall, 2), "edges": int(out.split()[-1]),
            "user_s": round(rusage[0], 2), "sys_s": round(rusage[1], 2)}  # fmt: skip


_LAST = [0.0, 0.0]


def _children_usage() -> tuple[float, float]:
    """The last child's user and system seconds (the children's totals, differenced)."""
    import resource

    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (now.ru_utime - _LAST[0], now.ru_stime - _LAST[1])
    _LAST[:] = [now.ru_utime, now.ru_stime]
    return used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=Path)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    _children_usage()
    rows = []
    for round_ in range(1, args.rounds + 1):
        for mode in ("buffered", "direct"):
            row = run_once(args.csv, mode) | {"round": round_}
            print(f"round {round_} {mode}: {row['wall_s']} s, {row['user_s']} user, "
                  f"{row['sys_s']} sys, {row['edges']:,} edges", flush=True)  # fmt: skip
            rows.append(row)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "parse_direct.json").write_text(json.dumps(rows, indent=2))
        lines = ["| round | mode | wall s | user s | sys s |", "|---|---|---:|---:|---:|"]
        lines += [f"| {r['round']} | {r['mode']} | {r['wall_s']} | {r['user_s']} | {r['sys_s']} |"
                  for r in rows]  # fmt: skip
        (args.out / "parse_direct.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
