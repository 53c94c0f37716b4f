r"""The pieces of link prediction that :class:`~gnncore.train.link.task.LinkTask`
assembles: the result and the per-epoch progress, the training step's logits
(every positive of a batch against all the batch's shared negatives, under a
softmax cross-entropy), and evaluation.

Evaluation encodes every node (the embedding table itself for
``model="none"``; otherwise a :class:`~torch_geometric.loader.NodeLoader`
pass with the evaluation fan-outs) and ranks each validation/test answer
with the filtered protocol of :mod:`gnncore.train.link.ranking`. Early stopping,
the best-epoch weights and per-epoch checkpoints work as in node
classification (:func:`~gnncore.train.fitting.fit`), with validation MRR as the metric.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.data import FeatureStore, GraphStore
from torch_geometric.loader import NodeLoader
from torch_geometric.sampler import BaseSampler

from gnncore.sampler.negative import KnownEdges, NegativeDraw
from gnncore.train.core.device import resolve_device
from gnncore.train.core.session import (
    EpochProgress,
    TrainResult,
    run_summary,
)
from gnncore.train.core.steps import OptimizerStep, autocast
from gnncore.train.core.throughput import EpochTimer
from gnncore.train.link.config import LinkTrainConfig
from gnncore.train.link.data import LinkSplits
from gnncore.train.link.models import LinkModel
from gnncore.train.link.ranking import RankingMetrics, filtered_ranks, known_edges


@dataclass(kw_only=True)
class LinkTrainResult(TrainResult):
    """What :func:`~gnncore.train.fit` of a :class:`~gnncore.train.LinkTask` returns:
    the shared :class:`~gnncore.train.core.session.TrainResult` fields (``model`` holds the
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
class LinkProgress(EpochProgress):
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


def with_table(model: LinkModel, table: torch.Tensor) -> LinkModel:
    """``model`` with its (buffer) embedding table replaced by ``table`` ``[N, dim]``."""
    embedding = torch.nn.Embedding(table.size(0), table.size(1), sparse=True)
    with torch.no_grad():
        embedding.weight.copy_(table)
    model.embedding = embedding.to(next(model.parameters()).device)
    return model


def split_rankers(
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


def train_step(
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
