"""SANCUS full-graph training: broadcast bytes and test accuracy against always-broadcast.

For each graph and world size, partitions the graph with METIS (cached under
``--data``), writes the rank data, then starts the ranks **once** and trains
every (seed, staleness policy) configuration in that process group, one after
the other, through the same rank body as ``gnncore train --mode sancus``
(:func:`gnncore.distributed.rank.run_node_rank`). Per configuration it records
the test accuracy (the best validation epoch's weights), the embedding bytes
the ranks sent in training forward passes (``broadcast``), what the
``always`` policy sends over the same epochs, the gradient bytes sent back,
the evaluation and setup bytes, and the pairs skipped. The table compares
each policy with the ``always`` run of the same seed: bytes saved and the
test-accuracy difference, per seed and as a mean; and, within each run, the
bytes saved up to the best validation epoch (the weights kept), so that
savings made after the model was chosen do not flatter a policy.

Graphs:

* ``--cora``: ``../shared/datasets/planetoid/Cora`` ingested under ``--data``;
* ``--generated``: the 200,000-node, 1.06M-edge planted-partition graph of
  ``benchmarks/distributed.py`` (built there once and reused, 64 features,
  8 classes).

    .venv/bin/python benchmarks/sancus.py --cora --seeds 0,1,2 \\
        --set normalize_features=true --set hidden=16 --set dropout=0.5 \\
        --out bench-out/sancus-cora          # Kipf & Welling's Cora setting, 200 epochs
    .venv/bin/python benchmarks/sancus.py --generated --seeds 0,1,2 \\
        --policies always,epoch-fixed:1,variation:0.05 --generated-epochs 20 \\
        --out bench-out/sancus-generated     # GCN's defaults

Every run: model ``gcn``, early stopping off (``patience=0``), the
config's defaults unless ``--set FIELD=JSON`` says otherwise.

Writes ``sancus.json`` and ``sancus.md`` into ``--out``. Not part of the test
suite.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
DEFAULT_DATA = Path("/work/bench-data/sancus")
DEFAULT_POLICIES = "always,epoch-fixed:1,epoch-adaptive:1,variation:0.05,variation:0.1"


def cora_graph(data: Path) -> Path:
    """Cora's graph directory under ``data``, ingested once from the shared datasets."""
    from gnncore.io import ingest_versioned

    raw = SHARED / "datasets" / "planetoid" / "Cora"
    if not raw.is_dir():
        raise SystemExit(f"Cora's raw files are not at {raw}")
    return ingest_versioned(raw, data / "graphs", "cora", format="planetoid").path


def generated_graph() -> Path:
    """The 1.06M-edge graph of ``benchmarks/distributed.py`` (its defaults)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from distributed import DEFAULT_DATA as DIST_DATA
    from distributed import build_graph

    graph = DIST_DATA / "graph"
    build_graph(graph, 200_000, 64, 11.0, 8, 8, 0, 0.05, 0.02, 0.05)
    return graph


def parse_policies(text: str) -> list[tuple[str, float]]:
    """``always,epoch-fixed:1,variation:0.05`` -> ``[(policy, bound), ...]``."""
    out = []
    for item in filter(None, text.split(",")):
        name, _, bound = item.partition(":")
        out.append((name, float(bound or 0)))
    return out


def _rank_body(rank: int, world: int, ranks_dir: str, configs: list[Any]) -> list[dict]:
    """Every configuration in this spawned rank's process group, in order."""
    from gnncore.distributed.rank import RankRun, run_node_rank

    results = []
    for config in configs:
        started = time.perf_counter()
        out = run_node_rank(rank, world, RankRun(ranks_dir, config))
        out.pop("state_dict", None)
        out["fields"].pop("config", None)
        out["seconds"] = time.perf_counter() - started
        results.append(out)
    return results


