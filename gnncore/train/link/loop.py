r"""Mini-batch link prediction over any PyG feature store and graph store.

A :class:`~torch_geometric.loader.LinkLoader` feeds batches of training
triples; the project's sampler (:meth:`gnncore.sampler.NeighborSampler.sample_from_edges`)
draws the batch's negatives (``"triplet"`` mode, uniform or degree-weighted)
and samples the neighbourhoods of every endpoint, so GNN encoders see the
negatives' neighbourhoods too. Every positive is scored against all negatives
of its batch (shared negatives) under a softmax cross-entropy.

Evaluation encodes every node (the embedding table itself for
``model="none"``; otherwise a :class:`~torch_geometric.loader.NodeLoader`
pass with the evaluation fan-outs) and ranks each validation/test answer
with the filtered protocol of :mod:`gnncore.train.link.ranking`. Early stopping,
the best-epoch weights and per-epoch checkpoints work as in node
classification (:mod:`gnncore.train.node.loop`), with validation MRR as the metric.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.data import FeatureStore, GraphStore
from torch_geometric.loader import LinkLoader, NodeLoader
from torch_geometric.sampler import BaseSampler, NegativeSampling

from gnncore.sampler.negative import KnownEdges, NegativeDraw, degree_weights
from gnncore.train.core.batches import BatchSource, LoaderBatchSource
from gnncore.train.core.checkpoint import CheckpointDir, data_fingerprint
from gnncore.train.core.device import resolve_device
from gnncore.train.core.session import (
    EpochProgress,
    Progress,
    TrainingSession,
    TrainResult,
    run_summary,
)
from gnncore.train.core.steps import OptimizerStep, amp_settings, autocast
from gnncore.train.core.throughput import EpochTimer
from gnncore.train.link.config import LinkTrainConfig
from gnncore.train.link.data import LinkSplits, message_passing_csc
from gnncore.train.link.models import LinkModel
from gnncore.train.link.ranking import RankingMetrics, filtered_ranks, known_edges
from gnncore.train.node.config import ConfigError
from gnncore.train.node.loop import EpochCallback, MetricLogger


@dataclass(kw_only=True)
class LinkTrainResult(TrainResult):
    """What :func:`train_link_predictor` returns: the shared
    :class:`~gnncore.train.core.session.TrainResult` fields (``model`` holds the
    weights of the highest validation MRR), plus ``val_mrr[e - 1]`` and
    ``val_hits10[e - 1]`` of epoch ``e``, the best validation MRR, and ``test``,
    the filtered test metrics (both directions, ranked against all entities
    unless ``eval_negatives`` was set)."""

    model: LinkModel
    config: LinkTrainConfig
    val_mrr: list[float]
    best_val_mrr: float
    test: RankingMetrics
    val_hits10: list[float] = field(default_factory=list)

    @property
    def test_mrr(self) -> float:
        return self.test.mrr

    def summary(self) -> dict[str, Any]:
        """JSON-friendly scalars (no model); ``throughput`` is the mean per epoch."""
        return {
            "task": "link",
            "model": self.config.model,
            "decoder": self.config.decoder,
            "epochs": self.config.epochs,
            "stopped_epoch": self.stopped_epoch,
            "early_stopped": self.early_stopped,
            "best_epoch": self.best_epoch,
            "val_mrr": self.best_val_mrr,
            **self.test.as_dict("test_"),
            "num_test_queries": self.test.count,
            **run_summary(self),
        }


@dataclass
class _Progress(EpochProgress):
    """Progress of link prediction: validation MRR, Hits@10 and all ranking metrics."""

    val_mrr: list[float] = field(default_factory=list)
    val_hits10: list[float] = field(default_factory=list)
    val_metrics: list[dict[str, float]] = field(default_factory=list)
    best_val_mrr: float = -1.0

    def record(
        self,
        epoch: int,
        loss: float,
        val: RankingMetrics,
        throughput: dict[str, float],
        model: torch.nn.Module,
    ) -> None:
        improved = val.mrr > self.best_val_mrr
        self.val_mrr.append(val.mrr)
        self.val_hits10.append(val.hits[10])
        self.val_metrics.append(val.as_dict("val_", metric_names=True))
        if improved:
            self.best_val_mrr = val.mrr
        self.advance(epoch, loss, throughput, improved, model)

    def epoch_metrics(self, epoch: int) -> dict[str, float]:
        i = epoch - 1
        return {"train_loss": self.train_loss[i], **self.val_metrics[i], **self.throughput[i]}


class LinkEvaluator:
    r"""Filtered ranking of one split's triples with a model's current weights.

    Args:
        triples (array): int64 ``[T, 3]`` to rank (both directions).
        known (KnownEdges): All known triples (:func:`~gnncore.train.link.ranking.known_edges`).
        config (LinkTrainConfig): ``eval_batch_size``, ``eval_negatives`` and
            ``seed`` are read.
        num_relations (int): Relations of the graph (not doubled).
        reciprocal (bool): The model learned reciprocal relations (head
            queries use ``r + R``).
        node_loader (NodeLoader, optional): Encodes all nodes for GNN
            encoders; ``None`` for ``model="none"``.
        negatives (NegativeDraw, optional): Distribution of sampled
            evaluation negatives (``eval_negatives > 0``).
        embeddings (callable, optional): Every node's representation ``[N, dim]``
            instead of the model's table (a partition buffer's table on disk).
    """

    def __init__(
        self,
        triples: np.ndarray,
        known: KnownEdges,
        config: LinkTrainConfig,
        num_relations: int,
        reciprocal: bool,
        node_loader: NodeLoader | None = None,
        negatives: NegativeDraw | None = None,
        embeddings: Callable[[], torch.Tensor] | None = None,
    ) -> None:
        self.triples = triples
        self.embeddings = embeddings
        self.known = known
        self.config = config
        self.num_relations = num_relations
        self.reciprocal = reciprocal
        self.node_loader = node_loader
        self.negatives = negatives

    def __call__(
        self, model: LinkModel, device: torch.device, amp_dtype: torch.dtype | None = None
    ) -> RankingMetrics:
        return RankingMetrics.from_ranks(self.ranks(model, device, amp_dtype))

    @torch.no_grad()
    def ranks(
        self, model: LinkModel, device: torch.device, amp_dtype: torch.dtype | None = None
    ) -> torch.Tensor:
        """The filtered ranks of the split's queries (:func:`filtered_ranks`)."""
        model.eval()
        if self.embeddings is not None:
            z = self.embeddings().to(device)
        else:
            z = encode_all_nodes(model, self.node_loader, device, amp_dtype, self.known.num_nodes)
        return filtered_ranks(
            z,
            model.decoder.query,
            self.triples,
            self.known,
            self.num_relations,
            reciprocal=self.reciprocal,
            batch_size=self.config.eval_batch_size,
            num_negatives=self.config.eval_negatives,
            negatives=self.negatives,
            seed=self.config.seed,
        )


