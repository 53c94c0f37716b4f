r"""Mini-batch node classification over any PyG feature store and graph store.

The loop never touches the data directly: a
:class:`~torch_geometric.loader.NodeLoader` samples with the given sampler and
joins rows from the given :class:`~torch_geometric.data.FeatureStore` (``"x"``
and ``"y"``), so the same code trains from memory, from memory-mapped graph
directories, or from a placed / remote store. Metrics go to an optional run
logger (:class:`gnncore.tracking.RunLogger`); MLflow is not imported here.

Pipelining: with ``config.prefetch_workers > 0`` batches are prepared in
threads ahead of compute (:mod:`gnncore.train.core.prefetch`), with the same
batches, and so the same parameters, as synchronous iteration.

Robustness: with a checkpoint directory the loop writes a checkpoint after
every epoch (:mod:`gnncore.train.core.checkpoint`), and with ``resume=True`` it
continues from the newest one. On a CPU, with ``num_workers=0``, a resumed run
ends with exactly the parameters of an uninterrupted one: the checkpoint
carries the model, the optimiser, and every random state an epoch draws from
(dropout, shuffling, the samplers' batch counters).
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch_geometric.data import FeatureStore, GraphStore
from torch_geometric.loader import NodeLoader
from torch_geometric.sampler import BaseSampler

from gnncore.train.core.batches import BatchSource, LoaderBatchSource
from gnncore.train.core.checkpoint import CheckpointDir, data_fingerprint
from gnncore.train.core.device import resolve_device
from gnncore.train.core.models import build_model, supports_trimming, uses_edges
from gnncore.train.core.prefetch import Prefetcher
from gnncore.train.core.session import (
    EpochProgress,
    Progress,
    TrainingSession,
    TrainResult,
    run_summary,
)
from gnncore.train.core.steps import OptimizerStep, amp_settings, autocast
from gnncore.train.core.throughput import EpochTimer
from gnncore.train.node.config import ConfigError, NodeTrainConfig
from gnncore.train.node.metrics import ClassificationMetrics, confusion_matrix

Index = torch.Tensor
#: ``on_epoch_end(epoch, checkpoint_path)``: called after an epoch's metrics are
#: logged and its checkpoint (``None`` without a checkpoint directory) is written.
EpochCallback = Callable[[int, Path | None], None]


class MetricLogger(Protocol):
    """The part of :class:`gnncore.tracking.RunLogger` the loop uses."""

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None: ...


@dataclass(kw_only=True)
class NodeTrainResult(TrainResult):
    """What :func:`train_node_classifier` returns: the shared
    :class:`~gnncore.train.core.session.TrainResult` fields (``model`` holds the
    weights of the highest validation accuracy), plus ``val_accuracy[e - 1]``
    and ``val_macro_f1[e - 1]`` of epoch ``e``, the best epoch's validation
    figures and the test accuracy and macro-F1."""

    config: NodeTrainConfig
    val_accuracy: list[float]
    best_val_accuracy: float
    test_accuracy: float
    val_macro_f1: list[float] = field(default_factory=list)
    best_val_macro_f1: float = 0.0
    test_macro_f1: float = 0.0

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
            **run_summary(self),
        }


@dataclass
class _Progress(EpochProgress):
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


def _as_index(nodes: Any) -> Index:
    index = torch.as_tensor(nodes).reshape(-1)
    if index.dtype == torch.bool:
        index = index.nonzero().reshape(-1)
    return index.to(torch.long)


class EdgeWeightNodeLoader(NodeLoader):
    """A :class:`~torch_geometric.loader.NodeLoader` for samplers whose outputs carry
    per-edge weights (:func:`gnncore.sampler.biased.edge_weight_of`): each batch
    gets them as ``edge_weight``, aligned with ``edge_index``."""

    def filter_fn(self, out: Any) -> Any:
        from gnncore.sampler.biased import edge_weight_of

        data = super().filter_fn(out)
        weight = edge_weight_of(out)
        if weight is not None:
            data.edge_weight = weight
        return data


def _make_loader(
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
        x = x / x.sum(dim=-1, keepdim=True).clamp(min=1.0)
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


# The loop --------------------------------------------------------------------


def train_node_classifier(
    feature_store: FeatureStore,
    graph_store: GraphStore | None,
    train_idx: Any,
    val_idx: Any,
    test_idx: Any,
    num_classes: int,
    config: NodeTrainConfig,
    logger: MetricLogger | None = None,
    sampler: BaseSampler | None = None,
    progress: Progress = True,
    eval_sampler: BaseSampler | None = None,
    in_channels: int | None = None,
    checkpoints: CheckpointDir | str | os.PathLike[str] | None = None,
    resume: bool = False,
    on_epoch_end: EpochCallback | None = None,
    train_batches: BatchSource | None = None,
    epoch_adapters: Sequence[Any] = (),
    eval_batches: tuple[Iterable[Any], Iterable[Any]] | None = None,
) -> NodeTrainResult:
    r"""Train a node classifier with neighbour-sampled mini-batches.

    Each epoch runs over ``train_idx`` in shuffled batches, then measures the
    validation accuracy and macro-F1. Training ends after ``config.epochs``
    epochs, or earlier once the validation accuracy has not improved for
    ``config.patience`` epochs; the weights of the best validation epoch are
    restored before the test metrics are measured.

    Args:
        feature_store (FeatureStore): Provides node attributes ``"x"`` (float
            features) and ``"y"`` (int64 labels), ``group_name=None``.
        graph_store (GraphStore, optional): The homogeneous adjacency; ``None``
            only with both ``train_batches`` and ``eval_batches``.
        train_idx, val_idx, test_idx (Tensor or array): Node ids (or boolean
            masks) of the splits.
        num_classes (int): Output channels.
        config (NodeTrainConfig): Hyper-parameters; validated here.
        logger (RunLogger, optional): Receives per epoch (``step=epoch``)
            ``train_loss``, ``val_accuracy``, ``val_macro_f1`` and the
            throughput figures of :meth:`EpochTimer.summary` plus ``eval_s``;
            at the end ``test_accuracy``, ``test_macro_f1``, ``best_epoch``,
            ``best_val_accuracy``, ``best_val_macro_f1``, ``stopped_epoch``,
            ``resumed_from_epoch`` and ``seconds``. A resumed run first
            re-logs the epochs its checkpoint covers. (default: :obj:`None`)
        sampler (BaseSampler, optional): Training sampler; default
            :func:`gnncore.sampler.build_sampler` of ``config.sampler`` over
            ``graph_store`` with ``config.fanouts`` and ``config.seed``.
            (default: :obj:`None`)
        progress (bool, optional): Show tqdm bars (epochs, and batches within
            an epoch). (default: :obj:`True`)
        eval_sampler (BaseSampler, optional): Sampler for validation and test;
            default ``config.sampler``'s sampler with ``config.eval_fanouts``
            (all neighbours when ``None``).
            (default: :obj:`None`)
        in_channels (int, optional): Feature width; read from the feature
            store when omitted. (default: :obj:`None`)
        checkpoints (CheckpointDir or str or Path, optional): Where to write a
            checkpoint after every epoch (a path keeps the newest 2). A fresh
            run (``resume=False``) keeps the checkpoints already there until its
            own first checkpoint is written, then removes them.
            (default: :obj:`None`, no checkpoints)
        resume (bool, optional): Continue from the newest readable checkpoint
            in ``checkpoints`` (a fresh start when there is none). Raises
            :class:`~gnncore.train.core.checkpoint.CheckpointError` when it was
            written with other settings or data. (default: :obj:`False`)
        on_epoch_end (callable, optional): ``f(epoch, checkpoint_path)`` after
            each epoch is logged and checkpointed. (default: :obj:`None`)
        train_batches (BatchSource, optional): Where training batches come
            from (:mod:`gnncore.train.core.batches`), yielding
            :class:`~torch_geometric.loader.NodeLoader`-style batches (``x``,
            ``y``, ``edge_index``, ``batch_size``, hop counts); ``train_idx``
            and ``sampler`` then only fingerprint the data (and ``epoch_adapters``
            are not used). A source may also define ``wrap_model(model) ->
            module``, the module the training step calls (e.g.
            :class:`~torch.nn.parallel.DistributedDataParallel`; checkpoints,
            evaluation and the result keep ``model``), and ``reduce_sum(tensor)
            -> tensor``, which sums the evaluation counts over the processes of a
            distributed run (:func:`evaluate`'s ``reduce``), and ``eval_model(model)
            -> module``, the module evaluation calls (full-graph SANCUS evaluates
            through its distributed rows). Default: a
            :class:`~gnncore.train.core.batches.LoaderBatchSource` over a
            shuffled ``NodeLoader`` of ``train_idx``. (default: :obj:`None`)
        epoch_adapters (sequence, optional): Run after each epoch with its
            throughput figures (``adapt(epoch, throughput) -> dict``, logged with
            the epoch) and checkpointed, e.g. the scale of locality-aware
            sampling (:class:`~gnncore.plan.sampling.LasScaleAdapter`).
            (default: none)
        eval_batches (tuple, optional): ``(val, test)`` iterables of batches
            (each iterated once per evaluation, e.g.
            :meth:`~gnncore.outofcore.hierbatching.HierBatchSource.eval_batches`)
            instead of loaders over the stores; ``eval_sampler`` is then unused.
            (default: :obj:`None`)
    """
    config.validate()
    if num_classes < 2:
        raise ValueError(f"num_classes={num_classes}: node classification needs >= 2 classes")
    if resume and checkpoints is None:
        raise ConfigError("resume=True needs a checkpoint directory (checkpoints=...)")
    started = time.perf_counter()
    device = resolve_device(config.device)
    amp_dtype, scaler = amp_settings(config, device)
    torch.manual_seed(config.seed)

    if in_channels is None:
        size = feature_store.get_tensor_size(group_name=None, attr_name="x")
        if size is None or len(size) != 2:
            raise ValueError(f"feature store 'x' must be 2-d [num_nodes, F]; size is {size}")
        in_channels = int(size[1])
    model = build_model(
        config.model,
        in_channels,
        config.hidden,
        num_classes,
        config.num_layers,
        config.dropout,
        heads=config.heads,
    ).to(device)
    own_batches = train_batches is not None and eval_batches is not None
    if graph_store is None and not own_batches:
        raise ValueError("graph_store=None needs both train_batches and eval_batches")
    if (sampler is None or eval_sampler is None) and not own_batches:
        assert graph_store is not None
        from gnncore.sampler import build_sampler

        # A model that ignores the edges needs the seeds only: sample no neighbours.
        no_hops = None if uses_edges(model) else (0,) * config.num_layers
        if sampler is None:
            sampler = build_sampler(
                config.sampler, graph_store, no_hops or config.fanouts, seed=config.seed
            )
        if eval_sampler is None:
            fanouts = no_hops or config.eval_fanouts or (-1,) * config.num_layers
            eval_sampler = build_sampler(config.sampler, graph_store, fanouts, seed=config.seed + 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    splits = [_as_index(train_idx), _as_index(val_idx), _as_index(test_idx)]
    generator = torch.Generator().manual_seed(config.seed)
    if eval_batches is not None:
        val_loader, test_loader = eval_batches
    else:
        assert graph_store is not None and eval_sampler is not None
        data = (feature_store, graph_store)
        val_loader = _make_loader(
            data, eval_sampler, splits[1], config.eval_batch_size, config, device
        )
        test_loader = _make_loader(
            data, eval_sampler, splits[2], config.eval_batch_size, config, device
        )
    prefetch = {
        "prefetch_workers": config.prefetch_workers,
        "prefetch_depth": config.prefetch_depth,
    }
    source: BatchSource
    if train_batches is not None:
        source = train_batches
    else:
        assert graph_store is not None and sampler is not None  # built above
        loader = _make_loader(
            (feature_store, graph_store),
            sampler,
            splits[0],
            config.batch_size,
            config,
            device,
            generator,
        )
        source = LoaderBatchSource(
            loader,
            feature_store,
            generator,
            {"train": sampler},
            device,
            **prefetch,
            adapters=epoch_adapters,
        )
    fingerprint = data_fingerprint(splits, num_classes, in_channels)

    session = TrainingSession(
        checkpoints,
        config,
        fingerprint,
        model,
        optimizer,
        scaler,
        source,
        device,
        getattr(logger, "run_id", None),
        eval_samplers={"eval": eval_sampler} if eval_batches is None else {},
    )
    state = session.resume_progress(resume, _Progress, logger)

    optimize = OptimizerStep(optimizer, scaler, config.max_grad_norm)
    wrap_model = getattr(source, "wrap_model", None)
    step_model = wrap_model(model) if callable(wrap_model) else model
    reduce_sum = getattr(source, "reduce_sum", None)
    reduce = reduce_sum if callable(reduce_sum) else None
    eval_model_of = getattr(source, "eval_model", None)
    eval_model = eval_model_of(model) if callable(eval_model_of) else model

    def step(batch: Any, timer: EpochTimer, total_loss: torch.Tensor) -> int:
        return _train_step(
            step_model,
            batch,
            optimize,
            device,
            amp_dtype,
            config.normalize_features,
            timer,
            total_loss,
        )

    session.run_epochs(
        state,
        epochs=config.epochs,
        patience=config.patience,
        step=step,
        validate=lambda: evaluate(
            eval_model,
            val_loader,
            device,
            normalize_features=config.normalize_features,
            amp_dtype=amp_dtype,
            **prefetch,
            reduce=reduce,
            num_classes=num_classes,
        ),
        logger=logger,
        on_epoch_end=on_epoch_end,
        progress=progress,
        describe=lambda loss, val, state: {
            "loss": f"{loss:.4f}",
            "val_acc": f"{val.accuracy:.4f}",
            "best": f"{state.best_val_accuracy:.4f}@{state.best_epoch}",
        },
    )

    outcome = session.finish(
        state,
        lambda: evaluate(
            eval_model,
            test_loader,
            device,
            normalize_features=config.normalize_features,
            amp_dtype=amp_dtype,
            **prefetch,
            reduce=reduce,
            num_classes=num_classes,
        ),
        started=started,
        logger=logger,
        final_metrics=lambda m: {
            "test_accuracy": m.accuracy,
            "test_macro_f1": m.macro_f1,
            "best_val_accuracy": state.best_val_accuracy,
            "best_val_macro_f1": state.best_val_macro_f1,
        },
    )
    return NodeTrainResult(
        **session.result_fields(state, outcome),
        val_accuracy=state.val_accuracy,
        best_val_accuracy=state.best_val_accuracy,
        test_accuracy=outcome.test.accuracy,
        val_macro_f1=state.val_macro_f1,
        best_val_macro_f1=state.best_val_macro_f1,
        test_macro_f1=outcome.test.macro_f1,
    )


def _train_step(
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
