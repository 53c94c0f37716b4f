r"""Distributed link prediction: one rank's training batches and its share of evaluation.

:class:`DistLinkSource` is a batch source of the single-process link loop
(:func:`~gnncore.train.fit` of a :class:`~gnncore.train.LinkTask`), as
:class:`~gnncore.distributed.source.node.DistBatchSource` is of node
classification, with the same hooks (``main_process``, ``wrap_model``: DDP,
``reduce_sum``: ``all_reduce``) and the same per-rank figures
(:class:`~gnncore.distributed.source.base.RankSource`).

* **Edges.** Rank ``r`` starts from the training, validation and test triples
  whose head it owns (``link_*.npy``, :mod:`gnncore.distributed.link_data`).
  Ranks with a surplus hand a random subset to the ranks short of triples
  (:func:`~gnncore.distributed.collectives.balance_rows`, the plan of
  :func:`~gnncore.distributed.collectives.transfer_plan`: ``T // W`` or
  ``T // W + 1`` each, as few moves as possible). The training edges are a
  rank's triples and their reverses (:func:`~gnncore.train.link.loop.training_edges`),
  so a triple and its reverse stay on one rank.
* **Batches.** ``config.batch_size`` is the global batch of one optimiser
  step: ``B = ceil(batch_size / W)`` positives per rank and batch, ``K =
  max_r ceil(E_r / B)`` batches per epoch on every rank (the edges shuffled by
  ``(seed, epoch, rank)``; :func:`~gnncore.distributed.source.base.split_batches`).
* **Negatives.** Each batch draws ``num_negatives`` ids uniformly over the
  **global** ids ``[0, N)`` (:func:`draw_negatives`, seeded by ``(seed, epoch,
  rank, batch)``), shared by the batch's positives: each positive is scored
  against as many uniform negatives as in one process.
* **Neighbourhoods.** The heads, tails and negatives (distinct) are the seeds
  of :class:`~gnncore.distributed.sampler.DistNeighborSampler` over the
  message-passing graph of the training edges (:class:`LinkRankData`; one
  exchange per hop), their rows come from
  :class:`~gnncore.distributed.feature_store.DistFeatureStore` (one exchange).
* **Evaluation** (:meth:`DistLinkSource.ranker`). Every rank encodes its core
  nodes (the evaluation fan-outs; all neighbours by default), then ranks its
  own validation or test queries, both directions, exactly as
  :func:`~gnncore.train.link.ranking.filtered_ranks` does in one process: the
  **candidates are all ``N`` nodes**, the known answers of the training,
  validation and test triples filtered out, ties counting half. The ranks
  share the work by candidates: the query vectors of every rank go to every
  rank (one exchange per round), each rank scores them against its own core
  nodes, filters with the known answers it owns (``link_known.npy``) and counts
  the candidates above and tied with the answer; the counts are summed over
  the ranks (``reduce_sum``) and each rank keeps its own queries' ranks. The
  loop then sums the ranking sums over the ranks
  (:meth:`~gnncore.train.link.ranking.RankingMetrics.from_ranks`), so every
  rank gets the same MRR and Hits@k and early stopping agrees.

Learned embeddings (graphs without features) are not sharded yet:
:func:`check_link_config` refuses them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import torch
import torch.distributed as dist
from torch_geometric.data import Data, TensorAttr
from torch_geometric.sampler import NodeSamplerInput

from gnncore.distributed.collectives import all_counts, balance_rows, exchange, max_over
from gnncore.distributed.feature_store import DistFeatureStore
from gnncore.distributed.link_data import LINK_SPLITS
from gnncore.distributed.rank_data import RankData
from gnncore.distributed.sampler import DistNeighborSampler, sampled_data
from gnncore.distributed.source.ahead import AheadBatches, side_group
from gnncore.distributed.source.base import RankFigures, RankSource, split_batches
from gnncore.errors import InputError
from gnncore.sampler.negative import KnownEdges, NegativeDraw
from gnncore.train.core.config import ConfigError
from gnncore.train.core.steps import autocast
from gnncore.train.link.config import LinkTrainConfig
from gnncore.train.link.data import LinkSplits
from gnncore.train.link.loop import RankFn, training_edges
from gnncore.train.link.models import LinkModel
from gnncore.train.link.ranking import _outranking, ranking_queries

#: Stream tag of the negative draws (apart from every other draw of a seed).
_NEGATIVES = 0x4E4547


class LinkRankData(RankData):
    """A rank's data whose adjacency (``indptr``, ``indices``, ``edge_ids``,
    ``halo``) is the link message-passing graph (``link_*.npy``): what the
    samplers of link prediction read, so validation and test edges are never
    sampled. Features and everything else are the rank data's own."""

    _ADJACENCY: ClassVar[dict[str, str]] = {
        name: f"link_{name}" for name in ("indptr", "indices", "edge_ids", "halo")
    }

    @classmethod
    def of(cls, data: RankData) -> LinkRankData:
        """The link view of ``data``.

        Raises:
            InputError: The rank data was written without its link files.
        """
        if not data.has("link_indptr"):
            raise InputError(
                f"rank {data.rank} holds no link-prediction files: write the rank data with "
                "link=True (gnncore train --task link --nproc N writes it)",
                data.dir,
            )
        return cls(data.path, data.rank, data.info)

    def has(self, name: str) -> bool:
        return super().has(self._ADJACENCY.get(name, name))

    def array(self, name: str) -> np.ndarray:
        return super().array(self._ADJACENCY.get(name, name))


