"""Peak memory and time of writing the partitioned store: today's bounded writer
against the writer of an earlier commit, in one run.

``new`` runs ``gnncore store GRAPH PARTITION OUT --memory-budget BUDGET``;
``old`` runs ``write_partitioned_store`` of ``gnncore/outofcore/store.py`` as it
was at ``--old-rev`` (the file taken with ``git show`` into a scratch module,
the rest of gnncore as it is today). Each ``--run MODE[@LIMIT]`` is a child
process; ``@LIMIT`` puts it in a cgroup v1 memory cgroup of that size (page
cache charged, the graph evicted from the page cache first:
``gnncore_bench.limits.run_limited``), so a run that needs more is OOM-killed.
When both modes finish, their files' sha256 are compared (same bytes).

The graph: ``--graph`` (a graph directory) and ``--partition`` (one of its
partitions), else generated under ``--work`` (``gnncore synth`` with
``--nodes``, ``--features``; ``gnncore partition --method random``). Prints
the results and writes them as JSON (``--out``)::

    .venv/bin/python benchmarks/store_memory.py --work /tmp/storebench \\
        --graph /tmp/storebench/g2m --partition /tmp/storebench/p16 \\
        --budget 1GiB --run old --run new@1GiB --out bench-out/store_memory.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from gnncore.sizes import format_size, parse_size
from gnncore_bench.limits import gnncore_command, run_limited

ROOT = Path(__file__).resolve().parents[1]

OLD_RUNNER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("old_store", sys.argv[1])
module = sys.modules["old_store"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module.write_partitioned_store(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]))
"""


def _inputs(args: argparse.Namespace) -> tuple[Path, Path]:
    """The graph and partition directories (generated under ``--work`` unless given)."""
    if args.graph is not None and args.partition is not None:
        return args.graph, args.partition
    graph, part = args.work / f"g{args.nodes}", args.work / f"p{args.parts}"
    synth = ["synth", graph, "--nodes", args.nodes, "--avg-degree", 10, "--classes", 8,
             "--features", args.features, "--memory-budget", "2GiB", "--no-progress"]  # fmt: skip
    partition = ["partition", graph, part, "--method", "random", "--parts", args.parts,
                 "--no-progress"]  # fmt: skip
    for done, argv in ((graph, synth), (part, partition)):
        if not (done / "manifest.json").is_file():
            subprocess.run(gnncore_command(*map(str, argv)), check=True)
    return graph, part


def _command(mode: str, graph: Path, part: Path, out: Path, args: argparse.Namespace) -> list[str]:
    if mode == "new":
        summary = out.with_suffix(".json")
        argv = ["store", graph, part, out, "--memory-budget", args.budget, "--no-progress",
                "--static-fraction", args.static_fraction, "--json", summary]  # fmt: skip
        return gnncore_command(*map(str, argv))
    old = args.work / f"old_store_{args.old_rev[:12]}.py"
    text = subprocess.run(
        ["git", "-C", ROOT, "show", f"{args.old_rev}:gnncore/outofcore/store.py"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    old.write_text(text)
    return [sys.executable, "-c", OLD_RUNNER, str(old), str(graph), str(part), str(out),
            str(args.static_fraction)]  # fmt: skip


def _run(spec: str, graph: Path, part: Path, args: argparse.Namespace) -> dict[str, Any]:
    mode, _, limit = spec.partition("@")
    if mode not in ("old", "new"):
        raise SystemExit(f"--run {spec}: the mode is old or new")
    out = args.work / f"store-{mode}-{limit or 'unlimited'}"
    shutil.rmtree(out, ignore_errors=True)
    run = run_limited(
        _command(mode, graph, part, out, args),
        parse_size(limit) if limit else None,
        evict=[graph, part],
        timeout=args.timeout,
        capture_dir=args.work / "logs",
        capture_name=f"{mode}-{limit or 'unlimited'}",
    )
    result: dict[str, Any] = {"run": spec, "mode": mode, **run.to_dict()}
    manifest = out / "manifest.json"
    if run.ok and manifest.is_file():
        files = json.loads(manifest.read_text())["files"]
        result["sha256"] = {name: entry["sha256"] for name, entry in files.items()}
        result["store_bytes"] = sum(entry["bytes"] for entry in files.values())
    summary = out.with_suffix(".json")
    if summary.is_file():
        result["summary"] = json.loads(summary.read_text())
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--graph", type=Path, default=None)
    parser.add_argument("--partition", type=Path, default=None)
    parser.add_argument("--nodes", type=int, default=2_000_000)
    parser.add_argument("--features", type=int, default=256)
    parser.add_argument("--parts", type=int, default=16)
    parser.add_argument("--static-fraction", type=float, default=0.01)
    parser.add_argument("--budget", default="1GiB", help="the new writer's --memory-budget")
    parser.add_argument("--old-rev", default="0303da5", help="the commit of the old writer")
    parser.add_argument("--run", action="append", default=None, metavar="MODE[@LIMIT]")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--keep", action="store_true", help="keep the stores written")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    graph, part = _inputs(args)
    graph_files = {p.name: p.stat().st_size for p in graph.glob("*.npy")}
    results = [_run(spec, graph, part, args) for spec in args.run or ["old", "new@1GiB"]]
    digests = [r["sha256"] for r in results if "sha256" in r]
    report = {
        "graph": str(graph),
        "partition": str(part),
        "graph_bytes": sum(graph_files.values()),
        "features_bytes": graph_files.get("features.npy", 0),
        "budget": args.budget,
        "old_rev": args.old_rev,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        # None: fewer than two runs finished, nothing to compare.
        "same_bytes": all(d == digests[0] for d in digests) if len(digests) > 1 else None,
        "runs": results,
    }
    print(f"graph {graph}: {format_size(report['graph_bytes'])} "
          f"(features {format_size(report['features_bytes'])})")  # fmt: skip
    for r in results:
        peak = r.get("peak_rss_bytes")
        cgroup = r.get("peak_memory_bytes")
        print(
            f"{r['run']:>14}: exit {r['exit_code']}, {r['wall_seconds']:.1f} s, peak RSS "
            f"{format_size(peak) if peak else '?'}, cgroup peak "
            f"{format_size(cgroup) if cgroup else '-'}"
            f"{', OOM-killed' if r['killed_for_memory'] else ''}"
        )
    print(f"same bytes: {report['same_bytes']}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
