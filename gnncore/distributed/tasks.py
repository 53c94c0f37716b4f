r"""What a distributed run does differently per task: :class:`RankTask`.

:func:`~gnncore.distributed.training.train_distributed` launches the ranks,
restarts them and opens the MLflow run the same way for every task; a
:class:`RankTask` says what differs: the config it takes, the rank data it
writes, the rank runner every rank process runs
(:mod:`gnncore.distributed.rank`), the result it builds and what it logs.
:data:`NODE_TASK` is node classification (the default), :data:`LINK_TASK` link
prediction.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gnncore.distributed.link_data import LINK_SPLITS
from gnncore.distributed.rank import RankRun, run_link_rank, run_node_rank
from gnncore.distributed.rank_data import RankData
from gnncore.distributed.rank_write import write_rank_data
from gnncore.distributed.results import (
    DistLinkRanksResult,
    DistLinkTrainResult,
    DistNodeRanksResult,
    DistNodeTrainResult,
)
from gnncore.distributed.source.link import check_link_config
from gnncore.errors import InputError
from gnncore.store import GraphDirFeatureStore
from gnncore.train.core.config import rank_mode
from gnncore.train.core.models import build_model
from gnncore.train.link.config import LinkTrainConfig
from gnncore.train.link.models import LinkModel
from gnncore.train.node.config import OUT_OF_CORE_MODES, ConfigError, NodeTrainConfig
from gnncore.train.record import (
    example_input,
    link_curves,
    link_example_input,
    log_outcome,
    node_run_params,
    training_curves,
)


@dataclass(frozen=True)
class RankTask:
    """What :func:`~gnncore.distributed.training.train_distributed` does
    differently per task; the launch, the restarts and the MLflow run are
    shared. Every field is a module-level function, so a task pickles to the
    rank processes by reference."""

    name: str
    #: ``(rank, world, RankRun) -> report``: what every rank process runs.
    run_rank: Callable[[int, int, RankRun], dict[str, Any]]
    #: ``(config or None, graph) -> config``: validated, refused (``ConfigError``,
    #: ``InputError``) when the ranks cannot train it on ``graph``.
    prepare: Callable[[Any, Any], Any]
    #: ``(graph_dir, partition_dir, out_dir, replication) -> out_dir``: write or reuse.
    write: Callable[[Path, Path, Path, Any], Path]
    #: ``partition_dir -> ranks_dir`` when none is given.
    default_dir: Callable[[Any], Path]
    #: ``(per_rank, config, graph manifest, world, ranks_dir) -> result`` on machine 0.
    main_result: Callable[[list[dict[str, Any]], Any, Any, int, str], Any]
    #: ``(world, node_rank, ranks_dir, per_rank, restarts) -> result`` elsewhere.
    ranks_result: Callable[[int, int, str, list[dict[str, Any]], int], Any]
    #: ``(config, graph, ranks_dir, checkpoint_dir) -> MLflow parameters``.
    run_params: Callable[[Any, Any, Path, Any], dict[str, Any]]
    #: ``(logger, result, graph)``: the curves and the model, at the end.
    log_outcome: Callable[[Any, Any, Any], None]


# Node classification ------------------------------------------------------------


def default_ranks_dir(partition_dir: str | os.PathLike[str]) -> Path:
    """Where node classification writes the rank data by default:
    ``<partition_dir>.ranks`` beside the partition directory."""
    part = Path(partition_dir).absolute()
    return part.parent / f"{part.name}.ranks"


def _prepare_node(config: NodeTrainConfig | None, graph: Any) -> NodeTrainConfig:
    config = rank_mode((config or NodeTrainConfig()).validate())
    if config.mode in OUT_OF_CORE_MODES:
        raise ConfigError(f"distributed training reads rank data, not mode {config.mode!r}")
    if config.locality_aware or config.hdr_part >= 0:
        raise ConfigError("distributed training samples uniformly (no locality-aware or HDR)")
    for name in ("features", "labels"):
        if not graph.has(name):
            raise InputError(f"node classification needs {name}; the graph has none", graph.path)
    return config


def _write_node(graph_dir: Path, partition_dir: Path, out: Path, replication: Any) -> Path:
    return write_rank_data(graph_dir, partition_dir, out, replication=replication)


def _node_result(
    ranks: list[dict[str, Any]], config: NodeTrainConfig, m: Any, world: int, ranks_dir: str
) -> DistNodeTrainResult:
    """Machine 0's result: rank 0's metrics and best weights."""
    main = ranks[0]
    model = build_model(
        config.model,
        m.num_features,
        config.hidden,
        m.num_classes,
        config.num_layers,
        config.dropout,
        heads=config.heads,
    )
    model.load_state_dict({k: torch.from_numpy(v) for k, v in main["state_dict"].items()})
    for r in ranks:
        r.pop("state_dict", None)
    return DistNodeTrainResult(
        model=model.eval(),
        **main["fields"],
        world_size=world,
        ranks_dir=ranks_dir,
        per_rank=ranks,
    )


def _node_params(
    config: NodeTrainConfig, graph: Any, ranks_dir: Path, checkpoint_dir: Any
) -> dict[str, Any]:
    return node_run_params(config, graph.manifest, checkpoint_dir)


def _log_node_outcome(logger: Any, result: Any, graph: Any) -> None:
    features = GraphDirFeatureStore(graph)
    example = example_input(features, graph.manifest.num_features)
    log_outcome(logger, result, training_curves(result), example, graph)


#: Node classification (:func:`~gnncore.distributed.training.train_distributed`'s default).
NODE_TASK = RankTask(
    name="node",
    run_rank=run_node_rank,
    prepare=_prepare_node,
    write=_write_node,
    default_dir=default_ranks_dir,
    main_result=_node_result,
    ranks_result=DistNodeRanksResult,
    run_params=_node_params,
    log_outcome=_log_node_outcome,
)


# Link prediction ------------------------------------------------------------------


def default_link_ranks_dir(partition_dir: str | os.PathLike[str]) -> Path:
    """Where link prediction writes the rank data by default:
    ``<partition_dir>.link-ranks`` (beside node classification's ``.ranks``,
    so the two tasks never rewrite each other's folders)."""
    part = Path(partition_dir).absolute()
    return part.parent / f"{part.name}.link-ranks"


def _prepare_link(config: LinkTrainConfig | None, graph: Any) -> LinkTrainConfig:
    config = rank_mode((config or LinkTrainConfig(model="sage")).validate())
    if not isinstance(config, LinkTrainConfig):
        raise TypeError(f"link prediction takes a LinkTrainConfig, not {type(config).__name__}")
    check_link_config(config, graph.manifest.num_features if graph.has("features") else 0)
    return config


def _write_link(graph_dir: Path, partition_dir: Path, out: Path, replication: Any) -> Path:
    if replication is not None:
        raise InputError(
            "HDR replication is for node classification; link prediction fetches every "
            "remote row from its owner",
            Path(replication),
        )
    return write_rank_data(graph_dir, partition_dir, out, link=True)


def _link_result(
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


def _link_params(
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


def _log_link_outcome(logger: Any, result: Any, graph: Any) -> None:
    example = link_example_input(result.model, GraphDirFeatureStore(graph), graph.num_nodes)
    log_outcome(logger, result, link_curves(result), example, graph)


#: Link prediction (:func:`~gnncore.distributed.training.train_distributed_link`).
LINK_TASK = RankTask(
    name="link",
    run_rank=run_link_rank,
    prepare=_prepare_link,
    write=_write_link,
    default_dir=default_link_ranks_dir,
    main_result=_link_result,
    ranks_result=DistLinkRanksResult,
    run_params=_link_params,
    log_outcome=_log_link_outcome,
)


__all__ = ["LINK_TASK", "NODE_TASK", "RankTask", "default_link_ranks_dir", "default_ranks_dir"]
