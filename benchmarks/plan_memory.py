"""Peak memory and time of the HDR replication and placement planners on a big
generated graph, each run as its own ``gnncore plan`` process under a real
memory limit (issue 27: "the placement and HDR plans of a 50M-node graph are
computed under a 3 GiB limit").

The graph is ``--graph``, else generated under ``--work`` with ``gnncore synth
--nodes N --avg-degree D --features 4 --memory-budget 2GiB``; the partition the
replication plan builds on is ``--partition``, else ``gnncore partition
--method random``. Each planner runs through
:func:`gnncore_bench.limits.run_limited`: a cgroup v1 memory cgroup of
``--limit`` (page cache charged; the graph evicted from the page cache first),
so a planner that needs more is OOM-killed; without a cgroup (not root, no v1
controller) the run is measured unlimited and the report says so. Prints the
figures and writes them as JSON (``--out``)::

    .venv/bin/python benchmarks/plan_memory.py --work /tmp/planbench \\
        --nodes 50000000 --avg-degree 6 --limit 3GiB --out bench-out/plan_memory.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

from gnncore.sizes import format_size, parse_size
from gnncore_bench.limits import gnncore_command, run_limited


def _inputs(args: argparse.Namespace) -> tuple[Path, Path]:
    """The graph and partition directories (generated under ``--work`` unless given)."""
    graph = args.graph or args.work / f"g{args.nodes}"
    part = args.partition or args.work / f"{graph.name}-p{args.parts}"
    synth = ["synth", graph, "--nodes", args.nodes, "--avg-degree", args.avg_degree,
             "--classes", 4, "--features", 4, "--memory-budget", "2GiB",
             "--no-progress"]  # fmt: skip
    partition = ["partition", graph, part, "--method", "random", "--parts", args.parts,
                 "--no-progress"]  # fmt: skip
    for done, argv in ((graph, synth), (part, partition)):
        if not (done / "manifest.json").is_file():
            subprocess.run(gnncore_command(*map(str, argv)), check=True)
    return graph, part


def _run(
    name: str, argv: list[Any], out: Path, evict: list[Path], args: argparse.Namespace
) -> dict:
    summary = args.work / f"{name}.json"
    shutil.rmtree(out, ignore_errors=True)
    run = run_limited(
        gnncore_command(*map(str, [*argv, "--json", summary])),
        parse_size(args.limit) if args.limit else None,
        evict=[*evict],
        timeout=args.timeout,
        capture_dir=args.work / "logs",
        capture_name=name,
    )
    result: dict[str, Any] = {"planner": name, **run.to_dict()}
    if summary.is_file():
        report = json.loads(summary.read_text())
        metrics = report.get("metrics", {})
        result["metrics"] = {
            k: metrics[k]
            for k in ("seconds", "estimator_seconds", "placement_seconds", "cache_nodes",
                      "predicted_cost_max", "replicated_nodes", "memory_increase")
            if k in metrics
        }  # fmt: skip
    manifest = out / "manifest.json"
    if manifest.is_file():
        files = json.loads(manifest.read_text())["files"]
        result["plan_bytes"] = sum(entry["bytes"] for entry in files.values())
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--graph", type=Path, default=None)
    parser.add_argument("--partition", type=Path, default=None)
    parser.add_argument("--nodes", type=int, default=50_000_000)
    parser.add_argument("--avg-degree", type=float, default=6)
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--cache-fraction", type=float, default=0.1)
    parser.add_argument("--rate", type=float, default=0.01)
    parser.add_argument("--limit", default="3GiB", help="cgroup memory limit ('' for none)")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--keep", action="store_true", help="keep the plans written")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    graph, part = _inputs(args)
    manifest = json.loads((graph / "manifest.json").read_text())
    csr_bytes = sum((graph / f).stat().st_size for f in ("indptr.npy", "indices.npy"))
    hdr, placed = args.work / "plan-hdr", args.work / "plan-place"
    rep = ["plan", "replication", graph, part, hdr, "--rate", args.rate]
    place = ["plan", "placement", graph, placed, "--devices", args.devices,
             "--cache-fraction", args.cache_fraction, "--estimator", "spmv"]  # fmt: skip
    results = [
        _run("replication", rep, hdr, [graph, part], args),
        _run("placement", place, placed, [graph], args),
    ]
    report = {
        "graph": str(graph),
        "num_nodes": manifest["num_nodes"],
        "num_edges": manifest["num_edges"],
        "csr_bytes": csr_bytes,
        "limit": args.limit or None,
        "devices": args.devices,
        "cache_fraction": args.cache_fraction,
        "rate": args.rate,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "runs": results,
    }
    print(
        f"graph {graph}: {manifest['num_nodes']} nodes, {manifest['num_edges']} edges, "
        f"CSR {format_size(csr_bytes)}; limit {args.limit or 'none'}"
    )
    for r in results:
        peak, cgroup = r.get("peak_rss_bytes"), r.get("peak_memory_bytes")
        print(
            f"{r['planner']:>12}: exit {r['exit_code']}, {r['wall_seconds']:.1f} s, peak RSS "
            f"{format_size(peak) if peak else '?'}, cgroup peak "
            f"{format_size(cgroup) if cgroup else '-'}"
            f"{', OOM-killed' if r['killed_for_memory'] else ''}"
            f"{'' if r.get('limited') else ' (not limited: ' + str(r.get('reason')) + ')'}"
        )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
