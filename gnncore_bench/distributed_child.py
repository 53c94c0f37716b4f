"""One configuration of ``gnncore bench distributed``, in its own process:
``python -m gnncore_bench.distributed_child SPEC_JSON RESULT_JSON`` (started by
:func:`gnncore_bench.distributed.bench_distributed`). It writes the rank data
when missing, starts the ranks and writes what they measured: ``train`` runs
:func:`~gnncore.distributed.training.train_distributed`, ``sample`` draws the
training batches with no model (:func:`sample_rank` on every rank).
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def node_config(spec: dict[str, Any]) -> Any:
    """The node-classification config every configuration of a spec trains with
    (``model``, ``fanouts``, ``batch_size``, ``epochs``, ``seed``, ``device``
    (default the CPU); no early stopping)."""
    from gnncore.train.node.config import NodeTrainConfig

    fanouts = tuple(int(f) for f in spec["fanouts"])
    return NodeTrainConfig(
        model=spec["model"],
        fanouts=fanouts,
        eval_fanouts=fanouts,
        batch_size=int(spec["batch_size"]),
        epochs=int(spec["epochs"]),
        seed=int(spec["seed"]),
        patience=0,
        device=spec.get("device", "cpu"),
        prefetch_workers=int(spec.get("prefetch_workers", 1)),
    ).validate()


def sample_rank(rank: int, world: int, ranks_dir: str, spec: dict[str, Any]) -> dict[str, Any]:
    """One rank of a ``sample`` run (the group is initialised): ``spec["epochs"]``
    epochs of this rank's training batches, sampled and gathered, no model."""
    import torch
    import torch.distributed as dist

    from gnncore.distributed.rank_data import RankData
    from gnncore.distributed.source.base import peak_rss_mb
    from gnncore.distributed.source.node import DistBatchSource

    data = RankData.open(ranks_dir, rank)
    source = DistBatchSource(data, node_config(spec), torch.device("cpu"))
    epochs = []
    for epoch in range(1, int(spec["epochs"]) + 1):
        dist.barrier()
        before = source.feature_store.stats.as_dict()
        started = time.perf_counter()
        source.start_epoch(epoch)
        with source.batches() as batches:
            for _ in batches:
                pass
        wall = time.perf_counter() - started
        after = source.feature_store.stats.as_dict()
        delta = {k: after[k] - before.get(k, 0.0) for k in after}
        figures = source.epoch_figures
        epochs.append(
            {
                "epoch_s": wall,
                "remote_rows": delta["remote_rows"],
                "local_rows": delta["local_rows"],
                "remote_bytes": delta["remote_bytes"],
                "sample_s": figures.sample_s,
                "exchange_s": figures.exchange_s,
                "batches": figures.batches,
            }
        )
    return {
        "rank": rank,
        "epochs": epochs,
        "train_ids": len(source.split_ids["train"]),
        "batches_per_epoch": source.num_batches,
        "peak_rss_mb": peak_rss_mb(),
    }


def _run_sample(spec: dict[str, Any]) -> dict[str, Any]:
    from gnncore.distributed.launch import spawn_local
    from gnncore.distributed.rank_write import write_rank_data

    world = int(spec["nproc"])
    ranks_dir = write_rank_data(
        spec["graph_dir"],
        spec["partition_dir"],
        spec["ranks_dir"],
        replication=spec.get("replication_dir"),
    )
    ranks = spawn_local(
        sample_rank,
        world,
        (str(ranks_dir), spec),
        timeout=float(spec["collective_timeout"]),
        run_timeout=float(spec["timeout"]),
    )
    per_epoch = []
    for e in range(int(spec["epochs"])):
        figures = [r["epochs"][e] for r in ranks]
        per_epoch.append(
            {
                "epoch_s": max(f["epoch_s"] for f in figures),
                "remote_rows": sum(f["remote_rows"] for f in figures),
                "local_rows": sum(f["local_rows"] for f in figures),
                "remote_bytes": sum(f["remote_bytes"] for f in figures),
                "sample_s": statistics.fmean(f["sample_s"] for f in figures),
                "exchange_s": statistics.fmean(f["exchange_s"] for f in figures),
                "compute_s": None,
                "stall_s": None,
                "per_rank_remote_rows": [f["remote_rows"] for f in figures],
            }
        )
    return {
        "per_epoch": per_epoch,
        "per_rank": [
            {k: r[k] for k in ("rank", "train_ids", "batches_per_epoch", "peak_rss_mb")}
            for r in ranks
        ],
        "test_accuracy": None,
        "best_val_accuracy": None,
    }


def _run_train(spec: dict[str, Any]) -> dict[str, Any]:
    from gnncore.distributed.training import DistributedConfig, train_distributed

    world = int(spec["nproc"])
    result = train_distributed(
        spec["graph_dir"],
        spec["partition_dir"],
        node_config(spec),
        DistributedConfig(
            nproc=world,
            ranks_dir=spec["ranks_dir"],
            replication=spec.get("replication_dir"),
            backend=spec.get("backend"),
            timeout=float(spec["collective_timeout"]),
            run_timeout=float(spec["timeout"]),
        ),
    )
    per_epoch = []
    for t in result.throughput:
        per_epoch.append(
            {
                "epoch_s": t["train_s"],
                "eval_s": t.get("eval_s"),
                "remote_rows": t["dist_remote_rows"],
                "local_rows": sum(t[f"rank{r}_local_rows"] for r in range(world)),
                "remote_bytes": t["dist_remote_bytes"],
                "sample_s": statistics.fmean(t[f"rank{r}_sample_s"] for r in range(world)),
                "exchange_s": statistics.fmean(t[f"rank{r}_exchange_s"] for r in range(world)),
                "compute_s": statistics.fmean(t[f"rank{r}_compute_s"] for r in range(world)),
                "stall_s": t.get("wait_s"),
                "per_rank_remote_rows": [t[f"rank{r}_remote_rows"] for r in range(world)],
            }
        )
    return {
        "per_epoch": per_epoch,
        "per_rank": [
            {k: r[k] for k in ("rank", "train_ids", "batches_per_epoch", "peak_rss_mb")}
            for r in result.per_rank
        ],
        "test_accuracy": result.test_accuracy,
        "best_val_accuracy": result.best_val_accuracy,
        "best_epoch": result.best_epoch,
    }


def run_config(spec: dict[str, Any]) -> dict[str, Any]:
    """One configuration, in this process (the child :func:`bench_distributed`
    starts): its figures per epoch and per rank."""
    started = time.perf_counter()
    out = _run_train(spec) if spec["mode"] == "train" else _run_sample(spec)
    out["wall_s"] = time.perf_counter() - started
    out["launcher_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gnncore_bench.distributed_child SPEC_JSON RESULT_JSON``: one configuration."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print(
            "usage: python -m gnncore_bench.distributed_child SPEC_JSON RESULT_JSON",
            file=sys.stderr,
        )
        return 2
    # Through the module's own name, not ``__main__``: the ranks unpickle
    # :func:`sample_rank` by it.
    from gnncore_bench import distributed_child as child

    spec = json.loads(Path(args[0]).read_text())
    out = child.run_config(spec)
    Path(args[1]).write_text(json.dumps(out, default=float) + "\n")
    return 0


__all__ = ["node_config", "run_config", "sample_rank"]


if __name__ == "__main__":
    raise SystemExit(main())
