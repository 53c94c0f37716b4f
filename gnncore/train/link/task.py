r"""Link prediction as a :class:`~gnncore.train.fitting.Task`: the encoder and
decoder, the negative-sampling loader of training triples, the shared-negatives
softmax step, filtered ranking, and the :class:`~gnncore.train.link.loop.LinkTrainResult`.

A :class:`~torch_geometric.loader.LinkLoader` feeds batches of training
triples; the project's sampler draws the batch's negatives (``"triplet"`` mode,
uniform or degree-weighted) and samples the neighbourhoods of every endpoint.
Evaluation ranks each validation/test answer with the filtered protocol of
:mod:`gnncore.train.link.ranking` (:class:`~gnncore.train.link.loop.LinkEvaluator`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import torch
from torch_geometric.data import FeatureStore, GraphStore
from torch_geometric.loader import LinkLoader
from torch_geometric.sampler import BaseSampler, NegativeSampling

from gnncore.sampler import build_sampler
from gnncore.sampler.negative import degree_weights
from gnncore.store import CSCGraphStore, EmptyFeatureStore
from gnncore.train.core.batches import BatchSource, LoaderBatchSource
from gnncore.train.core.checkpoint import data_fingerprint
from gnncore.train.core.session import Outcome
from gnncore.train.core.steps import OptimizerStep
from gnncore.train.core.throughput import EpochTimer
from gnncore.train.fitting import (
    Built,
    Measures,
    Task,
    source_hook,
)
from gnncore.train.link.config import LinkTrainConfig
from gnncore.train.link.data import LinkSplits, message_passing_csc
from gnncore.train.link.loop import (
    LinkLogits,
    LinkProgress,
    LinkTrainResult,
    RankFn,
    split_rankers,
    train_step,
    training_edges,
    with_table,
)
from gnncore.train.link.models import LinkModel
from gnncore.train.link.ranking import RankingMetrics


class LinkTask(Task[LinkTrainResult]):
    r"""Link prediction with negative-sampled mini-batches.

    Args:
        splits (LinkSplits): Training, validation and test triples
            (:func:`~gnncore.train.link.data.link_splits`).
        feature_store (FeatureStore, optional): Node features ``"x"`` for GNN
            encoders; without it (or without ``"x"``) node embeddings are
            learned.
        graph_store (GraphStore, optional): The message-passing graph; default
            the training triples in both directions
            (:func:`~gnncore.train.link.data.message_passing_csc`).
        sampler, eval_sampler (BaseSampler, optional): Training sampler (must
            implement ``sample_from_edges``) and the sampler encoding all nodes
            for evaluation; default ``config.sampler``'s sampler
            (:func:`gnncore.sampler.build_sampler`) with ``config.fanouts`` /
            ``config.eval_fanouts``.
        eval_ranks (tuple, optional): ``(val, test)`` functions
            ``ranks(model, device, amp_dtype) -> Tensor`` giving the filtered
            ranks of this process's validation / test queries, instead of a
            :class:`~gnncore.train.link.loop.LinkEvaluator` over ``splits`` (no
            graph store, sampler or known-edge index is built when a training
            source is given too).
        fingerprint_data (sequence of Tensor, optional): What identifies the
            data in checkpoints (default: the splits' triples); a distributed
            run passes a summary that is the same on every process.

    A training source (:func:`~gnncore.train.fitting.fit`'s ``source``) yields
    :class:`~torch_geometric.loader.LinkLoader` triplet batches over the
    training edges (``input_id`` indexes them). A source that manages the
    embedding table itself (a partition buffer,
    :class:`~gnncore.outofcore.link_buffer.LinkBufferSource`) defines
    ``embedding_rows`` (the model's table is that many rows),
    ``bind(model, optimizer)``, ``node_embeddings()`` (evaluation reads them),
    ``keep_best()`` (after an improving epoch) and ``restore_best()`` (before
    the test); its table on disk is snapshotted beside each checkpoint and
    restored on ``resume`` through its ``checkpoint_files`` / ``restore_files``
    hooks (:class:`~gnncore.train.core.session.TrainingSession`). A source that
    is one process of a distributed run may define ``main_process``
    (``False``: read checkpoints, never write them), ``wrap_model(module) ->
    module`` (of the :class:`~gnncore.train.link.loop.LinkLogits` the step
    calls) and ``reduce_sum(tensor) -> tensor`` (the ranking sums of
    :meth:`RankingMetrics.from_ranks` summed over the processes).
    """

    name: ClassVar[str] = "link"
    progress_type = LinkProgress

    def __init__(
        self,
        splits: LinkSplits,
        feature_store: FeatureStore | None = None,
        graph_store: GraphStore | None = None,
        *,
        sampler: BaseSampler | None = None,
        eval_sampler: BaseSampler | None = None,
        eval_ranks: tuple[RankFn, RankFn] | None = None,
        fingerprint_data: Sequence[torch.Tensor] | None = None,
    ) -> None:
        self.splits = splits
        self.feature_store = feature_store if feature_store is not None else EmptyFeatureStore()
        self.graph_store = graph_store
        self.sampler = sampler
        self.eval_sampler = eval_sampler
        self.eval_ranks = eval_ranks
        self.fingerprint_data = fingerprint_data
        self.buffer: Any = None
        self.reciprocal = False
        self.edge_relation = torch.empty(0, dtype=torch.long)

    def check(self, config: LinkTrainConfig) -> None:
        if len(self.splits.train) == 0:
            raise ValueError("no training triples")

    def build(
        self, config: LinkTrainConfig, device: torch.device, source: BatchSource | None
    ) -> Built:
        splits = self.splits
        num_nodes, num_relations = splits.num_nodes, splits.num_relations
        own_data = source is not None and self.eval_ranks is not None
        if self.graph_store is None and not own_data:
            self.graph_store = CSCGraphStore(*message_passing_csc(splits.train, num_nodes))
        in_channels = self._in_channels(config)
        # Undirected edge splits are their own reverse: no reciprocal relations.
        self.reciprocal = config.reciprocal and not splits.symmetric
        # A source managing the embedding table (a partition buffer): see the class.
        self.buffer = source if hasattr(source, "embedding_rows") else None
        model = LinkModel(
            self.buffer.embedding_rows if self.buffer is not None else num_nodes,
            2 * num_relations if self.reciprocal else num_relations,
            config.dim,
            encoder=config.model,
            decoder=config.decoder,
            num_layers=max(config.num_layers, 1),
            in_channels=in_channels,
            dropout=config.dropout,
            heads=config.heads,
        ).to(device)
        optimizer = torch.optim.Adagrad(model.parameters(), lr=config.lr)
        if self.buffer is not None:
            self.buffer.bind(model, optimizer)
        self._build_samplers(config, own_data)
        edge_index, self.edge_relation = training_edges(splits, self.reciprocal)
        weights = None
        if config.negative_sampling == "degree":
            weights = torch.from_numpy(
                degree_weights(num_nodes, splits.train[:, 0], splits.train[:, 2])
            )
        if source is None:
            source = self._loader_source(config, device, edge_index, weights)
        if self.eval_ranks is None:
            self.eval_ranks = split_rankers(
                splits,
                config,
                self.feature_store,
                self.graph_store,
                self.eval_sampler,
                weights,
                self.buffer,
                self.reciprocal,
            )
        data = self.fingerprint_data
        fingerprint = data_fingerprint(
            list(data) if data is not None else splits.tensors(), num_relations, in_channels or 0
        )
        eval_samplers = {"eval": self.eval_sampler} if self.eval_sampler else {}
        return Built(model, optimizer, source, fingerprint, eval_samplers)

    def _in_channels(self, config: LinkTrainConfig) -> int | None:
        """The width of the node features a GNN encoder reads, ``None`` when
        it learns embeddings instead."""
        store = self.feature_store
        if config.model == "none" or not any(
            a.attr_name == "x" for a in store.get_all_tensor_attrs()
        ):
            return None
        size = store.get_tensor_size(group_name=None, attr_name="x")
        return int(size[1]) if size is not None and len(size) == 2 else None

    def _build_samplers(self, config: LinkTrainConfig, own_data: bool) -> None:
        """``config.sampler``'s training sampler (fan-outs ``config.fanouts``) and
        evaluation sampler (``config.eval_fanouts``), where none was given and
        the task's own loaders and evaluators need them."""
        if self.sampler is None and not own_data:
            assert self.graph_store is not None
            self.sampler = build_sampler(
                config.sampler, self.graph_store, config.fanouts or (0,), seed=config.seed
            )
        if self.eval_sampler is None and config.model != "none" and self.eval_ranks is None:
            assert self.graph_store is not None
            self.eval_sampler = build_sampler(
                config.sampler,
                self.graph_store,
                config.eval_fanouts or (-1,) * config.num_layers,
                seed=config.seed + 1,
            )

    def _loader_source(
        self,
        config: LinkTrainConfig,
        device: torch.device,
        edge_index: torch.Tensor,
        weights: torch.Tensor | None,
    ) -> LoaderBatchSource:
        """A shuffled :class:`~torch_geometric.loader.LinkLoader` of the training
        edges, each batch with its ``"triplet"`` negatives."""
        assert self.graph_store is not None and self.sampler is not None
        generator = torch.Generator().manual_seed(config.seed)
        workers = config.num_workers
        loader = LinkLoader(
            (self.feature_store, self.graph_store),
            self.sampler,
            edge_label_index=(None, edge_index),
            neg_sampling=NegativeSampling(
                "triplet", math.ceil(config.num_negatives / config.batch_size), dst_weight=weights
            ),
            batch_size=config.batch_size,
            shuffle=True,
            generator=generator,
            num_workers=workers,
            persistent_workers=workers > 0,
            pin_memory=device.type == "cuda",
        )
        return LoaderBatchSource(
            loader,
            self.feature_store,
            generator,
            {"train": self.sampler},
            device,
            config.prefetch_workers,
            config.prefetch_depth,
        )

    def measures(
        self,
        config: LinkTrainConfig,
        built: Built,
        optimize: OptimizerStep,
        device: torch.device,
        amp_dtype: torch.dtype | None,
    ) -> Measures:
        model = built.model
        assert isinstance(model, LinkModel) and self.eval_ranks is not None
        wrap_model = source_hook(built.source, "wrap_model")
        logits = LinkLogits(model)
        step_model = wrap_model(logits) if wrap_model is not None else logits
        reduce = source_hook(built.source, "reduce_sum")
        val_ranks, test_ranks = self.eval_ranks

        def metrics(ranks: RankFn) -> RankingMetrics:
            return RankingMetrics.from_ranks(ranks(model, device, amp_dtype), reduce)

        def test() -> RankingMetrics:
            if self.buffer is not None:
                self.buffer.restore_best()
            return metrics(test_ranks)

        def step(batch: Any, timer: EpochTimer, total_loss: torch.Tensor) -> int:
            return train_step(
                step_model,
                batch,
                self.edge_relation,
                optimize,
                device,
                amp_dtype,
                config.num_negatives,
                timer,
                total_loss,
            )

        return Measures(step, lambda: metrics(val_ranks), test)

    def epochs(self) -> Any:
        # Adagrad's sparse update of the embedding table builds COO tensors from valid
        # indices. PyTorch skips their invariant checks by default and warns unless the
        # choice is explicit: make it explicit for the epochs (the same setting).
        return torch.sparse.check_sparse_tensor_invariants(enable=False)

    def epoch_ended(self, state: LinkProgress, epoch: int) -> None:
        if self.buffer is not None and state.best_epoch == epoch:
            self.buffer.keep_best()

    def describe(self, loss: float, val: RankingMetrics, state: LinkProgress) -> dict[str, str]:
        return {
            "loss": f"{loss:.4f}",
            "val_mrr": f"{val.mrr:.4f}",
            "best": f"{state.best_val_mrr:.4f}@{state.best_epoch}",
        }

    def final_metrics(self, test: RankingMetrics, state: LinkProgress) -> dict[str, float]:
        return {**test.as_dict("test_", metric_names=True), "best_val_mrr": state.best_val_mrr}

    def result(
        self, fields: dict[str, Any], state: LinkProgress, outcome: Outcome[RankingMetrics]
    ) -> LinkTrainResult:
        if self.buffer is not None:  # the returned model carries the whole table of the best epoch
            fields["model"] = with_table(fields["model"], self.buffer.node_embeddings())
        return LinkTrainResult(
            **fields,
            val_mrr=state.val_mrr,
            best_val_mrr=state.best_val_mrr,
            test=outcome.test,
            val_hits10=state.val_hits10,
        )
