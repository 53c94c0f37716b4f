r"""The pieces of node classification that :class:`~gnncore.train.node.task.NodeTask`
assembles: the result and the per-epoch progress, the loaders, the forward pass
(trimmed per hop), the training step and :func:`evaluate` (accuracy and
macro-F1 from a confusion matrix summed on the device).

Metrics go to an optional run logger (:class:`gnncore.tracking.RunLogger`);
MLflow is not imported here. On a CPU, with ``num_workers=0``, a resumed run
ends with exactly the parameters of an uninterrupted one: the checkpoint
carries the model, the optimiser, and every random state an epoch draws from
(dropout, shuffling, the samplers' batch counters).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch_geometric.data import FeatureStore, GraphStore
from torch_geometric.loader import NodeLoader
from torch_geometric.sampler import BaseSampler

from gnncore.sampler.biased import edge_weight_of
from gnncore.train.core.models import supports_trimming
from gnncore.train.core.prefetch import Prefetcher
from gnncore.train.core.session import (
    EpochProgress,
    TrainResult,
    run_summary,
)
from gnncore.train.core.steps import OptimizerStep, autocast, normalize_rows
from gnncore.train.core.throughput import EpochTimer
from gnncore.train.node.config import NodeTrainConfig
from gnncore.train.node.metrics import ClassificationMetrics, confusion_matrix

Index = torch.Tensor


@dataclass(kw_only=True)
class NodeTrainResult(TrainResult):
    """What :func:`~gnncore.train.fit` of a :class:`~gnncore.train.NodeTask` returns:
    the shared :class:`~gnncore.train.core.session.TrainResult` fields (``model`` holds the
    weights of the highest validation accuracy), plus ``val_accuracy[e - 1]``
    and ``val_macro_f1[e - 1]`` of epoch ``e``, the best epoch's validation
    figures and the test accuracy and macro-F1; ``evaluation``: how validation
    and test were evaluated (``"val"``/``"test"`` -> layer-wise or sampled, and
    why; empty when no evaluation was set up here, e.g. a resumed-to-the-end run)."""

    config: NodeTrainConfig
    val_accuracy: list[float]
    best_val_accuracy: float
    test_accuracy: float
    val_macro_f1: list[float] = field(default_factory=list)
    best_val_macro_f1: float = 0.0
    test_macro_f1: float = 0.0
    evaluation: dict[str, str] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """JSON-friendly scalars (no model); ``throughput`` is the mean per epoch."""
        return {
            "model": self.config.model,
            "epochs": self.config.epochs,
            "stopped_epoch": self.stopped_epoch,
            "early_stopped": self.early_stopped,
            "best_epoch": self.best_epoch,
            "val_accuracy": self.best_val_accuracy,
            "val_macro_f1": self.best_val_macro_f1,
            "test_accuracy": self.test_accuracy,
            "test_macro_f1": self.test_macro_f1,
            "evaluation": dict(self.evaluation),
            **run_summary(self),
        }


@dataclass
class NodeProgress(EpochProgress):
    """Progress of node classification: validation accuracy and macro-F1."""

    val_accuracy: list[float] = field(default_factory=list)
    val_macro_f1: list[float] = field(default_factory=list)
    best_val_accuracy: float = -1.0
    best_val_macro_f1: float = 0.0

    def record(
        self,
        epoch: int,
        loss: float,
        val: ClassificationMetrics,
        throughput: dict[str, float],
        model: torch.nn.Module,
    ) -> None:
        improved = val.accuracy > self.best_val_accuracy
        self.val_accuracy.append(val.accuracy)
        self.val_macro_f1.append(val.macro_f1)
        if improved:
            self.best_val_accuracy, self.best_val_macro_f1 = val.accuracy, val.macro_f1
        self.advance(epoch, loss, throughput, improved, model)

    def epoch_metrics(self, epoch: int) -> dict[str, float]:
        """What the logger receives for ``epoch`` (1-based)."""
        i = epoch - 1
        return {
            "train_loss": self.train_loss[i],
            "val_accuracy": self.val_accuracy[i],
            "val_macro_f1": self.val_macro_f1[i],
            **self.throughput[i],
        }


# Helpers ---------------------------------------------------------------------


def as_index(nodes: Any) -> Index:
    index = torch.as_tensor(nodes).reshape(-1)
    if index.dtype == torch.bool:
        index = index.nonzero().reshape(-1)
    return index.to(torch.long)


class EdgeWeightNodeLoader(NodeLoader):
    """A :class:`~torch_geometric.loader.NodeLoader` for samplers whose outputs carry
    per-edge weights (:func:`gnncore.sampler.biased.edge_weight_of`): each batch
    gets them as ``edge_weight``, aligned with ``edge_index``."""

    def filter_fn(self, out: Any) -> Any:
        data = super().filter_fn(out)
        weight = edge_weight_of(out)
        if weight is not None:
            data.edge_weight = weight
        return data


def make_loader(
    data: tuple[FeatureStore, GraphStore],
    sampler: BaseSampler,
    nodes: Index,
    batch_size: int,
    config: NodeTrainConfig,
    device: torch.device,
    generator: torch.Generator | None = None,
) -> NodeLoader:
    shuffle = generator is not None
    workers = config.num_workers
    loader_cls = (
        EdgeWeightNodeLoader if getattr(sampler, "carries_edge_weight", False) else NodeLoader
    )
    return loader_cls(
        data=data,
        node_sampler=sampler,
        input_nodes=nodes,
        batch_size=batch_size,
        shuffle=shuffle,
        generator=generator,
        num_workers=workers,
        persistent_workers=workers > 0,
        pin_memory=device.type == "cuda",
    )


def _forward(model: torch.nn.Module, batch: Any, normalize_features: bool = False) -> torch.Tensor:
    """Seed-node logits.

    Layer ``i`` is trimmed to the hops it still needs when the model allows it
    (:func:`~gnncore.train.core.models.supports_trimming`) and the sampler reported
    one hop per layer (edges emitted hop by hop). A wrapper such as
    :class:`~torch.nn.parallel.DistributedDataParallel` is asked about the
    model it wraps (``.module``).
    """
    x = batch.x
    if normalize_features:
        x = normalize_rows(x)
    nodes, edges = batch.num_sampled_nodes, batch.num_sampled_edges
    inner = model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model
    num_layers = getattr(inner, "num_layers", None)
    if nodes is None or edges is None or len(edges) != num_layers or not supports_trimming(inner):
        nodes = edges = None
    weight = getattr(batch, "edge_weight", None)
    out = model(
        x,
        batch.edge_index,
        **({"edge_weight": weight} if weight is not None else {}),
        num_sampled_nodes_per_hop=nodes,
        num_sampled_edges_per_hop=edges,
    )
    return out[: batch.batch_size]


@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    loader: NodeLoader | Iterable[Any],
    device: torch.device,
    *,
    normalize_features: bool = False,
    amp_dtype: torch.dtype | None = None,
    prefetch_workers: int = 0,
    prefetch_depth: int = 4,
    reduce: Callable[[torch.Tensor], torch.Tensor] | None = None,
    num_classes: int | None = None,
) -> ClassificationMetrics:
    """Accuracy and macro-F1 of ``model`` on the seed nodes of ``loader``.

    The confusion matrix is summed on the device (one host sync at the end);
    the number of classes is the width of the model's output. With
    ``prefetch_workers > 0`` batches are prepared in that many threads, up to
    ``prefetch_depth`` ahead (:class:`~gnncore.train.core.prefetch.Prefetcher`).
    With ``reduce`` (a sum over the processes of a distributed run, each
    evaluating its shard), the confusion matrix is reduced before the metrics
    are computed, so every process gets the same figures; a process that saw
    no batch contributes zeros of ``num_classes``.
    """
    model.eval()
    confusion: torch.Tensor | None = None
    with iter(Prefetcher(loader, prefetch_workers, prefetch_depth, device)) as batches:
        for batch in batches:
            batch = batch.to(device, non_blocking=True)
            with autocast(device, amp_dtype):
                logits = _forward(model, batch, normalize_features)
            batch_confusion = confusion_matrix(
                logits.argmax(dim=-1), batch.y[: batch.batch_size], logits.size(-1)
            )
            confusion = batch_confusion if confusion is None else confusion + batch_confusion
    if reduce is not None:
        if confusion is None:
            if num_classes is None:
                raise ValueError("evaluate(reduce=...) needs num_classes")
            confusion = torch.zeros((num_classes, num_classes), dtype=torch.int64, device=device)
        confusion = reduce(confusion)
    if confusion is None:
        return ClassificationMetrics(0.0, 0.0, 0)
    return ClassificationMetrics.from_confusion(confusion)


def train_step(
    model: torch.nn.Module,
    batch: Any,
    optimize: OptimizerStep,
    device: torch.device,
    amp_dtype: torch.dtype | None,
    normalize_features: bool,
    timer: EpochTimer,
    total_loss: torch.Tensor,
) -> int:
    """Forward, backward and step on one batch; adds its summed loss to
    ``total_loss`` (on the device) and returns its number of seed nodes."""
    timer.count(batch)
    with timer.phase("transfer"):
        batch = batch.to(device, non_blocking=True)
    with timer.phase("compute"):
        optimize.zero_grad()
        with autocast(device, amp_dtype):
            out = _forward(model, batch, normalize_features)
        loss = F.cross_entropy(out.float(), batch.y[: batch.batch_size])
        optimize(loss)
        total_loss += loss.detach() * batch.batch_size
    return int(batch.batch_size)


def copy_to_cpu(model: torch.nn.Module) -> torch.nn.Module:
    """A CPU copy of ``model`` in eval mode (for export and logging)."""
    return copy.deepcopy(model).to("cpu").eval()
