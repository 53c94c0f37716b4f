"""Train on a graph directory in one call, tracking the run (CLI and Dagster entry)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gnncore.errors import InputError
from gnncore.plots import curves_figure
from gnncore.store import GraphDir
from gnncore.train.core.checkpoint import (
    Checkpoint,
    CheckpointDir,
    check_resumable,
    data_fingerprint,
)
from gnncore.train.core.device import resolve_device
from gnncore.train.core.session import Progress
from gnncore.train.link.config import LinkTrainConfig
from gnncore.train.link.data import link_splits
from gnncore.train.link.loop import LinkTrainResult, train_link_predictor
from gnncore.train.link.models import LinkModel
from gnncore.train.node.config import ConfigError, NodeTrainConfig
from gnncore.train.node.loop import (
    EpochCallback,
    NodeTrainResult,
    copy_to_cpu,
    train_node_classifier,
)
from gnncore.train.spec import model_spec

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from gnncore.tracking import RunTracker

EXAMPLE_NODES = 4


def train_graph_dir(
    graph_dir: str | os.PathLike[str] | GraphDir,
    config: NodeTrainConfig | LinkTrainConfig | None = None,
    tracking: RunTracker | None = None,
    tags: Mapping[str, Any] | None = None,
    progress: Progress = True,
    run_name: str | None = None,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    resume: bool = False,
    keep_checkpoints: int = 2,
    on_epoch_end: EpochCallback | None = None,
    placement: str | os.PathLike[str] | None = None,
    replication: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
) -> NodeTrainResult | LinkTrainResult:
    r"""Train a node classifier (or, with a :class:`LinkTrainConfig`, a link
    predictor: :func:`train_link_predictor` on :func:`link_splits`) on a graph
    directory and (optionally) track it.

    Features and topology are read through
    :class:`~gnncore.store.GraphDirFeatureStore` and
    :class:`~gnncore.store.GraphDirGraphStore` (memory-mapped, never loaded
    whole). With ``tracking`` the run gets the parameters (config plus dataset
    name and counts), per-epoch ``train_loss`` / ``val_accuracy``, the final
    metrics, a ``curves.png`` artifact and the model; it ends ``FINISHED``, or
    ``FAILED`` when training raises (the exception propagates).

    With ``checkpoint_dir`` a checkpoint is written after every epoch; with
    ``resume`` training continues from the newest one (see
    :func:`~gnncore.train.train_node_classifier`). A resumed, tracked run is a
    new MLflow run tagged ``resumed_from_epoch`` and ``resumed_from_run_id``
    that re-logs the earlier epochs; the interrupted run, if its process died
    without closing it (``SIGKILL``, power loss), is marked ``FAILED`` then.

    Args:
        graph_dir (str or PathLike or GraphDir): A graph directory with
            features, labels, ``num_classes`` and train/val/test splits.
        config (NodeTrainConfig, optional): Hyper-parameters.
            (default: :obj:`NodeTrainConfig()`)
        tracking (RunTracker, optional): Where to log the run, e.g.
            :class:`gnncore.tracking.MlflowTracker`. (default: :obj:`None`)
        tags (Mapping, optional): Extra run tags (the Dagster asset passes
            ``dagster_run_id``). ``dataset``, ``task`` and ``model`` are
            always set. (default: :obj:`None`)
        progress (bool or callable, optional): Show tqdm bars (``True``), nothing
            (``False``), or call ``progress(line)`` once per epoch (e.g. a
            Dagster logger's ``info``). (default: :obj:`True`)
        run_name (str, optional): Run name; default ``"<dataset>-<model>"``.
            (default: :obj:`None`)
        checkpoint_dir (str or PathLike, optional): Per-epoch checkpoints go
            here, e.g. :func:`~gnncore.train.default_checkpoint_dir`. A fresh
            run removes older checkpoints in it once its own first checkpoint
            is written (one that fails before keeps them). (default: :obj:`None`)
        resume (bool, optional): Continue from the newest checkpoint in
            ``checkpoint_dir``, a fresh start when there is none; raises
            :class:`~gnncore.train.CheckpointError` (before any run is
            created) when it was written with other settings or data.
            (default: :obj:`False`)
        keep_checkpoints (int, optional): Newest checkpoints kept.
            (default: :obj:`2`)
        on_epoch_end (callable, optional): ``f(epoch, checkpoint_path)`` after
            each epoch. (default: :obj:`None`)
        placement (str or PathLike, optional): A placement plan of this graph
            (:func:`~gnncore.plan.plan_placement`): features are served through
            :class:`~gnncore.plan.feature_store.PlacedFeatureStore` as the
            plan's device 0 (same batches and results as without), and the
            per-tier read counts are logged per epoch. Node task only.
            (default: :obj:`None`)
        replication (str or PathLike, optional): A replication plan of this
            graph, checked and recorded with the run (its path, stage key and
            memory increase); with ``config.hdr_part >= 0`` training samples
            as that partition of it, remote lists pruned (HyDRA).
            (default: :obj:`None`)
        store (str or PathLike, optional): A partitioned store of this graph
            (:func:`~gnncore.outofcore.write_partitioned_store`), read by
            the out-of-core modes ``config.mode="hierbatching"`` and
            ``"partition_buffer"`` (:mod:`gnncore.train.modes`); the
            run logs the mode, the budget and the bytes read per epoch.
            (default: :obj:`None`)

    Returns:
        NodeTrainResult or LinkTrainResult: with ``run_id`` set when tracked.
    """
    from gnncore.train.modes import node_data

    config = (config or NodeTrainConfig()).validate()
    graph = graph_dir if isinstance(graph_dir, GraphDir) else GraphDir.open(graph_dir)
    graph.check_structure()  # corrupt arrays: one error naming the file, before training
    if isinstance(config, LinkTrainConfig):
        if placement is not None or replication is not None or store is not None:
            raise ConfigError(
                "placement and replication plans and partitioned stores apply to node training only"
            )
        return _train_link_graph_dir(
            graph,
            config,
            tracking,
            tags,
            progress,
            run_name,
            checkpoint_dir,
            resume,
            keep_checkpoints,
            on_epoch_end,
        )
    _check_trainable(graph)
    m = graph.manifest
    data = node_data(graph, config, store, _line_logger(progress))
    feature_store, graph_store = data.feature_store, data.graph_store
    plans = _open_plans(graph, placement, replication)
    if plans and config.mode != "mmap":
        raise ConfigError(f"placement and replication plans need mode 'mmap', not {config.mode!r}")
    if "placement" in plans:
        from gnncore.plan.feature_store import PlacedFeatureStore

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
    checkpoints, previous = _open_checkpoints(
        checkpoint_dir,
        resume,
        keep_checkpoints,
        config,
        lambda: data_fingerprint(
            [splits["train"], splits["val"], splits["test"]], m.num_classes, m.num_features
        ),
    )

    sampler, adapters = _locality_aware(graph, config, plans)

    def run(logger: Any) -> NodeTrainResult:
        return train_node_classifier(
            feature_store,
            graph_store,
            splits["train"],
            splits["val"],
            splits["test"],
            m.num_classes,
            config,
            logger=logger,
            progress=progress,
            in_channels=m.num_features,
            checkpoints=checkpoints,
            resume=resume,
            on_epoch_end=on_epoch_end,
            sampler=sampler,
            epoch_adapters=adapters,
            train_batches=data.train_batches,
            eval_batches=data.eval_batches,
        )

    if tracking is None:
        return run(None)

    with tracked_run(tracking, m.name, "node", config.model, tags, run_name, previous) as logger:
        logger.log_params(
            {
                **node_run_params(config, m, checkpoint_dir),
                "num_train": len(splits["train"]),
                "num_val": len(splits["val"]),
                "num_test": len(splits["test"]),
                **{key: value for _, params in plans.values() for key, value in params.items()},
                **data.params,
            }
        )
        result = run(logger)
        log_outcome(
            logger,
            result,
            training_curves(result),
            example_input(feature_store, m.num_features),
            graph,
        )
    return result


def node_run_params(
    config: NodeTrainConfig, manifest: Any, checkpoint_dir: str | os.PathLike[str] | None
) -> dict[str, Any]:
    """The parameters every tracked node-classification run logs, single-process
    or distributed: the config's, the dataset's sizes and the checkpoint
    directory (``"none"`` without one)."""
    return {
        **config.to_params(),
        "dataset": manifest.name,
        "num_nodes": manifest.num_nodes,
        "num_edges": manifest.num_edges,
        "num_features": manifest.num_features,
        "num_classes": manifest.num_classes,
        "checkpoint_dir": str(checkpoint_dir) if checkpoint_dir is not None else "none",
    }


def _line_logger(progress: Progress) -> Callable[[str], None] | None:
    """Where per-mega-batch lines go: the progress callable (a Dagster logger),
    above the bars on a terminal, or nowhere."""
    if callable(progress):
        return progress
    if progress:
        from tqdm import tqdm

        return tqdm.write
    return None


def _locality_aware(
    graph: GraphDir, config: NodeTrainConfig, plans: dict[str, tuple[Any, dict[str, Any]]]
) -> tuple[Any | None, list[Any]]:
    """The training sampler and epoch adapters of locality-aware sampling
    (``config.locality_aware``) or HDR pruning (``config.hdr_part >= 0``); else
    ``(None, [])``: the default sampler."""
    if config.hdr_part >= 0:
        if "replication" not in plans:
            raise ConfigError("hdr_part needs a replication plan (replication=...)")
        from gnncore.plan.sampling import PruningCounter, pruned_sampler

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
    from gnncore.plan.sampling import LasScaleAdapter, locality_aware_sampler
    from gnncore.sampler.biased import ScaleController

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


def _open_plans(
    graph: GraphDir,
    placement: str | os.PathLike[str] | None,
    replication: str | os.PathLike[str] | None,
) -> dict[str, tuple[Any, dict[str, Any]]]:
    """The plans a run uses, each checked against ``graph``, with the params that
    record it in the run (path, stage key, headline figures)."""
    from gnncore.plan import PlacementPlan, ReplicationPlan

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


def log_outcome(
    logger: Any,
    result: NodeTrainResult | LinkTrainResult,
    curves: Figure,
    input_example: Any,
    graph: GraphDir,
) -> None:
    """What every tracked training run ends with: the device tag, the curves
    figure and the model (with ``input_example``, and the spec that rebuilds
    it for layer-wise prediction and serving: :mod:`gnncore.train.spec`);
    sets ``result.model_uri`` and ``result.run_id``."""
    logger.set_tags({"device": result.device})
    logger.log_figure(curves, "curves.png")
    model = copy_to_cpu(result.model)
    metrics = (
        {"test_mrr": result.test.mrr}
        if isinstance(result, LinkTrainResult)
        else {"test_accuracy": result.test_accuracy}
    )
    result.model_uri = logger.log_model(
        model,
        name="model",
        input_example=input_example,
        spec=model_spec(model, result.config, graph, metrics),
    )
    result.run_id = logger.run_id


def _open_checkpoints(
    checkpoint_dir: str | os.PathLike[str] | None,
    resume: bool,
    keep: int,
    config: Any,
    fingerprint: Callable[[], dict[str, Any]],
) -> tuple[CheckpointDir | None, Checkpoint | None]:
    """The run's checkpoint directory and, with ``resume``, its newest
    checkpoint, refused (before any run is created) when it was written by
    another configuration or other data (``fingerprint()``)."""
    if resume and checkpoint_dir is None:
        raise ConfigError("resume needs a checkpoint directory (checkpoint_dir=...)")
    checkpoints = None if checkpoint_dir is None else CheckpointDir(checkpoint_dir, keep=keep)
    previous = checkpoints.latest() if (resume and checkpoints is not None) else None
    if previous is not None:
        check_resumable(previous, config, fingerprint())
    return checkpoints, previous


@contextlib.contextmanager
def tracked_run(
    tracking: RunTracker,
    dataset: str,
    task: str,
    model: str,
    tags: Mapping[str, Any] | None,
    run_name: str | None,
    previous: Checkpoint | None,
) -> Iterator[Any]:
    """Start the run (tagged with dataset, task, model and the checkpoint it
    resumes from, if any) and close the run a killed process left open."""
    all_tags = {"dataset": dataset, "task": task, "model": model, **(tags or {})}
    previous_run = previous.state.get("run_id") if previous is not None else None
    if previous is not None:
        all_tags["resumed_from_epoch"] = previous.epoch
        if previous_run:
            all_tags["resumed_from_run_id"] = previous_run
    with tracking.start_run(run_name or f"{dataset}-{model}", all_tags) as logger:
        if previous is not None and previous_run:
            _close_abandoned_run(tracking, str(previous_run), logger.run_id, previous.epoch)
        yield logger


def _train_link_graph_dir(
    graph: GraphDir,
    config: LinkTrainConfig,
    tracking: RunTracker | None,
    tags: Mapping[str, Any] | None,
    progress: Progress,
    run_name: str | None,
    checkpoint_dir: str | os.PathLike[str] | None,
    resume: bool,
    keep_checkpoints: int,
    on_epoch_end: EpochCallback | None,
) -> LinkTrainResult:
    """:func:`train_graph_dir` for link prediction."""
    from gnncore.store import GraphDirFeatureStore

    m = graph.manifest
    splits = link_splits(graph)
    feature_store: Any = GraphDirFeatureStore(graph)
    if config.mode == "in_memory" and graph.features() is not None:
        from gnncore.store.feature_store import TensorFeatureStore

        feature_store = TensorFeatureStore({"x": torch.from_numpy(np.array(graph.features()))})
    checkpoints, previous = _open_checkpoints(
        checkpoint_dir,
        resume,
        keep_checkpoints,
        config,
        lambda: data_fingerprint(
            splits.tensors(), splits.num_relations, m.num_features if config.model != "none" else 0
        ),
    )

    def run(logger: Any) -> LinkTrainResult:
        with _link_batches(splits, config, checkpoint_dir, progress) as batches:
            return train_link_predictor(
                splits,
                config,
                feature_store=feature_store,
                logger=logger,
                progress=progress,
                checkpoints=checkpoints,
                resume=resume,
                on_epoch_end=on_epoch_end,
                train_batches=batches,
            )

    if tracking is None:
        return run(None)
    with tracked_run(
        tracking,
        m.name,
        "link",
        config.model,
        tags,
        run_name or f"{m.name}-link-{config.model}-{config.decoder}",
        previous,
    ) as logger:
        logger.log_params(
            {
                **config.to_params(),
                "dataset": m.name,
                "num_nodes": m.num_nodes,
                "num_relations": splits.num_relations,
                "num_train_triples": len(splits.train),
                "num_val_triples": len(splits.val),
                "num_test_triples": len(splits.test),
                "link_splits": splits.source,
                "checkpoint_dir": str(checkpoint_dir) if checkpoint_dir is not None else "none",
            }
        )
        result = run(logger)
        log_outcome(
            logger,
            result,
            link_curves(result),
            link_example_input(result.model, feature_store, m.num_nodes),
            graph,
        )
    return result


@contextlib.contextmanager
def _link_batches(
    splits: Any,
    config: LinkTrainConfig,
    checkpoint_dir: str | os.PathLike[str] | None,
    progress: Progress,
) -> Iterator[Any]:
    """The partition buffer of ``mode="partition_buffer"`` (its tables in
    ``<checkpoint_dir>.partition-buffer`` beside the checkpoints, or in a
    temporary directory; removed afterwards), else ``None`` (the loop's own
    loader)."""
    if config.mode != "partition_buffer":
        yield None
        return
    import shutil
    import tempfile

    from gnncore.outofcore.link_buffer import link_buffer_source

    if checkpoint_dir is not None:
        # Beside the checkpoints (on the data root's disk; /tmp may be in memory),
        # under one name per checkpoint directory: what a killed run left there is
        # replaced (a resumed run restores the tables from its checkpoint's
        # snapshot, never from these live files).
        checkpoints = Path(checkpoint_dir).absolute()
        work = checkpoints.parent / f"{checkpoints.name}.partition-buffer"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
    else:
        work = Path(tempfile.mkdtemp(prefix="partition-buffer-"))
    source = link_buffer_source(splits, config, work, _line_logger(progress))
    try:
        yield source
    finally:
        source.close()


def link_example_input(
    model: LinkModel, feature_store: Any, num_nodes: int
) -> tuple[torch.Tensor, ...]:
    """A tiny ``(n_id, edge_index)`` -- plus ``x`` when the model reads node
    features -- for exporting a :class:`LinkModel` (shapes and dtypes matter)."""
    count = max(2, min(EXAMPLE_NODES, num_nodes))
    n_id = torch.arange(count) % max(num_nodes, 1)
    src = torch.arange(count)
    edge_index = torch.stack([src, (src + 1) % count])
    if model.embedding is not None:
        return n_id, edge_index
    x = feature_store.get_tensor(group_name=None, attr_name="x", index=n_id).float()
    return n_id, edge_index, x


def link_curves(result: LinkTrainResult) -> Figure:
    """Training loss and validation MRR / Hits@10 per epoch, best epoch marked."""
    return curves_figure(
        result.train_loss,
        {"validation MRR": result.val_mrr, "validation Hits@10": result.val_hits10},
        result.best_epoch,
        ("test MRR", result.test.mrr),
        "filtered ranking",
        "MRR / Hits@10",
        "upper left",
        f"{result.config.model} + {result.config.decoder}: best val MRR "
        f"{result.best_val_mrr:.3f}, test MRR {result.test.mrr:.3f}",
    )


def _close_abandoned_run(tracking: RunTracker, run_id: str, resumed_by: str, epoch: int) -> None:
    """Mark ``run_id`` ``FAILED`` if it is still ``RUNNING``: its process died
    without ending it (an exception ends a run itself)."""
    from gnncore.tracking import FAILED, RUNNING

    if tracking.run_status(run_id) == RUNNING:
        tracking.end_run(
            run_id,
            FAILED,
            tags={
                "error": "the training process ended without closing this run (killed?); "
                f"resumed from its epoch-{epoch} checkpoint in run {resumed_by}",
                "resumed_in_run_id": resumed_by,
            },
        )


def _check_trainable(graph: GraphDir) -> None:
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


def example_input(feature_store: Any, num_features: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A tiny ``(x, edge_index)`` for exporting a model: the features of the first
    few nodes joined in a directed ring (only shapes and dtypes matter)."""
    size = feature_store.get_tensor_size(group_name=None, attr_name="x")
    count = min(EXAMPLE_NODES, int(size[0])) if size is not None else 0
    if count >= 2:
        x = feature_store.get_tensor(
            group_name=None, attr_name="x", index=torch.arange(count)
        ).float()
    else:
        count, x = EXAMPLE_NODES, torch.zeros(EXAMPLE_NODES, num_features)
    src = np.arange(count)
    edge_index = torch.from_numpy(np.stack([src, (src + 1) % count]).astype(np.int64))
    return x, edge_index


def training_curves(result: NodeTrainResult) -> Figure:
    """Training loss and validation accuracy (and macro-F1) per epoch, best epoch marked.

    Built on :class:`matplotlib.figure.Figure` with the Agg canvas, so no GUI
    backend or pyplot global state is involved.
    """
    return curves_figure(
        result.train_loss,
        {"validation": result.val_accuracy, "validation macro-F1": result.val_macro_f1},
        result.best_epoch,
        ("test", result.test_accuracy),
        "accuracy",
        "accuracy / F1",
        "lower right",
        f"{result.config.model}: best val {result.best_val_accuracy:.3f}, "
        f"test {result.test_accuracy:.3f}",
    )
