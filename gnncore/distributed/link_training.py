r"""Distributed link prediction: one rank per partition, the single-process link loop.

:func:`train_distributed_link` is :func:`~gnncore.distributed.training.train_distributed`
with :data:`LINK_TASK`: the same launch (torch's elastic launcher or
``spawn``, several machines, ``max_restarts``), the same MLflow run (opened by
the launching process, epochs logged by rank 0, parameters ``world_size``,
``partitioner``, ``ranks_dir``, ...) and checkpoints (written by rank 0, read
by every rank on ``resume``). Each rank runs :func:`run_link_rank`:
:func:`~gnncore.train.link.loop.train_link_predictor` over a
:class:`~gnncore.distributed.link_source.DistLinkSource`. The rank data holds
the link files (``write_rank_data(..., link=True)``), by default in
``<partition_dir>.link-ranks``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from gnncore.distributed.link_data import LINK_SPLITS
from gnncore.distributed.link_source import DistLinkSource, check_link_config
from gnncore.distributed.rank_data import RankData
from gnncore.distributed.training import (
    RankRun,
    RanksResult,
    RankTask,
    _rank_device,
    _rank_logger,
    _split_summary,
    distributed_summary,
    peak_rss_mb,
    train_distributed,
)
from gnncore.errors import InputError
from gnncore.train.link.config import LinkTrainConfig
from gnncore.train.link.loop import LinkTrainResult
from gnncore.train.link.models import LinkModel


def run_link_rank(rank: int, world: int, run: RankRun) -> dict[str, Any]:
    """Train this rank of a distributed link-prediction run (the group is
    initialised; :func:`~gnncore.distributed.training.run_rank` hands link
    configs here); returns plain values: the result fields, the per-rank
    figures and, on rank 0, the best epoch's weights as NumPy arrays."""
    from gnncore.train.core.checkpoint import CheckpointDir
    from gnncore.train.link.loop import train_link_predictor

    data = RankData.open(run.ranks_dir, rank)
    # _rank_device keeps the config's type (dataclasses.replace of its device).
    node_typed, device = _rank_device(cast(Any, run.config))
    config = cast(LinkTrainConfig, node_typed)
    source = DistLinkSource(data, config, device)
    checkpoints = (
        CheckpointDir(run.checkpoint_dir, keep=run.keep_checkpoints)
        if run.checkpoint_dir is not None
        else None
    )
    hook = run.on_epoch_end

    def on_epoch_end(epoch: int, path: Path | None) -> None:
        if hook is not None:
            hook(rank, epoch)

    # The same on every rank: what each rank owns of each split (count and crc).
    owned = [_split_summary(np.asarray(data.array(f"link_{s}")), None) for s in LINK_SPLITS]
    result = train_link_predictor(
        source.splits,
        config,
        feature_store=source.feature_store,
        logger=_rank_logger(run),
        progress=run.progress if rank == 0 else False,
        checkpoints=checkpoints,
        resume=run.resume,
        on_epoch_end=on_epoch_end,
        train_batches=source,
        eval_ranks=(source.ranker("val"), source.ranker("test")),
        fingerprint_data=owned,
    )
    out: dict[str, Any] = {
        "rank": rank,
        "fields": {f.name: getattr(result, f.name) for f in fields(result) if f.name != "model"},
        "train_ids": len(source.splits.train),
        "owned_train_ids": len(data.array("link_train")),
        "train_edges": int(source.edge_index.shape[1]),
        "batches_per_epoch": source.num_batches,
        "peak_rss_mb": peak_rss_mb(),
        **source.rank_report(),
    }
    if rank == 0:
        out["state_dict"] = {
            k: v.detach().cpu().numpy() for k, v in result.model.state_dict().items()
        }
    return out


@dataclass(kw_only=True)
class DistLinkTrainResult(LinkTrainResult):
    """:class:`~gnncore.train.link.loop.LinkTrainResult` of rank 0 (every rank
    has the same reduced metrics), with the world size, the rank-data directory
    and what each rank reported (``train_ids``: its training triples,
    ``batches_per_epoch``, ``peak_rss_mb``, its feature store's counters)."""

    world_size: int = 1
    ranks_dir: str = ""
    per_rank: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            **super().summary(),
            **distributed_summary(self, lambda f: {"test_mrr": f["test"].mrr}),
        }


@dataclass
class DistLinkRanksResult(RanksResult):
    """:class:`~gnncore.distributed.training.RanksResult` of link prediction:
    validation MRR and the test ranking metrics."""

    def metrics(self, fields: dict[str, Any]) -> dict[str, Any]:
        return {"val_mrr": fields["best_val_mrr"], **fields["test"].as_dict("test_")}


