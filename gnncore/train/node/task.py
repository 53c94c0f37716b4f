r"""Node classification as a :class:`~gnncore.train.fitting.Task`: the model, the
samplers and loaders over a feature store and a graph store, the cross-entropy
step, accuracy and macro-F1, and the :class:`~gnncore.train.node.loop.NodeTrainResult`.

The task never touches the data directly: a
:class:`~torch_geometric.loader.NodeLoader` samples with the given sampler and
joins rows from the given :class:`~torch_geometric.data.FeatureStore` (``"x"``
and ``"y"``), so the same code trains from memory, from memory-mapped graph
directories, or from a placed / remote store.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import torch
from torch_geometric.data import FeatureStore, GraphStore
from torch_geometric.nn.models.basic_gnn import BasicGNN
from torch_geometric.sampler import BaseSampler

from gnncore.sampler import build_sampler
from gnncore.train.core.batches import BatchSource, LoaderBatchSource
from gnncore.train.core.checkpoint import data_fingerprint
from gnncore.train.core.evalorder import EvaluationOrder
from gnncore.train.core.layerwise import Adjacency
from gnncore.train.core.models import build_model, uses_edges
from gnncore.train.core.session import Outcome
from gnncore.train.core.steps import OptimizerStep
from gnncore.train.core.throughput import EpochTimer
from gnncore.train.fitting import (
    Built,
    Measures,
    Task,
    source_hook,
)
from gnncore.train.node.config import NodeTrainConfig
from gnncore.train.node.exact import KeptTest, LayerwiseEvaluation, choose
from gnncore.train.node.loop import (
    NodeProgress,
    NodeTrainResult,
    as_index,
    evaluate,
    make_loader,
    train_step,
)
from gnncore.train.node.metrics import ClassificationMetrics


class NodeTask(Task[NodeTrainResult]):
    r"""Node classification with neighbour-sampled mini-batches.

    Args:
        feature_store (FeatureStore): Provides node attributes ``"x"`` (float
            features) and ``"y"`` (int64 labels), ``group_name=None``.
        graph_store (GraphStore, optional): The homogeneous adjacency; ``None``
            only with both a training source and ``eval_batches``.
        splits (tuple): ``(train_idx, val_idx, test_idx)``: node ids (or boolean
            masks) of the splits; with a training source of its own, the
            training ids only fingerprint the data.
        num_classes (int): Output channels.
        in_channels (int, optional): Feature width; read from the feature
            store when omitted.
        sampler (BaseSampler, optional): Training sampler; default
            :func:`gnncore.sampler.build_sampler` of ``config.sampler`` over
            ``graph_store`` with ``config.fanouts`` and ``config.seed``.
        eval_sampler (BaseSampler, optional): Sampler for validation and test;
            default ``config.sampler``'s sampler with ``config.eval_fanouts``
            (all neighbours when ``None``).
        epoch_adapters (sequence): Run after each epoch with its throughput
            figures (``adapt(epoch, throughput) -> dict``, logged with the
            epoch) and checkpointed, e.g. the scale of locality-aware sampling
            (:class:`~gnncore.plan.sampling.LasScaleAdapter`); not used with a
            training source of the caller's.
        eval_batches (tuple, optional): ``(val, test)`` iterables of batches
            (each iterated once per evaluation, e.g.
            :meth:`~gnncore.outofcore.hierbatching.HierBatchSource.eval_batches`)
            instead of loaders over the stores; ``eval_sampler`` is then unused.
        eval_order (EvaluationOrder, optional): A numbering of the nodes in parts
            (a partitioned store's, :mod:`gnncore.train.core.evalorder`) that
            layer-wise exact evaluation runs in, reading each part's rows once,
            sequentially (:class:`~gnncore.train.node.exact.LayerwiseEvaluation`).

    When validation and test are both evaluated layer-wise they are computed in
    one pass per epoch (the inner layers are shared); the test metrics of the
    epoch whose weights the run restores (the best validation epoch) are kept
    and reported, so the test costs no pass of its own
    (:class:`~gnncore.train.node.exact.KeptTest`).

    A training source (:func:`~gnncore.train.fitting.fit`'s ``source``) yields
    :class:`~torch_geometric.loader.NodeLoader`-style batches (``x``, ``y``,
    ``edge_index``, ``batch_size``, hop counts); besides ``wrap_model`` and
    ``reduce_sum`` it may define ``eval_model(model) -> module``, the module
    evaluation calls (full-graph SANCUS evaluates through its distributed rows).
    """

    name: ClassVar[str] = "node"
    progress_type = NodeProgress

    def __init__(
        self,
        feature_store: FeatureStore,
        graph_store: GraphStore | None,
        splits: Sequence[Any],
        num_classes: int,
        *,
        in_channels: int | None = None,
        sampler: BaseSampler | None = None,
        eval_sampler: BaseSampler | None = None,
        epoch_adapters: Sequence[Any] = (),
        eval_batches: tuple[Iterable[Any], Iterable[Any]] | None = None,
        eval_order: EvaluationOrder | None = None,
    ) -> None:
        self.feature_store = feature_store
        self.graph_store = graph_store
        self.splits = splits
        self.num_classes = num_classes
        self.in_channels = in_channels
        self.sampler = sampler
        self.eval_sampler = eval_sampler
        self.epoch_adapters = epoch_adapters
        self.eval_batches = eval_batches
        self.eval_order = eval_order
        self._eval_loaders: tuple[Iterable[Any], Iterable[Any]] = ((), ())
        self._exact: tuple[LayerwiseEvaluation | None, LayerwiseEvaluation | None] = (None, None)
        #: Validation and test in one layer-wise pass (set by build when both are layer-wise).
        self.joint_evaluation: LayerwiseEvaluation | None = None
        #: How validation and test ran: ``"layer-wise"`` or ``"sampled"`` (set by build).
        self.evaluation_ways: dict[str, str] = {}

    def check(self, config: NodeTrainConfig) -> None:
        if self.num_classes < 2:
            raise ValueError(
                f"num_classes={self.num_classes}: node classification needs >= 2 classes"
            )

    def build(
        self, config: NodeTrainConfig, device: torch.device, source: BatchSource | None
    ) -> Built:
        in_channels = self.in_channels
        if in_channels is None:
            size = self.feature_store.get_tensor_size(group_name=None, attr_name="x")
            if size is None or len(size) != 2:
                raise ValueError(f"feature store 'x' must be 2-d [num_nodes, F]; size is {size}")
            in_channels = int(size[1])
        model = build_model(
            config.model,
            in_channels,
            config.hidden,
            self.num_classes,
            config.num_layers,
            config.dropout,
            heads=config.heads,
        ).to(device)
        own_batches = source is not None and self.eval_batches is not None
        if self.graph_store is None and not own_batches:
            raise ValueError("graph_store=None needs both train_batches and eval_batches")
        sampler, eval_sampler = self._samplers(config, model, own_batches)
        optimizer = torch.optim.Adam(
            model.parameters(), lr=config.lr, weight_decay=config.weight_decay
        )
        splits = [as_index(split) for split in self.splits]
        generator = torch.Generator().manual_seed(config.seed)
        self._eval_loaders = self._evaluation_loaders(config, eval_sampler, splits, device)
        self._exact = self._layerwise_evaluations(config, model, eval_sampler, splits, source)
        if source is None:
            assert self.graph_store is not None and sampler is not None  # built above
            loader = make_loader(
                (self.feature_store, self.graph_store),
                sampler,
                splits[0],
                config.batch_size,
                config,
                device,
                generator,
            )
            source = LoaderBatchSource(
                loader,
                self.feature_store,
                generator,
                {"train": sampler},
                device,
                config.prefetch_workers,
                config.prefetch_depth,
                adapters=self.epoch_adapters,
            )
        return Built(
            model,
            optimizer,
            source,
            data_fingerprint(splits, self.num_classes, in_channels),
            eval_samplers={"eval": eval_sampler} if self.eval_batches is None else {},
        )

    def _samplers(
        self, config: NodeTrainConfig, model: torch.nn.Module, own_batches: bool
    ) -> tuple[BaseSampler | None, BaseSampler | None]:
        """The training and evaluation samplers: the given ones, else
        ``config.sampler``'s over the graph store (none when the caller brings
        both training and evaluation batches)."""
        sampler, eval_sampler = self.sampler, self.eval_sampler
        if (sampler is None or eval_sampler is None) and not own_batches:
            assert self.graph_store is not None
            # A model that ignores the edges needs the seeds only: sample no neighbours.
            no_hops = None if uses_edges(model) else (0,) * config.num_layers
            if sampler is None:
                sampler = build_sampler(
                    config.sampler, self.graph_store, no_hops or config.fanouts, seed=config.seed
                )
            if eval_sampler is None:
                fanouts = no_hops or config.eval_fanouts or (-1,) * config.num_layers
                eval_sampler = build_sampler(
                    config.sampler, self.graph_store, fanouts, seed=config.seed + 1
                )
        return sampler, eval_sampler

    def _layerwise_evaluations(
        self,
        config: NodeTrainConfig,
        model: torch.nn.Module,
        eval_sampler: BaseSampler | None,
        splits: list[torch.Tensor],
        source: BatchSource | None,
    ) -> tuple[LayerwiseEvaluation | None, LayerwiseEvaluation | None]:
        """Validation's and test's layer-wise evaluations where they replace the
        sampled loaders (:func:`gnncore.train.node.exact.choose`): exact
        evaluation (no ``eval_fanouts``) with the evaluation sampler built
        here over the graph store, and no evaluation hooks of a training
        source (``eval_model``, ``reduce_sum``)."""
        indptr = getattr(eval_sampler, "indptr", None)
        indices = getattr(eval_sampler, "indices", None)
        sampled_because = [
            reason
            for reason, on in (
                ("the caller's evaluation batches", self.eval_batches is not None),
                ("the caller's evaluation sampler", self.eval_sampler is not None),
                (f"eval_fanouts {config.eval_fanouts}", config.eval_fanouts is not None),
                ("no CSR to run layer-wise over", indptr is None or indices is None),
                ("weighted edges", getattr(eval_sampler, "carries_edge_weight", False)),
                ("the training source's own evaluation", source_hook(source, "eval_model")),
                ("the training source's reduction", source_hook(source, "reduce_sum")),
            )
            if on
        ]
        way = f"sampled: {', '.join(sampled_because)}" if sampled_because else "sampled"
        self.evaluation_ways = {"val": way, "test": way}
        if sampled_because or indptr is None or indices is None:
            return None, None
        adjacency = Adjacency(indptr, indices)
        order = self.eval_order
        val, val_cost = choose("validation", model, adjacency, splits[1], config, order)
        test, test_cost = choose("test", model, adjacency, splits[2], config, order)
        self.joint_evaluation = val.joined(test, ("val", "test")) if val and test else None
        for name, cost in (("val", val_cost), ("test", test_cost)):
            self.evaluation_ways[name] = (
                cost.describe()
                if cost is not None
                else "sampled: a model layer-wise inference does not compute"
            )
            if cost is not None and cost.use_layerwise and order is not None:
                self.evaluation_ways[name] += f"; in the {order.name}'s order"
            if self.joint_evaluation is not None:
                self.evaluation_ways[name] += "; validation and test in one pass"
        if self.joint_evaluation is not None:
            # The joint pass replaces both: their rows (up to N ids a layer each) go.
            return None, None
        return val, test

    def _evaluation_loaders(
        self,
        config: NodeTrainConfig,
        eval_sampler: BaseSampler | None,
        splits: list[torch.Tensor],
        device: torch.device,
    ) -> tuple[Iterable[Any], Iterable[Any]]:
        """The validation and test batches: the given ones, else loaders of the
        evaluation sampler over the stores."""
        if self.eval_batches is not None:
            return self.eval_batches
        assert self.graph_store is not None and eval_sampler is not None
        data = (self.feature_store, self.graph_store)
        val, test = (
            make_loader(data, eval_sampler, split, config.eval_batch_size, config, device)
            for split in splits[1:]
        )
        return val, test

    def measures(
        self,
        config: NodeTrainConfig,
        built: Built,
        optimize: OptimizerStep,
        device: torch.device,
        amp_dtype: torch.dtype | None,
    ) -> Measures:
        model = built.model
        wrap_model = source_hook(built.source, "wrap_model")
        step_model = wrap_model(model) if wrap_model is not None else model
        eval_model_of = source_hook(built.source, "eval_model")
        eval_model = eval_model_of(model) if eval_model_of is not None else model
        reduce = source_hook(built.source, "reduce_sum")

        def step(batch: Any, timer: EpochTimer, total_loss: torch.Tensor) -> int:
            return train_step(
                step_model,
                batch,
                optimize,
                device,
                amp_dtype,
                config.normalize_features,
                timer,
                total_loss,
            )

        def measure(loader: Iterable[Any]) -> ClassificationMetrics:
            return evaluate(
                eval_model,
                loader,
                device,
                normalize_features=config.normalize_features,
                amp_dtype=amp_dtype,
                prefetch_workers=config.prefetch_workers,
                prefetch_depth=config.prefetch_depth,
                reduce=reduce,
                num_classes=self.num_classes,
            )

        passes = [0]

        def exact_pass(evaluation: LayerwiseEvaluation) -> dict[str, ClassificationMetrics]:
            # A loader's iterator draws its base seed from the global generator
            # (each pass with num_workers 0, the first with persistent workers):
            # draw it too, so training's random stream does not depend on the way.
            if config.num_workers == 0 or passes[0] == 0:
                torch.empty((), dtype=torch.int64).random_()
            passes[0] += 1
            assert isinstance(eval_model, BasicGNN)
            return evaluation.measure(
                eval_model,
                self.feature_store,
                device,
                normalize_features=config.normalize_features,
                amp_dtype=amp_dtype,
            )

        def exact(evaluation: LayerwiseEvaluation) -> ClassificationMetrics:
            return next(iter(exact_pass(evaluation).values()))

        def way(loader: Iterable[Any], evaluation: LayerwiseEvaluation | None) -> Any:
            if evaluation is None:
                return lambda: measure(loader)
            return lambda: exact(evaluation)

        (val, test), (exact_val, exact_test) = self._eval_loaders, self._exact
        joint = self.joint_evaluation
        if joint is None:
            return Measures(step, way(val, exact_val), way(test, exact_test))
        kept = KeptTest()

        def validate() -> ClassificationMetrics:
            metrics = exact_pass(joint)
            kept.offer(eval_model, metrics["val"], metrics["test"])
            return metrics["val"]

        def test_of_kept() -> ClassificationMetrics:
            # The weights restored are those of the best validation epoch: its test
            # metrics were computed in that epoch's pass (a resumed run's best epoch
            # may predate this process; then the test gets a pass of its own).
            metrics = kept.take(eval_model)
            if metrics is None:
                metrics = exact_pass(joint)["test"]
            joint.close()
            return metrics

        return Measures(step, validate, test_of_kept)

    def describe(
        self, loss: float, val: ClassificationMetrics, state: NodeProgress
    ) -> dict[str, str]:
        return {
            "loss": f"{loss:.4f}",
            "val_acc": f"{val.accuracy:.4f}",
            "best": f"{state.best_val_accuracy:.4f}@{state.best_epoch}",
        }

    def final_metrics(self, test: ClassificationMetrics, state: NodeProgress) -> dict[str, float]:
        return {
            "test_accuracy": test.accuracy,
            "test_macro_f1": test.macro_f1,
            "best_val_accuracy": state.best_val_accuracy,
            "best_val_macro_f1": state.best_val_macro_f1,
        }

    def result(
        self,
        fields: dict[str, Any],
        state: NodeProgress,
        outcome: Outcome[ClassificationMetrics],
    ) -> NodeTrainResult:
        return NodeTrainResult(
            **fields,
            val_accuracy=state.val_accuracy,
            best_val_accuracy=state.best_val_accuracy,
            test_accuracy=outcome.test.accuracy,
            val_macro_f1=state.val_macro_f1,
            best_val_macro_f1=state.best_val_macro_f1,
            test_macro_f1=outcome.test.macro_f1,
            evaluation=dict(self.evaluation_ways),
        )