#: ``ranks(model, device, amp_dtype) -> Tensor``: filtered ranks of one split's
#: queries (this process's share in a distributed run).
RankFn = Callable[[LinkModel, torch.device, torch.dtype | None], torch.Tensor]


class LinkLogits(torch.nn.Module):
    """The training step's forward pass: the logits of every positive of a
    triplet batch against the batch's shared negatives (column 0: the positive).
    A module, so that a distributed run can wrap it (``wrap_model``: DDP)."""

    def __init__(self, model: LinkModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, batch: Any, relation: torch.Tensor, num_negatives: int) -> torch.Tensor:
        z = self.model.encode_batch(batch)
        query = self.model.decoder.query(z[batch.src_index], relation)
        negatives = z[batch.dst_neg_index.reshape(-1)[:num_negatives]]
        positive = (query * z[batch.dst_pos_index]).sum(-1, keepdim=True)
        return torch.cat([positive, query @ negatives.t()], dim=1)


@torch.no_grad()
def encode_all_nodes(
    model: LinkModel,
    loader: NodeLoader | None,
    device: torch.device,
    amp_dtype: torch.dtype | None = None,
    num_nodes: int | None = None,
) -> torch.Tensor:
    """``[N, dim]`` representations of every node: the embedding table when the
    model has no GNN, else one pass of ``loader`` whose seeds cover every node
    ``0 .. num_nodes - 1`` (default: the embedding table's rows)."""
    if model.gnn is None:
        assert model.embedding is not None
        return model.embedding.weight.detach()
    if loader is None:
        raise ValueError("a GNN encoder needs a NodeLoader over all nodes to encode them")
    if num_nodes is None:
        if model.embedding is None:
            raise ValueError("num_nodes is needed when the model reads features")
        num_nodes = model.embedding.num_embeddings
    out: torch.Tensor | None = None
    for batch in loader:
        batch = batch.to(device, non_blocking=True)
        with autocast(device, amp_dtype):
            z = model.encode_batch(batch)[: batch.batch_size].float()
        if out is None:
            out = torch.zeros(num_nodes, z.size(1), device=device)
        out[batch.n_id[: batch.batch_size]] = z
    if out is None:
        raise ValueError("the node loader yielded no batches")
    return out