def run_graph(
    name: str,
    graph: Path,
    data: Path,
    nproc: int,
    configs: list[Any],
    timeout: float,
    backend: str = "gloo",
) -> list[dict[str, Any]]:
    """Train ``configs`` on ``nproc`` ranks of a METIS partition of ``graph``."""
    from gnncore.distributed.launch import spawn_local
    from gnncore.distributed.rank_write import write_rank_data
    from gnncore.partition.run import partition_graph
    from gnncore.partition.store import PartitionDir
    from gnncore.store import GraphDir

    part = data / "work" / f"{name}-metis{nproc}"
    try:
        PartitionDir.open(part, GraphDir.open(graph))
    except Exception:  # absent or stale: (re)write it
        partition_graph(graph, part, method="metis", parts=nproc)
    ranks = data / "work" / f"{name}-metis{nproc}.ranks"
    write_rank_data(graph, part, ranks)
    per_rank = spawn_local(
        _rank_body, nproc, (str(ranks), configs), backend=backend, run_timeout=timeout
    )
    runs = []
    for i, config in enumerate(configs):
        ranks_out = [r[i] for r in per_rank]
        sancus = [r["sancus"] for r in ranks_out]
        fields = ranks_out[0]["fields"]

        def total(key: str, sancus: list[dict] = sancus) -> float:
            return float(sum(s[key] for s in sancus))

        # Up to the best epoch: the bytes that the weights kept had cost.
        kept = fields["throughput"][: fields["best_epoch"]]
        to_best = [sum(e[f"dist_{k}_bytes"] for e in kept) for k in ("broadcast", "always")]

        runs.append(
            {
                "graph": name,
                "nproc": nproc,
                "seed": config.seed,
                "staleness": config.staleness,
                "bound": sancus[0]["staleness_bound"],
                "test_accuracy": fields["test_accuracy"],
                "best_val_accuracy": fields["best_val_accuracy"],
                "best_epoch": fields["best_epoch"],
                "epochs": fields["stopped_epoch"],
                "broadcast_bytes": total("broadcast_bytes"),
                "always_bytes": total("always_bytes"),
                "saved_to_best_epoch": 1 - to_best[0] / to_best[1] if to_best[1] else 0.0,
                "grad_bytes": total("grad_bytes"),
                "eval_bytes": total("eval_bytes"),
                "setup_bytes": total("setup_bytes"),
                "control_bytes": total("control_bytes"),
                "sends": total("sends"),
                "skips": total("skips"),
                "halo_rows": [s["halo_rows"] for s in sancus],
                "core_rows": [s["core_rows"] for s in sancus],
                "exchange_s": [s["exchange_s"] for s in sancus],
                "seconds": max(r["seconds"] for r in ranks_out),
            }
        )
    return runs


