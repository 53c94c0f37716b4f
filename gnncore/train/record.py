"""Recording a training run: what a tracked run logs once training has computed.

Training computes (:func:`~gnncore.train.fitting.fit`); the run is recorded here, in one
place, for every entry point (single process, out of core, distributed): the run
and its tags (:func:`tracked_run`), the parameters (:func:`node_run_params`,
:func:`link_run_params`), and the outcome (:func:`log_outcome`: the curves
figure, the model with an input example and its spec).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch

from gnncore.plots import curves_figure
from gnncore.tracking import FAILED, RUNNING, RunTracker
from gnncore.train.core.batches import BatchSource
from gnncore.train.core.checkpoint import Checkpoint
from gnncore.train.fitting import RunHooks, Task, fit
from gnncore.train.link.loop import LinkTrainResult
from gnncore.train.link.models import LinkModel
from gnncore.train.node.config import NodeTrainConfig
from gnncore.train.node.loop import NodeTrainResult, copy_to_cpu
from gnncore.train.spec import model_spec
from gnncore.usage import budget_figures, peak_held_bytes, peak_rss_bytes

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from gnncore.store import GraphDir

EXAMPLE_NODES = 4
R = TypeVar("R", NodeTrainResult, LinkTrainResult)


@dataclass(frozen=True)
class Recording:
    """Where and how a training run is recorded: the tracker, the graph it
    trains on, the run's parameters, extra tags, its name and the checkpoint it
    resumes (:func:`tracked_run`)."""

    tracking: RunTracker
    graph: GraphDir
    params: dict[str, Any]
    tags: Mapping[str, Any] | None = None
    run_name: str | None = None
    previous: Checkpoint | None = None


def fit_recorded(
    task: Task[R],
    config: Any,
    source: contextlib.AbstractContextManager[BatchSource | None],
    hooks: RunHooks,
    recording: Recording | None,
) -> R:
    """Compute, then record: :func:`~gnncore.train.fitting.fit` of ``task`` on the
    batches ``source`` yields (open for the call only), and with ``recording``
    the run around it: its parameters before training (a run that fails has
    them, and ends ``FAILED``), then the outcome (:func:`log_outcome`: curves,
    model, input example and spec)."""
    if recording is None:
        with source as batches:
            return fit(task, config, batches, hooks)
    m = recording.graph.manifest
    with tracked_run(
        recording.tracking,
        m.name,
        task.name,
        config.model,
        recording.tags,
        recording.run_name,
        recording.previous,
    ) as logger:
        logger.log_params(recording.params)
        with source as batches:
            result = fit(task, config, batches, dataclasses.replace(hooks, logger=logger))
        if isinstance(result, LinkTrainResult):
            curves = link_curves(result)
            example = link_example_input(result.model, task.feature_store, m.num_nodes)
        else:
            curves = training_curves(result)
            example = example_input(task.feature_store, m.num_features)
        log_outcome(logger, result, curves, example, recording.graph)
    return result


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


def _close_abandoned_run(tracking: RunTracker, run_id: str, resumed_by: str, epoch: int) -> None:
    """Mark ``run_id`` ``FAILED`` if it is still ``RUNNING``: its process died
    without ending it (an exception ends a run itself)."""
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
        "checkpoint_dir": _checkpoint_param(checkpoint_dir),
    }


def link_run_params(
    config: Any, manifest: Any, splits: Any, checkpoint_dir: str | os.PathLike[str] | None
) -> dict[str, Any]:
    """The parameters a tracked single-process link-prediction run logs: the
    config's, the dataset's sizes, the splits and the checkpoint directory."""
    return {
        **config.to_params(),
        "dataset": manifest.name,
        "num_nodes": manifest.num_nodes,
        "num_relations": splits.num_relations,
        "num_train_triples": len(splits.train),
        "num_val_triples": len(splits.val),
        "num_test_triples": len(splits.test),
        "link_splits": splits.source,
        "checkpoint_dir": _checkpoint_param(checkpoint_dir),
    }


def _checkpoint_param(checkpoint_dir: str | os.PathLike[str] | None) -> str:
    return str(checkpoint_dir) if checkpoint_dir is not None else "none"


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
    evaluation = getattr(result, "evaluation", {})  # node runs: how val and test were evaluated
    logger.set_tags(
        {"device": result.device, **{f"evaluation_{k}": v for k, v in evaluation.items()}}
    )
    logger.log_metrics(memory_metrics(result.config))
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


def memory_metrics(config: Any) -> dict[str, float]:
    """The run's peak RSS so far (``peak_rss_bytes``) and, when the config holds a
    memory budget (the whole process's: ``--memory-budget`` or the one mode auto
    handed on), ``memory_budget_bytes`` and ``peak_rss_of_budget``, the names
    every stage's run and metadata use (:func:`gnncore.usage.budget_figures`), as
    floats."""
    try:
        budget = config.memory_budget_bytes
    except (AttributeError, ValueError):  # no budget field, or "auto" not resolved
        budget = None
    figures = budget_figures(peak_rss_bytes(), budget, peak_held_bytes())
    return {name: float(value) for name, value in figures.items()}