def training_edges(splits: LinkSplits, reciprocal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``(edge_label_index [2, T'], relation [T'])`` of the training triples,
    each also reversed: under its reciprocal relation ``r + R`` when
    ``reciprocal``, under ``r`` itself for symmetric splits."""
    t = splits.train
    heads, rels, tails = t[:, 0], t[:, 1], t[:, 2]
    if reciprocal or splits.symmetric:
        heads, tails = np.concatenate([heads, tails]), np.concatenate([tails, heads])
        offset = splits.num_relations if reciprocal else 0
        rels = np.concatenate([rels, rels + offset])
    index = torch.from_numpy(np.stack([heads, tails]).astype(np.int64))
    return index, torch.from_numpy(rels.astype(np.int64))


def _eval_subset(triples: np.ndarray, limit: int, seed: int) -> np.ndarray:
    if limit <= 0 or len(triples) <= limit:
        return triples
    rng = np.random.default_rng([seed, 0x56414C])
    return triples[np.sort(rng.choice(len(triples), size=limit, replace=False))]


def train_link_predictor(
    splits: LinkSplits,
    config: LinkTrainConfig,
    feature_store: FeatureStore | None = None,
    graph_store: GraphStore | None = None,
    logger: MetricLogger | None = None,
    sampler: BaseSampler | None = None,
    eval_sampler: BaseSampler | None = None,
    progress: Progress = True,
    checkpoints: CheckpointDir | str | os.PathLike[str] | None = None,
    resume: bool = False,
    on_epoch_end: EpochCallback | None = None,
    train_batches: BatchSource | None = None,
    eval_ranks: tuple[RankFn, RankFn] | None = None,
    fingerprint_data: Sequence[torch.Tensor] | None = None,
) -> LinkTrainResult:
    r"""Train a link predictor with negative-sampled mini-batches.

    Args:
        splits (LinkSplits): Training, validation and test triples
            (:func:`~gnncore.train.link.data.link_splits`).
        config (LinkTrainConfig): Hyper-parameters; validated here.
        feature_store (FeatureStore, optional): Node features ``"x"`` for GNN
            encoders; without it (or without ``"x"``) node embeddings are
            learned. (default: :obj:`None`)
        graph_store (GraphStore, optional): The message-passing graph; default
            the training triples in both directions
            (:func:`~gnncore.train.link.data.message_passing_csc`).
        logger (RunLogger, optional): Per epoch ``train_loss``, ``val_mrr``,
            ``val_hits_at_k``, ``val_mean_rank`` and the throughput figures; at
            the end ``test_mrr``, ``test_hits_at_k``, ``test_mean_rank``,
            ``best_val_mrr``, ``best_epoch``, ``stopped_epoch``,
            ``resumed_from_epoch`` and ``seconds``.
        sampler, eval_sampler (BaseSampler, optional): Training sampler (must
            implement ``sample_from_edges``) and the sampler encoding all nodes
            for evaluation; default ``config.sampler``'s sampler
            (:func:`gnncore.sampler.build_sampler`) with ``config.fanouts`` /
            ``config.eval_fanouts``.
        progress (bool): tqdm bars. (default: :obj:`True`)
        checkpoints (CheckpointDir or path, optional): Per-epoch checkpoints.
        resume (bool): Continue from the newest checkpoint in ``checkpoints``.
        on_epoch_end (callable, optional): ``f(epoch, checkpoint_path)``.
        train_batches (BatchSource, optional): Where training batches come
            from (:mod:`gnncore.train.core.batches`), yielding
            :class:`~torch_geometric.loader.LinkLoader` triplet batches over
            the training edges (``input_id`` indexes them). Default: a
            :class:`~gnncore.train.core.batches.LoaderBatchSource` over a
            shuffled ``LinkLoader``. A source that manages the embedding
            table itself (a partition buffer,
            :class:`~gnncore.outofcore.link_buffer.LinkBufferSource`) defines
            ``embedding_rows`` (the model's table is that many rows),
            ``bind(model, optimizer)``, ``node_embeddings()`` (evaluation reads
            them), ``keep_best()`` (after an improving epoch) and
            ``restore_best()`` (before the test); its table on disk is
            snapshotted beside each checkpoint and restored on ``resume``
            through its ``checkpoint_files`` / ``restore_files`` hooks
            (:class:`~gnncore.train.core.session.TrainingSession`).
            A source that is one process of a distributed run
            (:class:`~gnncore.distributed.link_source.DistLinkSource`) may
            define ``main_process`` (``False``: read checkpoints, never write
            them), ``wrap_model(module) -> module`` (what the training step
            calls: :class:`LinkLogits` of the model, e.g. in
            :class:`~torch.nn.parallel.DistributedDataParallel`; checkpoints,
            evaluation and the result keep the model) and ``reduce_sum(tensor)
            -> tensor`` (the ranking sums of :meth:`RankingMetrics.from_ranks`
            summed over the processes, so every process gets the same metrics).
        eval_ranks (tuple, optional): ``(val, test)`` functions
            ``ranks(model, device, amp_dtype) -> Tensor`` giving the filtered
            ranks of this process's validation / test queries, instead of a
            :class:`LinkEvaluator` over ``splits`` (no graph store, sampler or
            known-edge index is built when ``train_batches`` is given too).
        fingerprint_data (sequence of Tensor, optional): What identifies the
            data in checkpoints (default: the splits' triples); a distributed
            run passes a summary that is the same on every process.
    """
    config.validate()
    if resume and checkpoints is None:
        raise ConfigError("resume=True needs a checkpoint directory (checkpoints=...)")
    started = time.perf_counter()
    device = resolve_device(config.device)
    amp_dtype, scaler = amp_settings(config, device)
    torch.manual_seed(config.seed)
    num_nodes, num_relations = splits.num_nodes, splits.num_relations
    if len(splits.train) == 0:
        raise ValueError("no training triples")

    own_data = train_batches is not None and eval_ranks is not None
    if graph_store is None and not own_data:
        from gnncore.store import CSCGraphStore

        graph_store = CSCGraphStore(*message_passing_csc(splits.train, num_nodes))
    if feature_store is None:
        from gnncore.store import EmptyFeatureStore

        feature_store = EmptyFeatureStore()
    in_channels = None
    if config.model != "none" and any(
        a.attr_name == "x" for a in feature_store.get_all_tensor_attrs()
    ):
        size = feature_store.get_tensor_size(group_name=None, attr_name="x")
        in_channels = int(size[1]) if size is not None and len(size) == 2 else None
    # Undirected edge splits are their own reverse: no reciprocal relations.
    reciprocal = config.reciprocal and not splits.symmetric
    decoder_relations = 2 * num_relations if reciprocal else num_relations
    # A source managing the embedding table (a partition buffer): see train_batches.
    buffer: Any = train_batches if hasattr(train_batches, "embedding_rows") else None
    buffered = buffer is not None
    model = LinkModel(
        buffer.embedding_rows if buffered else num_nodes,
        decoder_relations,
        config.dim,
        encoder=config.model,
        decoder=config.decoder,
        num_layers=max(config.num_layers, 1),
        in_channels=in_channels,
        dropout=config.dropout,
        heads=config.heads,
    ).to(device)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=config.lr)
    if buffered:
        buffer.bind(model, optimizer)

    from gnncore.sampler import build_sampler

    if sampler is None and not own_data:
        assert graph_store is not None
        sampler = build_sampler(
            config.sampler, graph_store, config.fanouts or (0,), seed=config.seed
        )
    if eval_sampler is None and config.model != "none" and eval_ranks is None:
        assert graph_store is not None
        eval_sampler = build_sampler(
            config.sampler,
            graph_store,
            config.eval_fanouts or (-1,) * config.num_layers,
            seed=config.seed + 1,
        )

    edge_index, edge_relation = training_edges(splits, reciprocal)
    weights = None
    if config.negative_sampling == "degree":
        weights = torch.from_numpy(
            degree_weights(num_nodes, splits.train[:, 0], splits.train[:, 2])
        )
    amount = math.ceil(config.num_negatives / config.batch_size)
    generator = torch.Generator().manual_seed(config.seed)
    data = (feature_store, graph_store)
    workers = config.num_workers
    if train_batches is None:
        assert graph_store is not None and sampler is not None
        train_loader = LinkLoader(
            data,
            sampler,
            edge_label_index=(None, edge_index),
            neg_sampling=NegativeSampling("triplet", amount, dst_weight=weights),
            batch_size=config.batch_size,
            shuffle=True,
            generator=generator,
            num_workers=workers,
            persistent_workers=workers > 0,
            pin_memory=device.type == "cuda",
        )
        train_batches = LoaderBatchSource(
            train_loader,
            feature_store,
            generator,
            {"train": sampler},
            device,
            config.prefetch_workers,
            config.prefetch_depth,
        )
    if eval_ranks is None:
        eval_ranks = _split_rankers(
            splits, config, feature_store, graph_store, eval_sampler, weights, buffer, reciprocal
        )
    val_ranks, test_ranks = eval_ranks
    fingerprint = data_fingerprint(
        list(fingerprint_data) if fingerprint_data is not None else splits.tensors(),
        num_relations,
        in_channels or 0,
    )

    session = TrainingSession(
        checkpoints,
        config,
        fingerprint,
        model,
        optimizer,
        scaler,
        train_batches,
        device,
        getattr(logger, "run_id", None),
        eval_samplers={"eval": eval_sampler} if eval_sampler else {},
    )
    state = session.resume_progress(resume, _Progress, logger)

    optimize = OptimizerStep(optimizer, scaler, config.max_grad_norm)
    wrap_model = getattr(train_batches, "wrap_model", None)
    logits = LinkLogits(model)
    step_model = wrap_model(logits) if callable(wrap_model) else logits
    reduce_sum = getattr(train_batches, "reduce_sum", None)
    reduce = reduce_sum if callable(reduce_sum) else None

    def metrics(ranks: RankFn) -> RankingMetrics:
        return RankingMetrics.from_ranks(ranks(model, device, amp_dtype), reduce)

    def epoch_ended(epoch: int, path: Any) -> None:
        if buffered and state.best_epoch == epoch:
            buffer.keep_best()
        if on_epoch_end is not None:
            on_epoch_end(epoch, path)

    def run_test() -> RankingMetrics:
        if buffered:
            buffer.restore_best()
        return metrics(test_ranks)

    def step(batch: Any, timer: EpochTimer, total_loss: torch.Tensor) -> int:
        return _train_step(
            step_model,
            batch,
            edge_relation,
            optimize,
            device,
            amp_dtype,
            config.num_negatives,
            timer,
            total_loss,
        )

    # Adagrad's sparse update of the embedding table builds COO tensors from valid
    # indices. PyTorch skips their invariant checks by default and warns unless the
    # choice is explicit: make it explicit for the epochs (the same setting).
    with torch.sparse.check_sparse_tensor_invariants(enable=False):
        session.run_epochs(
            state,
            epochs=config.epochs,
            patience=config.patience,
            step=step,
            validate=lambda: metrics(val_ranks),
            logger=logger,
            on_epoch_end=epoch_ended,
            progress=progress,
            describe=lambda loss, val, state: {
                "loss": f"{loss:.4f}",
                "val_mrr": f"{val.mrr:.4f}",
                "best": f"{state.best_val_mrr:.4f}@{state.best_epoch}",
            },
        )

    outcome = session.finish(
        state,
        run_test,
        started=started,
        logger=logger,
        final_metrics=lambda m: {
            **m.as_dict("test_", metric_names=True),
            "best_val_mrr": state.best_val_mrr,
        },
    )
    fields = session.result_fields(state, outcome)
    if buffered:  # the returned model carries the whole table of the best epoch
        fields["model"] = _with_table(fields["model"], buffer.node_embeddings())
    return LinkTrainResult(
        **fields,
        val_mrr=state.val_mrr,
        best_val_mrr=state.best_val_mrr,
        test=outcome.test,
        val_hits10=state.val_hits10,
    )


def _with_table(model: LinkModel, table: torch.Tensor) -> LinkModel:
    """``model`` with its (buffer) embedding table replaced by ``table`` ``[N, dim]``."""
    embedding = torch.nn.Embedding(table.size(0), table.size(1), sparse=True)
    with torch.no_grad():
        embedding.weight.copy_(table)
    model.embedding = embedding.to(next(model.parameters()).device)
    return model


def _split_rankers(
    splits: LinkSplits,
    config: LinkTrainConfig,
    feature_store: FeatureStore,
    graph_store: GraphStore | None,
    eval_sampler: BaseSampler | None,
    weights: torch.Tensor | None,
    buffer: Any,
    reciprocal: bool,
) -> tuple[RankFn, RankFn]:
    """The ranks of the validation (a subset of ``max_eval_triples``) and test
    queries of a single process: :class:`LinkEvaluator` over every node's
    representations (the buffer's table, or one pass of a node loader)."""
    num_nodes = splits.num_nodes
    workers = config.num_workers
    node_loader = None
    if eval_sampler is not None:
        assert graph_store is not None
        node_loader = NodeLoader(
            (feature_store, graph_store),
            node_sampler=eval_sampler,
            input_nodes=torch.arange(num_nodes),
            batch_size=max(config.eval_batch_size, 1024),
            num_workers=workers,
            persistent_workers=workers > 0,
            pin_memory=resolve_device(config.device).type == "cuda",
        )
    known = known_edges(
        [splits.train, splits.val, splits.test],
        num_nodes,
        splits.num_relations,
        symmetric=splits.symmetric,
    )
    eval_draw = NegativeDraw(num_nodes, weights) if config.eval_negatives else None
    embeddings = buffer.node_embeddings if buffer is not None else None
    val_triples = _eval_subset(splits.val, config.max_eval_triples, config.seed)
    evaluators = [
        LinkEvaluator(
            triples,
            known,
            config,
            splits.num_relations,
            reciprocal,
            node_loader,
            eval_draw,
            embeddings,
        )
        for triples in (val_triples, splits.test)
    ]
    return evaluators[0].ranks, evaluators[1].ranks


def _train_step(
    model: torch.nn.Module,
    batch: Any,
    edge_relation: torch.Tensor,
    optimize: OptimizerStep,
    device: torch.device,
    amp_dtype: torch.dtype | None,
    num_negatives: int,
    timer: EpochTimer,
    total_loss: torch.Tensor,
) -> int:
    """Softmax cross-entropy of every positive against the batch's shared
    negatives (``model``: :class:`LinkLogits`, or a wrapper of it); adds the
    summed loss to ``total_loss`` and returns the positives."""
    timer.count(batch)
    with timer.phase("transfer"):
        batch = batch.to(device, non_blocking=True)
        relation = edge_relation[batch.input_id.cpu()].to(device, non_blocking=True)
    with timer.phase("compute"):
        optimize.zero_grad()
        with autocast(device, amp_dtype):
            logits = model(batch, relation, num_negatives)
        target = torch.zeros(logits.size(0), dtype=torch.long, device=device)
        loss = F.cross_entropy(logits.float(), target)
        optimize(loss)
        total_loss += loss.detach() * logits.size(0)
    return int(logits.size(0))