def default_link_ranks_dir(partition_dir: str | os.PathLike[str]) -> Path:
    """Where :func:`train_distributed_link` writes the rank data by default:
    ``<partition_dir>.link-ranks`` (beside node classification's ``.ranks``,
    so the two tasks never rewrite each other's folders)."""
    part = Path(partition_dir).absolute()
    return part.parent / f"{part.name}.link-ranks"


def _prepare(config: LinkTrainConfig | None, graph: Any) -> LinkTrainConfig:
    config = (config or LinkTrainConfig(model="sage")).validate()
    if not isinstance(config, LinkTrainConfig):
        raise TypeError(f"link prediction takes a LinkTrainConfig, not {type(config).__name__}")
    check_link_config(config, graph.manifest.num_features if graph.has("features") else 0)
    return config


def _write(graph_dir: Path, partition_dir: Path, out: Path, replication: Any) -> Path:
    from gnncore.distributed.rank_write import write_rank_data

    if replication is not None:
        raise InputError(
            "HDR replication is for node classification; link prediction fetches every "
            "remote row from its owner",
            Path(replication),
        )
    return write_rank_data(graph_dir, partition_dir, out, link=True)


def _main_result(
    ranks: list[dict[str, Any]], config: LinkTrainConfig, m: Any, world: int, ranks_dir: str
) -> DistLinkTrainResult:
    """Machine 0's result: rank 0's metrics and best weights."""
    main = ranks[0]
    info = RankData.open(ranks_dir, 0).info["link"]
    relations = int(info["num_relations"])
    reciprocal = config.reciprocal and not info["symmetric"]
    model = LinkModel(
        m.num_nodes,
        2 * relations if reciprocal else relations,
        config.dim,
        encoder=config.model,
        decoder=config.decoder,
        num_layers=max(config.num_layers, 1),
        in_channels=m.num_features,
        dropout=config.dropout,
        heads=config.heads,
    )
    model.load_state_dict({k: torch.from_numpy(v) for k, v in main["state_dict"].items()})
    for r in ranks:
        r.pop("state_dict", None)
    return DistLinkTrainResult(
        **{**main["fields"], "model": model.eval()},
        world_size=world,
        ranks_dir=ranks_dir,
        per_rank=ranks,
    )


def _run_params(
    config: LinkTrainConfig, graph: Any, ranks_dir: Path, checkpoint_dir: Any
) -> dict[str, Any]:
    info = RankData.open(ranks_dir, 0).info["link"]
    m = graph.manifest
    return {
        **config.to_params(),
        "dataset": m.name,
        "num_nodes": m.num_nodes,
        "num_relations": info["num_relations"],
        **{f"num_{s}_triples": info[f"num_{s}"] for s in LINK_SPLITS},
        "link_splits": info["source"],
        "checkpoint_dir": str(checkpoint_dir) if checkpoint_dir is not None else "none",
    }


def _log_outcome(logger: Any, result: Any, graph: Any) -> None:
    from gnncore.store import GraphDirFeatureStore
    from gnncore.train.record import link_curves, link_example_input, log_outcome

    example = link_example_input(result.model, GraphDirFeatureStore(graph), graph.num_nodes)
    log_outcome(logger, result, link_curves(result), example, graph)


#: Link prediction (:func:`train_distributed_link`).
LINK_TASK = RankTask(
    name="link",
    prepare=_prepare,
    write=_write,
    default_dir=default_link_ranks_dir,
    main_result=_main_result,
    ranks_result=DistLinkRanksResult,
    run_params=_run_params,
    log_outcome=_log_outcome,
)


def train_distributed_link(
    graph_dir: str | os.PathLike[str],
    partition_dir: str | os.PathLike[str],
    config: LinkTrainConfig | None = None,
    nproc: int | None = None,
    **options: Any,
) -> Any:
    """Train a link predictor with one rank per partition: every option of
    :func:`~gnncore.distributed.training.train_distributed` (``ranks_dir``,
    ``tracking``, ``checkpoint_dir``, ``resume``, ``launch``, ...), with the rank
    data's link files written into ``ranks_dir`` (default
    :func:`default_link_ranks_dir`). Needs node features and a GNN encoder
    (:func:`~gnncore.distributed.link_source.check_link_config`).

    Returns:
        :class:`DistLinkTrainResult` on machine 0, :class:`DistLinkRanksResult`
        on the others.
    """
    return train_distributed(graph_dir, partition_dir, config, nproc, task=LINK_TASK, **options)


__all__ = [
    "DistLinkRanksResult",
    "DistLinkTrainResult",
    "LINK_TASK",
    "default_link_ranks_dir",
    "run_link_rank",
    "train_distributed_link",
]