def draw_negatives(
    seed: int, epoch: int, rank: int, batch: int, num_nodes: int, count: int
) -> np.ndarray:
    """The ``count`` negatives of batch ``batch`` of epoch ``epoch`` on rank
    ``rank``: uniform over the global ids ``[0, num_nodes)``, with replacement
    (single-process training's distribution), reproducible from the four numbers."""
    rng = np.random.default_rng([seed, epoch, rank, batch, _NEGATIVES])
    return NegativeDraw(num_nodes)(rng, count)


def check_link_config(config: LinkTrainConfig, num_features: int) -> None:
    """Refuse what distributed link prediction does not support (``ConfigError``)."""
    if num_features == 0 or config.model == "none":
        raise ConfigError(
            "distributed link prediction needs node features and a GNN encoder: learned "
            "embeddings (model 'none', or a graph without features) are not sharded across "
            "ranks yet"
        )
    # The ranks read their rank data whatever the mode: auto, mmap and in_memory alike.
    if config.mode not in ("auto", "mmap", "in_memory"):
        raise ConfigError(f"distributed link prediction reads rank data, not mode {config.mode!r}")
    unsupported = {
        "negative_sampling": config.negative_sampling != "uniform",
        "eval_negatives": config.eval_negatives != 0,
        "max_eval_triples": config.max_eval_triples != 0,
        "num_workers": config.num_workers != 0,
    }
    for name, bad in unsupported.items():
        if bad:
            raise ConfigError(
                f"distributed link prediction: {name} is not supported (uniform negatives, "
                "ranking against all nodes, all validation triples, no loader workers)"
            )


