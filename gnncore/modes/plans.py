"""The placement and replication plans a node-classification run reads, and the
samplers they bring (locality-aware sampling, HyDRA's pruned lists)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from gnncore.plan import PlacementPlan, ReplicationPlan
from gnncore.plan.sampling import (
    LasScaleAdapter,
    PruningCounter,
    locality_aware_sampler,
    pruned_sampler,
)
from gnncore.sampler.biased import ScaleController
from gnncore.store import GraphDir
from gnncore.train.node.config import ConfigError, NodeTrainConfig


def open_plans(
    graph: GraphDir,
    placement: str | os.PathLike[str] | None,
    replication: str | os.PathLike[str] | None,
) -> dict[str, tuple[Any, dict[str, Any]]]:
    """The plans a run uses, each checked against ``graph``, with the params that
    record it in the run (path, stage key, headline figures)."""
    plans: dict[str, tuple[Any, dict[str, Any]]] = {}
    if placement is not None:
        plan = PlacementPlan.open(placement, graph)
        info = plan.plan.info
        plans["placement"] = (
            plan,
            {
                "placement_plan": str(plan.plan.path),
                "placement_stage_key": info.get("stage_key", ""),
                "placement_devices": plan.devices,
                "placement_cache_nodes": int(info["metrics"]["cache_nodes"]),
            },
        )
    if replication is not None:
        rep = ReplicationPlan.open(replication, graph)
        info = rep.plan.info
        plans["replication"] = (
            rep,
            {
                "replication_plan": str(rep.plan.path),
                "replication_stage_key": info.get("stage_key", ""),
                "replication_rate": info["settings"]["rate"],
                "replication_memory_increase": info["metrics"]["memory_increase"],
            },
        )
    return plans


def locality_aware(
    graph: GraphDir, config: NodeTrainConfig, plans: dict[str, tuple[Any, dict[str, Any]]]
) -> tuple[Any | None, list[Any]]:
    """The training sampler and epoch adapters of locality-aware sampling
    (``config.locality_aware``) or HDR pruning (``config.hdr_part >= 0``); else
    ``(None, [])``: the default sampler."""
    if config.hdr_part >= 0:
        if "replication" not in plans:
            raise ConfigError("hdr_part needs a replication plan (replication=...)")
        pruned = pruned_sampler(
            np.asarray(graph.indptr),
            np.asarray(graph.indices),
            plans["replication"][0],
            config.hdr_part,
            config.fanouts,
            seed=config.seed,
        )
        return pruned, [PruningCounter(pruned)]
    if not config.locality_aware:
        return None, []
    if "placement" not in plans:
        raise ConfigError("locality_aware needs a placement plan (placement=...)")
    sampler = locality_aware_sampler(
        np.asarray(graph.indptr),
        np.asarray(graph.indices),
        plans["placement"][0],
        config.fanouts,
        seed=config.seed,
        set_size=config.las_set_size,
    )
    if config.las_fixed_scale:
        sampler.set_scale(config.las_fixed_scale)
        return sampler, []
    return sampler, [LasScaleAdapter(sampler, ScaleController(maxs=config.las_max_scale))]
