r"""Node classification's batch source: one rank's sampled batches of its nodes.

DistDGL's trainer (ALGORITHMS.md §2, §8) as one more
:class:`~gnncore.train.core.batches.BatchSource` of
:func:`~gnncore.train.fit` of a :class:`~gnncore.train.NodeTask`; the loop, the session and the
checkpoints are the single-process ones.

* **Training ids.** Rank ``r`` trains on the training nodes it owns. When the
  ranks own unequal numbers, the ones with a surplus hand a random subset of
  it (drawn from ``(seed, rank)``) to the ones short of nodes
  (:func:`~gnncore.distributed.collectives.transfer_plan`), so each ends up
  with ``T // W`` or ``T // W + 1`` of the ``T`` training nodes and keeps all
  it can of its own.
* **Equal batch counts.** ``config.batch_size`` is the global batch of one
  optimiser step, so each rank takes ``B = ceil(batch_size / W)`` seeds per
  batch, and every rank runs ``K = max_r ceil(n_r / B)`` batches per epoch:
  its shuffled ids (drawn from ``(seed, epoch, rank)``) split into ``K``
  near-equal batches, so no collective is left unmatched. The sampler
  (:class:`~gnncore.distributed.sampler.DistNeighborSampler`) and the feature
  store (:class:`~gnncore.distributed.feature_store.DistFeatureStore`) run
  their exchanges in ``prefetch_workers`` threads ahead of compute when it is
  above 0 (:mod:`~gnncore.distributed.source.ahead`, each thread on a
  process group of its own, so batch ``i + 1``'s exchange overlaps batch
  ``i``'s forward and backward pass and its gradient all-reduce), else in
  the training thread, between the all-reduces of
  :class:`~torch.nn.parallel.DistributedDataParallel`. A single rank draws
  and reads alone, with no collective.
* **Evaluation** is sharded the same way (balanced, ``K`` batches per rank,
  a rank with no seeds left in a round still serves its peers) and the
  confusion matrices are summed with ``all_reduce``: every rank gets the same
  accuracy, so early stopping and the best epoch agree on every rank.
* **Rank 0** alone logs and writes checkpoints (``main_process``); every rank
  loads the checkpoint when resuming. The per-rank figures of each epoch
  (remote-row share, rows and bytes fetched, seconds of sampling, feature
  exchange and compute, peak RSS) are gathered to every rank by :meth:`adapt`
  and logged by rank 0 as ``rank<r>_<figure>``, with totals as ``dist_*``
  (:class:`~gnncore.distributed.source.base.RankSource`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch_geometric.data import Data, TensorAttr
from torch_geometric.sampler import NodeSamplerInput

from gnncore.distributed.collectives import all_counts, balance_ids, max_over
from gnncore.distributed.feature_store import DistFeatureStore, Replica
from gnncore.distributed.rank_data import RankData
from gnncore.distributed.sampler import DistNeighborSampler, sampled_data
from gnncore.distributed.source.ahead import AheadBatches, side_group
from gnncore.distributed.source.base import RankFigures, RankSource, split_batches
from gnncore.train.node.config import ConfigError, NodeTrainConfig


class DistBatchSource(RankSource):
    r"""This rank's training batches for :func:`~gnncore.train.fit`
    (see the module docstring); also its evaluation batches (:meth:`eval_batches`).

    Args:
        data (RankData): This rank's data (its rank and part count match the group).
        config (NodeTrainConfig): ``fanouts``, ``eval_fanouts``, ``batch_size``,
            ``eval_batch_size`` and ``seed`` are read.
        device (torch.device): The training device (CUDA with NCCL: this rank's GPU).
        group (ProcessGroup, optional): The group (default: the default group).
    """

    def __init__(
        self,
        data: RankData,
        config: NodeTrainConfig,
        device: torch.device,
        group: Any = None,
    ) -> None:
        self.data = data
        self.config = config
        self.device = device
        self.group = group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        #: Only rank 0 logs and writes checkpoints.
        self.main_process = self.rank == 0
        self.feature_store = DistFeatureStore(data, group, replica=Replica.of(data))
        # An MLP reads no edges: sample the seeds only.
        hops = (0,) * config.num_layers if config.model == "none" else config.fanouts
        self.sampler = DistNeighborSampler(data, hops, seed=config.seed, group=group)
        # With prefetch threads, training batches are sampled and exchanged in
        # threads ahead of compute, each over a group of its own (AheadBatches).
        lane_groups = [side_group(group) for _ in range(int(config.prefetch_workers))]
        self._lanes = [
            (self.sampler.on_group(g), self.feature_store.on_group(g)) for g in lane_groups
        ]
        self._figures_lock = threading.Lock()
        eval_hops = (
            (0,) * config.num_layers
            if config.model == "none"
            else config.eval_fanouts or (-1,) * config.num_layers
        )
        self.eval_sampler = DistNeighborSampler(data, eval_hops, seed=config.seed + 1, group=group)
        #: Unused for shuffling (epoch ``e`` of rank ``r`` shuffles with ``(seed, e, r)``,
        #: so a resumed rank draws what it would have); kept for the checkpoint.
        self.generator = torch.Generator().manual_seed(config.seed)
        self.split_ids = {
            s: balance_ids(data.split_ids(s), config.seed + i, group)
            for i, s in enumerate(("train", "val", "test"))
        }
        total_train = int(all_counts(len(self.split_ids["train"]), group).sum())
        if total_train < self.world:
            raise ConfigError(
                f"{total_train} training nodes cannot feed {self.world} ranks (one at least each)"
            )
        #: Seeds per rank and batch: ``config.batch_size`` is the global batch (one
        #: optimiser step of DDP averages the ranks' gradients), as in one process.
        self.batch_size = -(-config.batch_size // self.world)
        self.num_batches = max_over(-(-len(self.split_ids["train"]) // self.batch_size), group)
        self._plan: list[np.ndarray] = []
        self.epoch_figures = RankFigures()
        self._stats_at_start: dict[str, float] = {}
        self._last: dict[str, float] = {}

    # The loop's hooks ------------------------------------------------------

    def start_epoch(self, epoch: int) -> None:
        rng = np.random.default_rng([self.config.seed, epoch, self.rank])
        self._plan = split_batches(self.split_ids["train"], self.num_batches, rng)
        self.epoch_figures = RankFigures()
        self._stats_at_start = self.feature_store.stats.as_dict()

    def batches(self) -> contextlib.AbstractContextManager[Iterator[Any]]:
        """The epoch's training batches: with ``config.prefetch_workers > 0``
        sampled and exchanged at most ``config.prefetch_depth`` batches ahead in
        that many threads (:class:`~gnncore.distributed.source.ahead.AheadBatches`),
        else in the loop; the same batches either way."""
        plan, figures = self._plan, self.epoch_figures
        if not self._lanes:  # prefetch_workers 0: in the loop
            return contextlib.nullcontext(self._iterate(plan, self.sampler, figures))
        first = self.sampler.reserve(len(plan))
        lanes = [self._lane(plan, w, first, figures) for w in range(len(self._lanes))]
        return AheadBatches(lanes, int(self.config.prefetch_depth), self.device)

    def _lane(
        self, plan: list[np.ndarray], lane: int, first: int, figures: RankFigures
    ) -> Callable[[], Iterator[Data]]:
        """Lane ``lane``'s share of ``plan`` (batches ``lane, lane + k, ...`` of
        ``k`` lanes), batch ``i`` drawn with the sampler's counter ``first + i``
        over the lane's own group; its figures are added to ``figures`` when it
        ends. Training plans have no empty batch, so the lanes' round-robin
        gives the plan's order back."""
        sampler, store = self._lanes[lane]
        step = len(self._lanes)

        def make() -> Iterator[Data]:
            own = RankFigures()
            try:
                for i in range(lane, len(plan), step):
                    batch = self._batch(plan[i], sampler, own, store, counter=first + i)
                    if batch is not None:
                        yield batch
            finally:
                with self._figures_lock:
                    figures.add(own)

        return make

    # Evaluation ------------------------------------------------------------

    def eval_batches(self, split: str) -> DistEvalBatches:
        """``split``'s batches on this rank (``val`` or ``test``), in a fixed order."""
        return DistEvalBatches(self, split)

    # Internals -------------------------------------------------------------

    def _iterate(
        self,
        plan: list[np.ndarray],
        sampler: DistNeighborSampler,
        figures: RankFigures,
        store: DistFeatureStore | None = None,
    ) -> Iterator[Data]:
        """The batches of ``plan`` (a batch without seeds takes part in the
        exchanges and is not yielded; training plans have none), their rows
        gathered through ``store`` (default: :attr:`feature_store`)."""
        store = self.feature_store if store is None else store
        for seeds in plan:
            batch = self._batch(seeds, sampler, figures, store)
            if batch is not None:
                yield batch

    def _batch(
        self,
        seeds: np.ndarray,
        sampler: DistNeighborSampler,
        figures: RankFigures,
        store: DistFeatureStore,
        counter: int | None = None,
    ) -> Data | None:
        """One batch (``None`` for no seeds, after taking part in the exchanges);
        ``counter``: the sampler's batch counter (default: its next)."""
        started = time.perf_counter()
        out = sampler.sample_from_nodes(
            NodeSamplerInput(None, torch.from_numpy(seeds)), counter=counter
        )
        sampled = time.perf_counter()
        x, y = store.multi_get_tensor(
            [TensorAttr(None, "x", out.node), TensorAttr(None, "y", out.node)]
        )
        figures.sample_s += sampled - started
        figures.exchange_s += time.perf_counter() - sampled
        if not len(seeds):
            return None
        figures.batches += 1
        figures.seeds += len(seeds)
        return sampled_data(out, x=x, y=y, batch_size=len(seeds))


class DistEvalBatches:
    """One split's evaluation batches on this rank: its balanced share, cut into
    as many batches as the rank with the most needs (a round without seeds here
    still serves the peers and yields nothing); the sampler restarts each pass,
    so every evaluation draws the same neighbourhoods."""

    def __init__(self, source: DistBatchSource, split: str) -> None:
        self.source = source
        ids = source.split_ids[split]
        size = source.config.eval_batch_size
        rounds = max_over(-(-len(ids) // size), source.group)
        self.plan = [ids[i * size : (i + 1) * size] for i in range(rounds)]
        self.figures = RankFigures()

    def __len__(self) -> int:
        return len(self.plan)

    def __iter__(self) -> Iterator[Data]:
        sampler = self.source.eval_sampler
        sampler._num_batches = 0  # the same draws at every evaluation
        yield from self.source._iterate(self.plan, sampler, self.figures)


__all__ = ["DistBatchSource", "DistEvalBatches"]