class DistLinkSource(RankSource):
    r"""This rank's link-prediction batches (see the module docstring) and its
    evaluation (:meth:`ranker`). It shares the hooks of
    :class:`~gnncore.distributed.source.base.RankSource`:
    ``main_process``, ``wrap_model`` (DDP), ``reduce_sum``, the per-rank
    figures of ``end_epoch`` / ``adapt`` (``seeds`` counts positives here),
    ``random_state`` and ``rank_report``.

    Args:
        data (RankData): This rank's data, written with ``link=True``.
        config (LinkTrainConfig): Checked by :func:`check_link_config`.
        device (torch.device): The training device.
        group (ProcessGroup, optional): The group (default: the default group).
    """

    def __init__(
        self,
        data: RankData,
        config: LinkTrainConfig,
        device: torch.device,
        group: Any = None,
    ) -> None:
        check_link_config(config, data.num_features)
        self.data = data
        self.link = LinkRankData.of(data)
        self.link_config = config
        self.device = device
        self.group = group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        self.main_process = self.rank == 0
        info = data.info["link"]
        self.num_relations = int(info["num_relations"])
        symmetric = bool(info["symmetric"])
        self.reciprocal = config.reciprocal and not symmetric
        self.feature_store = DistFeatureStore(data, group)
        # With prefetch threads, training batches are sampled and exchanged in a
        # thread ahead of compute, over a group of their own (AheadBatches).
        self.ahead = int(config.prefetch_workers) > 0
        train_group = side_group(group) if self.ahead else group
        self._train_store = self.feature_store.on_group(train_group)
        self.sampler = DistNeighborSampler(
            self.link, config.fanouts, seed=config.seed, group=train_group
        )
        eval_fanouts = config.eval_fanouts or (-1,) * config.num_layers
        self.eval_sampler = DistNeighborSampler(
            self.link, eval_fanouts, seed=config.seed + 1, group=group
        )
        self.generator = torch.Generator().manual_seed(config.seed)
        triples = {
            split: balance_rows(
                np.asarray(self.link.array(f"link_{split}")), config.seed + i, group
            )
            for i, split in enumerate(LINK_SPLITS)
        }
        #: This rank's balanced triples (what the loop trains and ranks here).
        self.splits = LinkSplits(
            triples["train"],
            triples["val"],
            triples["test"],
            data.num_nodes,
            self.num_relations,
            str(info["source"]),
            symmetric,
        )
        #: Rows of each split on this rank (``train_ids`` in the rank report).
        self.split_ids = triples
        total = int(all_counts(len(self.splits.train), group).sum())
        if total < self.world:
            raise ConfigError(
                f"{total} training triples cannot feed {self.world} ranks (one at least each)"
            )
        edge_index, _ = training_edges(self.splits, self.reciprocal)
        self.edge_index = edge_index.numpy()
        self.batch_size = -(-config.batch_size // self.world)
        self.num_batches = max_over(-(-self.edge_index.shape[1] // self.batch_size), group)
        self.known = KnownEdges.from_triples(
            np.asarray(self.link.array("link_known")), data.num_nodes, 2 * self.num_relations
        )
        self._plan: list[np.ndarray] = []
        self._epoch = 0
        self.epoch_figures = RankFigures()
        self._stats_at_start: dict[str, float] = {}
        self._last: dict[str, float] = {}

    # Training ---------------------------------------------------------------

    def start_epoch(self, epoch: int) -> None:
        rng = np.random.default_rng([self.link_config.seed, epoch, self.rank])
        self._plan = split_batches(
            np.arange(self.edge_index.shape[1], dtype=np.int64), self.num_batches, rng
        )
        self._epoch = epoch
        self.epoch_figures = RankFigures()
        self._stats_at_start = self.feature_store.stats.as_dict()

    def batches(self) -> contextlib.AbstractContextManager[Iterator[Any]]:
        """The epoch's training batches: with ``prefetch_workers > 0`` sampled and
        exchanged ``prefetch_depth`` batches ahead in a thread
        (:class:`~gnncore.distributed.source.ahead.AheadBatches`), else in the
        loop; the same batches either way."""
        plan, epoch = self._plan, self._epoch

        def make() -> Iterator[Data]:
            return (self.link_batch(edges, epoch, i) for i, edges in enumerate(plan))

        if self.ahead:
            return AheadBatches(make, int(self.link_config.prefetch_depth), self.device)
        return contextlib.nullcontext(make())

    def link_batch(self, edges: np.ndarray, epoch: int, index: int) -> Data:
        """The triplet batch of training edges ``edges`` (rows of the rank's
        training edges), batch ``index`` of ``epoch``: what the link loop's step
        reads (``src_index``, ``dst_pos_index``, ``dst_neg_index`` into ``n_id``,
        ``input_id``: the edges), a collective (sampling and features)."""
        config = self.link_config
        started = time.perf_counter()
        heads, tails = self.edge_index[0, edges], self.edge_index[1, edges]
        negatives = draw_negatives(
            config.seed, epoch, self.rank, index, self.data.num_nodes, config.num_negatives
        )
        seeds, position = np.unique(np.concatenate([heads, tails, negatives]), return_inverse=True)
        out = self.sampler.sample_from_nodes(NodeSamplerInput(None, torch.from_numpy(seeds)))
        sampled = time.perf_counter()
        x = self._train_store.get_tensor(TensorAttr(None, "x", out.node))
        figures = self.epoch_figures
        figures.sample_s += sampled - started
        figures.exchange_s += time.perf_counter() - sampled
        figures.batches += 1
        figures.seeds += len(edges)
        index_of = torch.from_numpy(position.astype(np.int64))
        count = len(edges)
        return sampled_data(
            out,
            x=x,
            batch_size=len(seeds),
            src_index=index_of[:count],
            dst_pos_index=index_of[count : 2 * count],
            dst_neg_index=index_of[2 * count :],
            input_id=torch.from_numpy(np.asarray(edges, dtype=np.int64)),
        )

    # Evaluation -------------------------------------------------------------

    def ranker(self, split: str) -> RankFn:
        """``ranks(model, device, amp_dtype)``: the filtered ranks of this rank's
        ``split`` queries (``val`` or ``test``) against all nodes (a collective;
        see the module docstring)."""
        triples = self.splits.val if split == "val" else self.splits.test

        @torch.no_grad()
        def ranks(model: LinkModel, device: torch.device, amp_dtype: Any) -> torch.Tensor:
            model.eval()
            z = self.encode_core(model, device, amp_dtype)
            return self.rank_queries(z, model.decoder.query, triples, device)

        return ranks

    @torch.no_grad()
    def encode_core(
        self, model: LinkModel, device: torch.device, amp_dtype: Any = None
    ) -> torch.Tensor:
        """``[n_core, dim]`` representations of this rank's core nodes, in
        batches of ``max(eval_batch_size, 1024)`` (as one process encodes all
        nodes), as many rounds on every rank; the evaluation sampler restarts,
        so every evaluation draws the same neighbourhoods."""
        lo, hi = self.data.core_range
        size = max(self.link_config.eval_batch_size, 1024)
        rounds = max_over(-(-(hi - lo) // size), self.group)
        sampler = self.eval_sampler
        sampler._num_batches = 0
        z = torch.zeros(hi - lo, self.link_config.dim, device=device)
        for i in range(rounds):
            ids = np.arange(lo + i * size, min(lo + (i + 1) * size, hi), dtype=np.int64)
            out = sampler.sample_from_nodes(NodeSamplerInput(None, torch.from_numpy(ids)))
            x = self.feature_store.get_tensor(TensorAttr(None, "x", out.node))
            if not len(ids):
                continue
            batch = sampled_data(out, x=x).to(device)
            with autocast(device, amp_dtype):
                rows = model.encode_batch(batch)[: len(ids)].float()
            z[ids - lo] = rows
        return z

    def fetch_rows(self, z_core: torch.Tensor, ids: np.ndarray) -> torch.Tensor:
        """Rows of ``ids`` (global) of the ranks' ``z_core`` tables: each id
        asked of its owner (one request/response exchange; a collective)."""
        owner = self.data.owner(ids)
        order = np.argsort(owner, kind="stable")
        counts = np.bincount(owner, minlength=self.world).tolist()
        asked = exchange(list(torch.split(torch.from_numpy(ids[order]), counts)), self.group)
        lo = self.data.core_range[0]
        table = z_core.cpu()
        answers = [table[a - lo] for a in asked]
        got = torch.cat(exchange(answers, self.group))
        rows = torch.empty_like(got)
        rows[torch.from_numpy(order)] = got
        return rows

    def rank_queries(
        self,
        z_core: torch.Tensor,
        query: Any,
        triples: np.ndarray,
        device: torch.device,
        entity_chunk: int = 1 << 16,
    ) -> torch.Tensor:
        """Filtered ranks of this rank's queries of ``triples`` (both directions,
        tail queries first) against every node, each rank scoring its own core
        (a collective: as many rounds of ``eval_batch_size`` queries on every rank)."""
        source, decoder_rel, filter_rel, answer = ranking_queries(
            triples, self.num_relations, self.reciprocal
        )
        size = self.link_config.eval_batch_size
        rounds = max_over(-(-len(source) // size), self.group)
        lo = self.data.core_range[0]
        out = []
        for i in range(rounds):
            sl = slice(i * size, (i + 1) * size)
            mine = len(source[sl])
            rows = self.fetch_rows(z_core, np.concatenate([source[sl], answer[sl]]))
            z_src, z_answer = rows[:mine].to(device), rows[mine:].to(device)
            q = query(z_src, torch.from_numpy(decoder_rel[sl]).to(device)).float()
            true_score = (q * z_answer.float()).sum(-1, keepdim=True)
            # Every rank's queries, in rank order, on every rank.
            received = exchange([torch.cat([q, true_score], 1).cpu()] * self.world, self.group)
            first = sum(len(r) for r in received[: self.rank])
            vectors = torch.cat(received).to(device)
            keys = torch.cat(
                exchange(
                    [torch.from_numpy(np.stack([source[sl], filter_rel[sl]], 1))] * self.world,
                    self.group,
                )
            ).numpy()
            q_all, true_all = vectors[:, :-1], vectors[:, -1:]
            known_rows, known_cols = self.known.true_tails(keys[:, 0], keys[:, 1])
            counts = torch.zeros(len(keys), 2, dtype=torch.float64, device=device)
            for start in range(0, z_core.size(0), entity_chunk):
                stop = min(start + entity_chunk, z_core.size(0))
                scores = q_all @ z_core[start:stop].float().t()
                inside = (known_cols >= lo + start) & (known_cols < lo + stop)
                scores[
                    torch.from_numpy(known_rows[inside]).to(device),
                    torch.from_numpy(known_cols[inside] - lo - start).to(device),
                ] = float("-inf")
                greater, ties = _outranking(scores, true_all)
                counts[:, 0] += greater.double()
                counts[:, 1] += ties.double()
            counts = self.reduce_sum(counts)[first : first + mine]
            out.append((1.0 + counts[:, 0] + counts[:, 1] / 2.0).cpu())
        return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)
