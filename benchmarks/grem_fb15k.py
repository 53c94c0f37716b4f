"""GREM on FB15k-237 against ALGORITHMS.md §1's reference rows and METIS.

Ingests ``../shared/datasets/FB15k-237`` (``format="kg"``) once per edge shuffle
(seeds 0, 1, 2; cached under ``--cache``, default ``/tmp/gnncore-bench/fb15k237``):
14,541 nodes (36 valid/test-only entities are isolated) and 210,946 undirected
pairs. For p in {2, 4, 8, 16, 32} it measures, as the mean over the shuffles,
the edge-cut fraction, the largest part over N/p and the seconds per run of

- GREM with passes 0 (the thesis' algorithm) and passes 3, at 10% and 1% chunks,
- streaming greedy (GREM without refinement) at 1% and 10% chunks,
- METIS recursive bisection (pymetis, the thesis' baseline),

checks them against the targets (reference rows, METIS gaps, greedy > GREM,
balance) and sweeps the chunk size (1, 2, 5, 10, 20%) at p = 2 for GREM passes
0, GREM passes 3 and greedy: the thesis' Fig. 4.3, with the expected cut of its
Eq. 4.1 (k0 from the METIS bisection) drawn for chunk x (greedy) and 2x
(refinement over two chunks). Writes ``grem_fb15k.json``, ``grem_fb15k.md`` and
``grem_fb15k_chunks.png`` into ``--out`` (default ``bench-out/grem_fb15k``).

    .venv/bin/python benchmarks/grem_fb15k.py [--out DIR] [--cache DIR] [--strict]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from gnncore.io import ingest
from gnncore.partition.base import Partitioner, PartitionOptions
from gnncore.partition.grem import GreedyPartitioner, GremPartitioner
from gnncore.partition.metis import MetisPartitioner
from gnncore.partition.metrics import max_part_size, partition_metrics
from gnncore.store import GraphDir

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO.parent / "shared" / "datasets" / "FB15k-237"
PARTS = (2, 4, 8, 16, 32)
SHUFFLES = (0, 1, 2)
SWEEP = (0.01, 0.02, 0.05, 0.10, 0.20)
IMBALANCE = 0.03

# ALGORITHMS.md §1, prototype reference rows (mean of 3 shuffles).
REFERENCE = {
    "grem-p0-10%": (0.118, 0.265, 0.373, 0.479, 0.588),
    "grem-p3-10%": (0.107, 0.236, 0.357, 0.467, 0.577),
    "grem-p0-1%": (0.216, 0.359, 0.476, 0.584, 0.686),
    "grem-p3-1%": (0.132, 0.259, 0.401, 0.524, 0.637),
    "greedy-1%": (0.467, 0.682, 0.777, 0.816, 0.837),
    "greedy-10%": (0.207, 0.359, 0.446, 0.532, 0.628),
    "metis-recursive": (0.106, 0.231, 0.350, 0.457, 0.570),
}


def variants() -> dict[str, Partitioner]:
    return {
        "grem-p0-10%": GremPartitioner(chunk=0.10, passes=0),
        "grem-p0-1%": GremPartitioner(chunk=0.01, passes=0),
        "grem-p3-10%": GremPartitioner(chunk=0.10, passes=3),
        "grem-p3-1%": GremPartitioner(chunk=0.01, passes=3),
        "greedy-1%": GreedyPartitioner(chunk=0.01),
        "greedy-10%": GreedyPartitioner(chunk=0.10),
        "metis-recursive": MetisPartitioner(recursive=True),
    }


def graphs(cache: Path) -> list[GraphDir]:
    """One graph directory per edge shuffle, ingested once and cached."""
    out = []
    for seed in SHUFFLES:
        path = cache / f"fb15k237-s{seed}"
        try:
            graph = GraphDir.open(path)
        except Exception:  # absent or stale: (re-)ingest
            cache.mkdir(parents=True, exist_ok=True)
            ingest(DATASET, path, format="kg", seed=seed)
            graph = GraphDir.open(path)
        out.append(graph)
    return out


def run(partitioner: Partitioner, graph: GraphDir, parts: int, seed: int) -> dict:
    start = time.perf_counter()
    labels = partitioner.assign(
        graph, PartitionOptions(parts=parts, seed=seed, imbalance=IMBALANCE)
    )
    seconds = time.perf_counter() - start
    m = partition_metrics(graph, np.asarray(labels, dtype=np.int64), parts)
    return {
        "cut": m.edge_cut_fraction,
        "max_part_ratio": m.max_part_ratio,
        "max_part": max(m.part_sizes),
        "seconds": seconds,
    }


def expected_cut(graph: GraphDir, sides: np.ndarray, x: float) -> float:
    """Thesis Eq. 4.1 as a fraction of the edges: each node decides from
    round(k·x) of its k neighbours drawn without replacement (ties count ½);
    k0 = its neighbours on its majority side under ``sides``."""
    from scipy.stats import hypergeom

    u, v = (np.asarray(graph.array("edges_shuffled"))[:, c].astype(np.int64) for c in (0, 1))
    n = graph.num_nodes
    same = sides[u] == sides[v]
    k = np.bincount(u, minlength=n) + np.bincount(v, minlength=n)
    k_same = np.bincount(u, weights=same, minlength=n) + np.bincount(v, weights=same, minlength=n)
    k0 = np.maximum(k_same, k - k_same).astype(np.int64)
    draws = np.rint(k * x).astype(np.int64)
    keep = k > 0
    k, k0, draws = k[keep], k0[keep], draws[keep]
    dist = hypergeom(k, k0, draws)
    half = draws / 2
    below = dist.cdf(np.ceil(half) - 1)  # Pr(k0' < draws/2)
    tie = np.where(draws % 2 == 0, dist.pmf(half.astype(np.int64)), 0.0)
    wrong = below + 0.5 * tie
    cut = (k - k0) * (1 - wrong) + k0 * wrong
    return float(cut.sum() / (2 * len(u)))


def machine() -> dict:
    mem = None
    try:
        with open("/proc/meminfo") as fh:
            mem = int(fh.readline().split()[1]) // 1024
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "affinity_cpus": len(os.sched_getaffinity(0)),
        "memory_mib": mem,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }


def checks(table: dict) -> list[dict]:
    """The targets of the GREM brief, each with its measured margin."""
    out = []
    mean = {name: [table[name][str(p)]["cut"] for p in PARTS] for name in table}
    for name, tol in (("grem-p0-10%", 0.015), ("grem-p0-1%", 0.015)):
        for p, got, ref in zip(PARTS, mean[name], REFERENCE[name]):
            out.append(
                {
                    "check": f"{name} p={p} within {tol * 100:g} pt of reference {ref}",
                    "value": round(got, 4),
                    "ok": bool(abs(got - ref) <= tol + 1e-12),
                }
            )
    for name, tol in (("grem-p3-10%", 0.02), ("grem-p3-1%", 0.08)):
        for p, got, metis in zip(PARTS, mean[name], mean["metis-recursive"]):
            out.append(
                {
                    "check": f"{name} p={p} within {tol * 100:g} pt of METIS ({metis:.3f})",
                    "value": round(got, 4),
                    "ok": bool(got - metis <= tol + 1e-12),
                }
            )
    for p, greedy, grem in zip(PARTS, mean["greedy-1%"], mean["grem-p0-1%"]):
        out.append(
            {
                "check": f"greedy-1% p={p} cuts more than grem-p0-1% ({grem:.3f})",
                "value": round(greedy, 4),
                "ok": bool(greedy > grem),
            }
        )
    for name in table:
        for p in PARTS:
            n = table[name][str(p)]["num_nodes"]
            limit = max_part_size(n, p, IMBALANCE) / (n / p)
            worst = table[name][str(p)]["max_part_ratio_max"]
            out.append(
                {
                    "check": f"{name} p={p} max part ratio <= {limit:.4f}",
                    "value": round(worst, 4),
                    "ok": bool(worst <= limit + 1e-12),
                }
            )
    return out


def plot(sweep: dict, theory: dict, metis_cut: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    xs = [c * 100 for c in SWEEP]
    styles = {
        "grem-p0": ("GREM, passes 0 (thesis)", "#4C72B0", "o"),
        "grem-p3": ("GREM, passes 3 (default)", "#55A868", "s"),
        "greedy": ("streaming greedy (fixed)", "#C44E52", "^"),
    }
    for key, (label, color, marker) in styles.items():
        ax.plot(
            xs, [sweep[key][str(c)] * 100 for c in SWEEP], marker=marker, color=color, label=label
        )
    ax.plot(
        xs,
        [theory["fixed"][str(c)] * 100 for c in SWEEP],
        linestyle=":",
        color="#C44E52",
        label="Eq. 4.1, fixed (x)",
    )
    ax.plot(
        xs,
        [theory["refined"][str(c)] * 100 for c in SWEEP],
        linestyle=":",
        color="#4C72B0",
        label="Eq. 4.1, refined (2x)",
    )
    ax.axhline(metis_cut * 100, color="black", linestyle="--", label="METIS (whole graph)")
    ax.set(
        xlabel="chunk size (% of edges)",
        ylabel="edges cut (%)",
        title="FB15k-237, p = 2 (mean of 3 shuffles)",
        xscale="log",
    )
    ax.set_xticks(xs, [f"{x:g}" for x in xs])
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(results: dict) -> str:
    table, sweep, theory = results["table"], results["sweep_p2"], results["theory_p2"]
    lines = [
        "# GREM on FB15k-237",
        "",
        f"{results['graph']['num_nodes']:,} nodes, {results['graph']['num_edges']:,} undirected "
        f"pairs; mean over edge shuffles {list(SHUFFLES)} (GREM/METIS seed = shuffle seed); "
        f"imbalance {IMBALANCE}. Edge-cut fraction (reference row of ALGORITHMS.md §1 in "
        "brackets).",
        "",
        "| variant | " + " | ".join(f"p={p}" for p in PARTS) + " |",
        "|---|" + "---|" * len(PARTS),
    ]
    for name in table:
        cells = []
        for p, ref in zip(PARTS, REFERENCE[name]):
            cells.append(f"{table[name][str(p)]['cut']:.3f} ({ref:.3f})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Largest part / (N/p) (max over shuffles; limit ceil(1.03·N/p)/(N/p)):",
        "",
        "| variant | " + " | ".join(f"p={p}" for p in PARTS) + " |",
        "|---|" + "---|" * len(PARTS),
    ]
    n = results["graph"]["num_nodes"]
    lines.append(
        "| limit | "
        + " | ".join(f"{max_part_size(n, p, IMBALANCE) / (n / p):.4f}" for p in PARTS)
        + " |"
    )
    for name in table:
        lines.append(
            f"| {name} | "
            + " | ".join(f"{table[name][str(p)]['max_part_ratio_max']:.4f}" for p in PARTS)
            + " |"
        )
    lines += [
        "",
        "Seconds per run (mean over shuffles; in-process, includes the seed):",
        "",
        "| variant | " + " | ".join(f"p={p}" for p in PARTS) + " |",
        "|---|" + "---|" * len(PARTS),
    ]
    for name in table:
        lines.append(
            f"| {name} | "
            + " | ".join(f"{table[name][str(p)]['seconds']:.3f}" for p in PARTS)
            + " |"
        )
    lines += [
        "",
        "Chunk-size sweep at p = 2 (thesis Fig. 4.3; `grem_fb15k_chunks.png`):",
        "",
        "| chunk | GREM passes 0 | GREM passes 3 | greedy | Eq. 4.1 fixed (x) | "
        "Eq. 4.1 refined (2x) |",
        "|---|---|---|---|---|---|",
    ]
    for c in SWEEP:
        lines.append(
            f"| {c * 100:g}% | {sweep['grem-p0'][str(c)]:.3f} | "
            f"{sweep['grem-p3'][str(c)]:.3f} | {sweep['greedy'][str(c)]:.3f} | "
            f"{theory['fixed'][str(c)]:.3f} | {theory['refined'][str(c)]:.3f} |"
        )
    lines += [
        "",
        f"METIS recursive, p = 2: {table['metis-recursive']['2']['cut']:.3f}.",
        "",
        "Checks:",
        "",
    ]
    for c in results["checks"]:
        lines.append(f"- {'PASS' if c['ok'] else 'FAIL'}: {c['check']}: {c['value']}")
    m = results["machine"]
    lines += [
        "",
        f"Machine: {m['affinity_cpus']} CPUs ({m['processor']}), "
        f"{(m['memory_mib'] or 0) / 1024:.0f} GiB RAM, {m['platform']}, "
        f"Python {m['python']}, NumPy {m['numpy']}; total {results['seconds']} s.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench-out/grem_fb15k"))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/gnncore-bench/fb15k237"))
    parser.add_argument("--strict", action="store_true", help="exit 1 if a check fails")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    gs = graphs(args.cache)

    table: dict[str, dict] = {}
    for name, partitioner in variants().items():
        table[name] = {}
        for p in PARTS:
            runs = [run(partitioner, g, p, seed) for g, seed in zip(gs, SHUFFLES)]
            table[name][str(p)] = {
                "cut": float(np.mean([r["cut"] for r in runs])),
                "cut_per_shuffle": [round(r["cut"], 5) for r in runs],
                "max_part_ratio_max": max(r["max_part_ratio"] for r in runs),
                "max_part": max(r["max_part"] for r in runs),
                "seconds": float(np.mean([r["seconds"] for r in runs])),
                "num_nodes": gs[0].num_nodes,
            }
        print(
            f"{name:16s} "
            + " ".join(f"{table[name][str(p)]['cut']:.3f}" for p in PARTS)
            + "   (ref "
            + " ".join(f"{r:.3f}" for r in REFERENCE[name])
            + ")",
            flush=True,
        )

    sweep: dict[str, dict] = {"grem-p0": {}, "grem-p3": {}, "greedy": {}}
    for c in SWEEP:
        for key, partitioner in (
            ("grem-p0", GremPartitioner(chunk=c, passes=0)),
            ("grem-p3", GremPartitioner(chunk=c, passes=3)),
            ("greedy", GreedyPartitioner(chunk=c)),
        ):
            sweep[key][str(c)] = float(
                np.mean([run(partitioner, g, 2, s)["cut"] for g, s in zip(gs, SHUFFLES)])
            )
        print(
            f"chunk {c * 100:4g}%: " + " ".join(f"{k} {sweep[k][str(c)]:.3f}" for k in sweep),
            flush=True,
        )
    metis_sides = MetisPartitioner(recursive=True).assign(gs[0], PartitionOptions(parts=2))
    theory = {
        "fixed": {str(c): expected_cut(gs[0], metis_sides, c) for c in SWEEP},
        "refined": {str(c): expected_cut(gs[0], metis_sides, min(2 * c, 1.0)) for c in SWEEP},
    }

    results = {
        "benchmark": "grem_fb15k",
        "graph": {
            "num_nodes": gs[0].num_nodes,
            "num_edges": gs[0].manifest.num_undirected_edges,
            "paths": [str(g.path) for g in gs],
        },
        "parts": list(PARTS),
        "shuffles": list(SHUFFLES),
        "imbalance": IMBALANCE,
        "reference": {k: list(v) for k, v in REFERENCE.items()},
        "table": table,
        "sweep_p2": sweep,
        "theory_p2": theory,
        "machine": machine(),
    }
    results["checks"] = checks(table)
    results["seconds"] = round(time.perf_counter() - t0, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "grem_fb15k.json").write_text(json.dumps(results, indent=2) + "\n")
    plot(sweep, theory, table["metis-recursive"]["2"]["cut"], args.out / "grem_fb15k_chunks.png")
    md = markdown(results)
    (args.out / "grem_fb15k.md").write_text(md)
    print(md)
    failed = [c for c in results["checks"] if not c["ok"]]
    return 1 if failed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
