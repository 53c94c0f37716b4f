"""The packed-key kernels of bounded ingestion on the 20M-edge graph's keys, A/B.

Builds canonical keys like those of ``benchmarks/ingest_throughput.py``'s CSV
(``--edges`` pairs over ``--nodes`` ids, skewed by the same law, the hubs
scattered by a permutation: 19.9M distinct keys of 42 bits for the defaults)
and times, in a child process per build and round (the builds take turns), the
kernels of the in-memory path:
``sort_unique_keys`` on 1 and 2 threads, ``transpose_sorted_keys``,
``key_offsets`` with the CSR merge (``merge_csr_rows`` over row ranges of the
16 MiB turn buffers) and ``pcg64_shuffle``. ``--site DIR`` adds another build
(``pip install --no-build-isolation --no-deps --target DIR CHECKOUT``) beside
this checkout's. Prints medians and writes ``key_kernels.json`` and
``key_kernels.md`` into ``--out``.

    .venv/bin/python benchmarks/key_kernels.py [--site DIR] [--rounds 5] [--out DIR]

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
import json, sys, time
if len(sys.argv) > 3:  # another build: this checkout's editable finder dropped
    sys.meta_path = [f for f in sys.meta_path if "skbc" not in type(f).__module__]
    sys.path.insert(0, sys.argv[3])
import numpy as np
from gnncore import _C
from gnncore.prefault import small_pages
from gnncore.store.edge_keys import shuffle_keys

edges, nodes = int(sys.argv[1]), int(sys.argv[2])
out = {}
with small_pages():  # as ingestion runs
    rng = np.random.default_rng(0)
    perm = rng.permutation(nodes).astype(np.int64)
    a = perm[np.minimum((rng.random(edges) ** 3 * nodes).astype(np.int64), nodes - 1)]
    b = perm[np.minimum((rng.random(edges) ** 3 * nodes).astype(np.int64), nodes - 1)]
    raw = np.empty(edges, np.uint64)
    raw = raw[: _C.pack_edge_keys(a, b, True, raw)]
    del a, b
    keys, tmp = np.empty_like(raw), np.empty_like(raw)
    tmp[:] = 0
    for threads in (1, 2):
        keys[:] = raw
        t = time.perf_counter()
        count = _C.sort_unique_keys(keys, tmp, threads)
        out[f"sort, {threads} thread(s)"] = time.perf_counter() - t
    keys = keys[:count].copy()
    transposed, indptr = tmp[:count], np.empty(nodes + 1, np.int64)
    t = time.perf_counter()
    _C.transpose_sorted_keys(keys, transposed, indptr)
    out["transpose"] = time.perf_counter() - t
    t = time.perf_counter()
    rank = np.empty(nodes + 1, np.int64)
    _C.key_offsets(keys, rank)
    indptr += rank
    rank = rank[:-1]
    cursor = np.zeros(2, np.int64)
    per = (16 << 20) // 12  # entries of a turn buffer: int32 index, int64 edge id
    indices, eid = np.empty(2 * per, np.int32), np.empty(2 * per, np.int64)
    row = 0
    while row < nodes:
        end = int(np.searchsorted(indptr, indptr[row] + per, side="right")) - 1
        end = min(max(end, row + 1), nodes)
        size = int(indptr[end] - indptr[row])
        _C.merge_csr_rows(
            keys, transposed, False, row, end, cursor, rank, indices[:size], eid[:size]
        )
        row = end
    out["offsets + merge"] = time.perf_counter() - t
    shuffled = transposed  # the scratch, as the ingestion's shuffle copy
    shuffled[:] = keys
    t = time.perf_counter()
    shuffle_keys(shuffled, 0)
    out["shuffle"] = time.perf_counter() - t
    out["keys"] = int(count)
print(json.dumps(out))
"""


def run_child(edges: int, nodes: int, site: str | None) -> dict[str, float]:
    cmd = [sys.executable, "-c", CHILD, str(edges), str(nodes)] + ([site] if site else [])
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", type=int, default=20_000_000)
    parser.add_argument("--nodes", type=int, default=2_000_000)
    parser.add_argument("--site", default=None, help="another build to run beside this one")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("bench-out/key_kernels"))
    args = parser.parse_args(argv)
    builds = {"this checkout": None} if args.site is None else {args.site: args.site}
    if args.site is not None:
        builds["this checkout"] = None
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in builds}
    for round_ in range(args.rounds):
        for name, site in builds.items():
            runs[name].append(run_child(args.edges, args.nodes, site))
            print(f"round {round_ + 1}, {name}: {runs[name][-1]}", file=sys.stderr)
    kernels = [k for k in runs["this checkout"][0] if k != "keys"]
    medians = {
        name: {k: round(statistics.median(r[k] for r in rs), 3) for k in kernels}
        for name, rs in runs.items()
    }
    result = {
        "benchmark": "key_kernels",
        "edges": args.edges,
        "nodes": args.nodes,
        "keys": runs["this checkout"][0]["keys"],
        "rounds": args.rounds,
        "medians_seconds": medians,
        "runs": runs,
        "machine": f"{platform.platform()}, Python {platform.python_version()}",
    }
    md = [
        "# Packed-key kernels",
        "",
        f"{result['keys']:,} distinct keys ({args.edges:,} edges over {args.nodes:,} ids);"
        f" medians of {args.rounds} rounds, the builds taking turns (seconds).",
        "",
        "| kernel | " + " | ".join(builds) + " |",
        "|---|" + "---:|" * len(builds),
    ]
    md += [f"| {k} | " + " | ".join(str(medians[b][k]) for b in builds) + " |" for k in kernels]
    md += ["", f"Machine: {result['machine']}.", ""]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "key_kernels.json").write_text(json.dumps(result, indent=1))
    (args.out / "key_kernels.md").write_text("\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
