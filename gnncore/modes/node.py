"""Node classification on a graph directory, in the mode of ``config.mode``:
the stores or batch source (:mod:`gnncore.modes.node_data`), the plans and their
samplers (:mod:`gnncore.modes.plans`), then training and its record."""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from gnncore.errors import InputError
from gnncore.modes.node_data import node_data
from gnncore.modes.plans import locality_aware, open_plans
from gnncore.modes.run import RunInputs, RunRecording, line_logger
from gnncore.plan.feature_store import PlacedFeatureStore
from gnncore.store import GraphDir
from gnncore.train.core.checkpoint import data_fingerprint, open_checkpoints
from gnncore.train.core.device import resolve_device
from gnncore.train.node.config import ConfigError, NodeTrainConfig
from gnncore.train.node.loop import NodeTrainResult
from gnncore.train.node.task import NodeTask
from gnncore.train.record import fit_recorded, node_run_params


def train_node_graph_dir(
    graph: GraphDir,
    config: NodeTrainConfig,
    inputs: RunInputs,
    run: RunRecording,
) -> NodeTrainResult:
    """:func:`~gnncore.modes.train_graph_dir` for node classification."""
    check_trainable(graph)
    m = graph.manifest
    data = node_data(graph, config, inputs.store, line_logger(run.progress))
    feature_store = data.feature_store
    plans = open_plans(graph, inputs.placement, inputs.replication)
    if plans and config.mode != "mmap":
        raise ConfigError(f"placement and replication plans need mode 'mmap', not {config.mode!r}")
    if "placement" in plans:
        if config.num_workers > 0:
            raise ConfigError(
                "placement: the placed feature store serves features in the training "
                "process; set num_workers to 0 (prefetch threads still overlap batches)"
            )
        feature_store = PlacedFeatureStore(
            feature_store, plans["placement"][0], device=resolve_device(config.device)
        )
    splits = {
        name: torch.from_numpy(np.array(graph.split(name), dtype=np.int64))
        for name in ("train", "val", "test")
    }
    checkpoints, previous = open_checkpoints(
        run.checkpoint_dir,
        run.resume,
        run.keep_checkpoints,
        config,
        lambda: data_fingerprint(list(splits.values()), m.num_classes, m.num_features),
    )
    sampler, adapters = locality_aware(graph, config, plans)
    task = NodeTask(
        feature_store,
        data.graph_store,
        tuple(splits.values()),
        m.num_classes,
        in_channels=m.num_features,
        sampler=sampler,
        epoch_adapters=adapters,
        eval_batches=data.eval_batches,
        eval_order=data.eval_order,
    )
    params = {
        **node_run_params(config, m, run.checkpoint_dir),
        **{f"num_{name}": len(split) for name, split in splits.items()},
        **{key: value for _, params in plans.values() for key, value in params.items()},
        **data.params,
    }
    return fit_recorded(
        task,
        config,
        contextlib.nullcontext(data.train_batches),
        run.hooks(checkpoints),
        run.record(graph, params, previous),
    )


def check_trainable(graph: GraphDir) -> None:
    """Raise :class:`~gnncore.errors.InputError` unless ``graph`` has what node
    classification reads: features, labels, two classes or more, and non-empty
    splits."""
    m = graph.manifest
    missing = [
        name
        for name in ("features", "labels", "train_idx", "val_idx", "test_idx")
        if not graph.has(name)
    ]
    if missing:
        raise InputError(
            f"node classification needs {', '.join(missing)}; the graph directory has none",
            graph.path,
        )
    if m.num_classes < 2:
        raise InputError(
            f"manifest says num_classes={m.num_classes}; node classification needs at least 2",
            graph.path,
        )
    for name in ("train", "val", "test"):
        if len(graph.split(name)) == 0:
            raise InputError(f"the {name} split is empty", graph.path / f"{name}_idx.npy")
