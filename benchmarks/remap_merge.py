"""The keys' last merge, mapped and counted (``_C.merge_map_key_runs``, the
``remap`` phase of a bounded ingestion whose keys went to disk), alone, A/B.

Writes ``--runs`` sorted key runs (``_C.KeyRunWriter``) of ``--keys`` random
undirected edges in all over ``--nodes`` raw ids (every id but one in 16 taken,
so the lookup table maps them, as a generated CSV's ids are mapped) into
``--data`` once, then times the merge into a mapped run, in a child process per
build and round, the builds taking turns (``--site DIR``: another build,
``pip install --no-build-isolation --no-deps --target DIR CHECKOUT``). The
runs' pages are dropped before each round (``_C.evict``), as the billion reads
its runs back from the disk. Checks that both builds write the same mapped run
(sha256) and counts. ``--direct``: this checkout writes the mapped run past
the page cache (``direct=True``). Prints medians (wall and CPU seconds) and writes
``remap_merge.json`` and ``remap_merge.md`` into ``--out``.

    .venv/bin/python benchmarks/remap_merge.py [--site DIR] [--rounds 3] \\
        [--keys 100000000] [--nodes 10000000] [--data DIR] [--out DIR]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import hashlib, json, os, resource, sys, time
if sys.argv[4]:  # another build: this checkout's editable finder dropped
    sys.meta_path = [f for f in sys.meta_path if "skbc" not in type(f).__module__]
    sys.path.insert(0, sys.argv[4])
import numpy as np
from gnncore import _C
from gnncore.store.external_sort import merge_buffer

data, nodes, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
extra = {"direct": True} if sys.argv[5] == "direct" else {}
paths = sorted(str(p) for p in __import__("pathlib").Path(data).glob("run-*.keys"))
for path in paths:
    _C.evict(path)
lut = np.load(os.path.join(data, "lut.npy"))
major = np.zeros(nodes + 1, np.int64)
minor = np.zeros(nodes + 1, np.int64)
out = os.path.join(data, "mapped.keys")
usage = resource.getrusage(resource.RUSAGE_SELF)
t = time.perf_counter()
count = _C.merge_map_key_runs(paths, out, merge_buffer(budget // 4, len(paths)), lut, major, minor,
                              **extra)
wall = time.perf_counter() - t
after = resource.getrusage(resource.RUSAGE_SELF)
sha = hashlib.sha256(open(out, "rb").read()).hexdigest()
sha = hashlib.sha256((sha + str(major.sum()) + str(minor[::997].tolist())).encode()).hexdigest()
os.unlink(out)
print(json.dumps({"wall": wall, "cpu": after.ru_utime + after.ru_stime - usage.ru_utime
                  - usage.ru_stime, "count": count, "sha": sha}))
"""


def make_runs(data: Path, keys: int, nodes: int, runs: int, seed: int) -> None:
    """The sorted runs and the lookup table of raw id -> node id (once)."""
    import numpy as np

    from gnncore import _C

    data.mkdir(parents=True, exist_ok=True)
    if (data / "done").exists():
        return
    rng = np.random.default_rng(seed)
    span = nodes + nodes // 15 + 1
    taken = np.ones(span, bool)
    taken[rng.choice(span, span - nodes, replace=False)] = False
    raw = np.flatnonzero(taken).astype(np.int64)  # the raw ids in use, sorted
    lut = np.full(span, -1, np.int32)
    lut[raw] = np.arange(nodes, dtype=np.int32)
    np.save(data / "lut.npy", lut)
    per = -(-keys // runs)
    for r in range(runs):
        n = min(per, keys - r * per)
        a, b = raw[rng.integers(0, nodes, n)], raw[rng.integers(0, nodes, n)]
        packed = np.empty(n, np.uint64)
        packed = np.unique(packed[: _C.pack_edge_keys(a, b, True, packed)])
        writer = _C.KeyRunWriter(str(data / f"run-{r:03d}.keys"))
        writer.append(packed)
        writer.commit()
    (data / "done").write_text("")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100_000_000)
    parser.add_argument("--nodes", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--budget", type=int, default=4 << 30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--site", type=Path, default=None)
    parser.add_argument("--direct", action="store_true",
                        help="the checkout writes the mapped run past the page cache")  # fmt: skip
    parser.add_argument("--data", type=Path, default=Path("/tmp/remap-merge-data"))
    parser.add_argument("--out", type=Path, default=Path("bench-out/remap-merge"))
    args = parser.parse_args(argv)
    make_runs(args.data, args.keys, args.nodes, args.runs, 0)
    builds = {"checkout": ""}
    if args.site is not None:
        builds = {"site": str(args.site.absolute()), **builds}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in builds}
    for _ in range(args.rounds):
        for name, site in builds.items():
            child = subprocess.run(
                [sys.executable, "-c", CHILD, str(args.data), str(args.nodes),
                 str(args.budget), site, "direct" if args.direct and not site else ""],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
            results[name].append(json.loads(child.stdout))
            print(name, results[name][-1], flush=True)
    shas = {r["sha"] for rounds in results.values() for r in rounds}
    if len(shas) != 1:
        raise SystemExit(f"the builds disagree: {shas}")
    rows = {
        name: {key: statistics.median(r[key] for r in rounds) for key in ("wall", "cpu")}
        for name, rounds in results.items()
    }
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"machine": platform.processor() or platform.machine(), "args": vars(args) | {
        "site": str(args.site), "data": str(args.data), "out": str(args.out)},
        "medians": rows, "rounds": results}  # fmt: skip
    (args.out / "remap_merge.json").write_text(json.dumps(report, indent=1))
    lines = ["| build | wall s | CPU s |", "|---|---:|---:|"]
    lines += [f"| {name} | {row['wall']:.2f} | {row['cpu']:.2f} |" for name, row in rows.items()]
    (args.out / "remap_merge.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