def tabulate(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per (graph, world size, policy): bytes saved against the ``always`` run of
    the same seed and the test-accuracy difference, per seed and mean."""
    base = {(r["graph"], r["nproc"], r["seed"]): r for r in runs if r["staleness"] == "always"}
    rows: dict[tuple, list[dict]] = {}
    for r in runs:
        rows.setdefault((r["graph"], r["nproc"], r["staleness"], r["bound"]), []).append(r)
    table = []
    for (graph, nproc, policy, bound), group in rows.items():
        saved, delta = [], []
        for r in group:
            b = base.get((graph, nproc, r["seed"]))
            if b is None:
                continue
            # One rank broadcasts nothing, whatever the policy: nothing to save.
            sent = b["broadcast_bytes"]
            saved.append(1 - r["broadcast_bytes"] / sent if sent else 0.0)
            delta.append(r["test_accuracy"] - b["test_accuracy"])
        table.append(
            {
                "graph": graph,
                "nproc": nproc,
                "policy": policy if policy == "always" else f"{policy} {bound:g}",
                "seeds": [r["seed"] for r in group],
                "test_accuracy": [r["test_accuracy"] for r in group],
                "mean_accuracy": statistics.fmean(r["test_accuracy"] for r in group),
                "broadcast_mb": statistics.fmean(r["broadcast_bytes"] for r in group) / 2**20,
                "grad_mb": statistics.fmean(r["grad_bytes"] for r in group) / 2**20,
                "eval_mb": statistics.fmean(r["eval_bytes"] for r in group) / 2**20,
                "bytes_saved": saved,
                "mean_bytes_saved": statistics.fmean(saved) if saved else None,
                "accuracy_delta": delta,
                "mean_accuracy_delta": statistics.fmean(delta) if delta else None,
                "epochs": statistics.fmean(r["epochs"] for r in group),
                "best_epochs": [r["best_epoch"] for r in group],
                "mean_saved_to_best_epoch": statistics.fmean(
                    r["saved_to_best_epoch"] for r in group
                ),
                "seconds": statistics.fmean(r["seconds"] for r in group),
            }
        )
    return {"rows": table}


def markdown(table: dict[str, Any]) -> str:
    lines = [
        "| graph | ranks | staleness | test acc. per seed | mean | vs always (mean) "
        "| broadcast MB / run | saved vs always (per seed) | mean saved | best epochs "
        "| saved up to the best epoch | grad MB | eval MB | s / run |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table["rows"]:
        delta = r["mean_accuracy_delta"]
        saved = r["mean_bytes_saved"]
        lines.append(
            f"| {r['graph']} | {r['nproc']} | {r['policy']} | "
            + " / ".join(f"{a:.4f}" for a in r["test_accuracy"])
            + f" | {r['mean_accuracy']:.4f} | "
            + ("-" if delta is None else f"{delta:+.4f}")
            + f" | {r['broadcast_mb']:.2f} | "
            + " / ".join(f"{s:.1%}" for s in r["bytes_saved"])
            + " | "
            + ("-" if saved is None else f"{saved:.1%}")
            + " | "
            + " / ".join(str(e) for e in r["best_epochs"])
            + f" | {r['mean_saved_to_best_epoch']:.1%}"
            + f" | {r['grad_mb']:.2f} | {r['eval_mb']:.2f} | {r['seconds']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from gnncore.train import NodeTrainConfig

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cora", action="store_true")
    parser.add_argument("--generated", action="store_true")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--nproc", default="2")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--policies", default=DEFAULT_POLICIES, help="policy[:bound],...")
    parser.add_argument("--cora-epochs", type=int, default=200)
    parser.add_argument("--generated-epochs", type=int, default=50)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=JSON",
        help="a NodeTrainConfig field for every run, e.g. --set normalize_features=true",
    )
    parser.add_argument("--timeout", type=float, default=7200.0)
    parser.add_argument(
        "--device", default="cpu", help="cpu or cuda (GPUs shared by the ranks under gloo)"
    )
    parser.add_argument(
        "--backend", choices=("gloo", "nccl"), default=None, help="default: nccl on cuda"
    )
    parser.add_argument("--out", type=Path, default=Path("bench-out/sancus"))
    args = parser.parse_args(argv)
    if not (args.cora or args.generated):
        parser.error("choose --cora and/or --generated")
    args.data.mkdir(parents=True, exist_ok=True)
    graphs = []
    if args.cora:
        graphs.append(("cora", cora_graph(args.data), args.cora_epochs))
    if args.generated:
        graphs.append(("generated-1M", generated_graph(), args.generated_epochs))
    overrides = {k: json.loads(v) for k, _, v in (item.partition("=") for item in args.set)}
    overrides.setdefault("device", args.device)
    backend = args.backend or ("nccl" if args.device.startswith("cuda") else "gloo")
    base = NodeTrainConfig(model="gcn", mode="sancus", patience=0, **overrides)
    runs: list[dict[str, Any]] = []
    started = time.perf_counter()
    for name, graph, epochs in graphs:
        for nproc in [int(n) for n in args.nproc.split(",") if n]:
            configs = [
                replace(base, epochs=epochs, seed=seed, staleness=policy, staleness_bound=bound)
                for seed in [int(s) for s in args.seeds.split(",") if s]
                for policy, bound in parse_policies(args.policies)
            ]
            for c in configs:
                c.validate()
            print(f"{name}: {len(configs)} runs on {nproc} ranks", file=sys.stderr, flush=True)
            runs.extend(run_graph(name, graph, args.data, nproc, configs, args.timeout, backend))
    table = tabulate(runs)
    result = {
        "argv": sys.argv[1:] if argv is None else argv,
        "config": {k: v for k, v in base.to_dict().items() if k not in ("seed", "staleness")},
        "epochs": {name: epochs for name, _, epochs in graphs},
        "backend": backend,
        "seconds": time.perf_counter() - started,
        "runs": runs,
        **table,
    }
    result["markdown"] = markdown(table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sancus.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    (args.out / "sancus.md").write_text(result["markdown"] + "\n")
    print(result["markdown"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
