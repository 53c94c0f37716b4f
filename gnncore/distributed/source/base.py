"""What every sampled batch source of the ranks shares: batch plans, per-rank
figures and the loop's hooks that do not depend on the task.

A batch source is what a rank hands the shared training loop instead of a
single-process loader (:class:`~gnncore.train.core.batches.BatchSource`): its
training batches per epoch and the hooks the loop calls. Node classification's
(:class:`~gnncore.distributed.source.node.DistBatchSource`) and link
prediction's (:class:`~gnncore.distributed.source.link.DistLinkSource`) both
sample through :class:`~gnncore.distributed.sampler.DistNeighborSampler` and
fetch rows through :class:`~gnncore.distributed.feature_store.DistFeatureStore`;
:class:`RankSource` holds what they share: ``__len__``, ``end_epoch`` and
``adapt`` (the per-rank figures, gathered), ``random_state``, ``rank_report``,
``wrap_model`` (DDP) and ``reduce_sum``.
"""

from __future__ import annotations

import resource
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel

from gnncore.distributed.collectives import all_gather_fields, all_reduce_sum
from gnncore.distributed.feature_store import DistFeatureStore
from gnncore.distributed.sampler import DistNeighborSampler


def split_batches(ids: np.ndarray, num_batches: int, rng: np.random.Generator) -> list[np.ndarray]:
    """``ids`` shuffled by ``rng`` and cut into ``num_batches`` near-equal batches of
    distinct ids; when there are fewer ids than batches, ids are repeated (each
    batch then holds one)."""
    ids = np.asarray(ids, dtype=np.int64)
    if num_batches <= 0:
        return []
    if len(ids) == 0:
        raise ValueError("cannot fill batches from no ids")
    shuffled = ids[rng.permutation(len(ids))]
    if len(shuffled) < num_batches:
        shuffled = shuffled[np.arange(num_batches) % len(shuffled)]
    return [np.ascontiguousarray(b) for b in np.array_split(shuffled, num_batches)]


@dataclass
class RankFigures:
    """One rank's counters over a span of batches (training epoch)."""

    batches: int = 0
    seeds: int = 0
    sample_s: float = 0.0
    exchange_s: float = 0.0

    def add(self, other: RankFigures) -> None:
        self.batches += other.batches
        self.seeds += other.seeds
        self.sample_s += other.sample_s
        self.exchange_s += other.exchange_s


#: What each rank sends of its epoch in :meth:`RankSource.adapt`, in this
#: order (one float64 row per rank): ``end_epoch``'s figures, then the step's
#: ``compute_s`` and the peak RSS.
EPOCH_FIGURES = (
    "remote_share",
    "remote_rows",
    "local_rows",
    "remote_bytes",
    "served_bytes",
    "id_bytes",
    "batches",
    "seeds",
    "sample_s",
    "exchange_s",
    "compute_s",
    "peak_rss_mb",
)


def peak_rss_mb() -> float:
    """This process's peak resident set size in MiB (``ru_maxrss``)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


class RankSource:
    """The hooks a sampled batch source of one rank shares with the others.

    A subclass sets, in its constructor: ``device``, ``group``, ``rank``,
    ``world``, ``main_process``, ``feature_store`` (a
    :class:`~gnncore.distributed.feature_store.DistFeatureStore`), ``sampler``
    (the training :class:`~gnncore.distributed.sampler.DistNeighborSampler`),
    ``generator``, ``num_batches``, and resets ``epoch_figures``,
    ``_stats_at_start`` and ``_last`` as :meth:`start_epoch` does; it defines
    ``start_epoch`` and ``batches``.
    """

    device: torch.device
    group: Any
    rank: int
    world: int
    main_process: bool
    feature_store: DistFeatureStore
    sampler: DistNeighborSampler
    generator: torch.Generator
    num_batches: int
    epoch_figures: RankFigures
    _stats_at_start: dict[str, float]
    _last: dict[str, float]

    def __len__(self) -> int:
        return self.num_batches

    def end_epoch(self, epoch: int) -> None:
        now = self.feature_store.stats.as_dict()
        delta = {k: now[k] - self._stats_at_start.get(k, 0.0) for k in now}
        rows = delta["local_rows"] + delta["remote_rows"]
        self._last = {
            "remote_share": delta["remote_rows"] / rows if rows else 0.0,
            "remote_rows": delta["remote_rows"],
            "local_rows": delta["local_rows"],
            "remote_bytes": delta["remote_bytes"],
            "served_bytes": delta["served_bytes"],
            "id_bytes": delta["id_bytes"],
            "batches": float(self.epoch_figures.batches),
            "seeds": float(self.epoch_figures.seeds),
            "sample_s": self.epoch_figures.sample_s,
            "exchange_s": self.epoch_figures.exchange_s,
        }

    def adapt(self, epoch: int, throughput: dict[str, float]) -> dict[str, float]:
        """Every rank's figures of the epoch (a collective), as ``rank<r>_<name>``,
        and their totals: ``dist_remote_share`` (fetched rows over all rows
        gathered), ``dist_remote_rows`` and ``dist_remote_bytes`` (summed),
        ``dist_world_size``, and the epoch's ``dist_sample_s`` and
        ``dist_exchange_s`` (sampling and feature-exchange seconds, the mean over
        the ranks). ``compute_s`` is the step's forward, backward (with the
        gradient all-reduce) and optimiser step."""
        mine = {
            **self._last,
            "compute_s": float(throughput.get("compute_s", 0.0)),
            "peak_rss_mb": peak_rss_mb(),
        }
        gathered = all_gather_fields(mine, EPOCH_FIGURES, self.group)
        out: dict[str, float] = {"dist_world_size": float(self.world)}
        for r, figures in enumerate(gathered):
            out.update({f"rank{r}_{k}": float(v) for k, v in figures.items()})
        remote = sum(f["remote_rows"] for f in gathered)
        rows = remote + sum(f["local_rows"] for f in gathered)
        out["dist_remote_rows"] = float(remote)
        out["dist_remote_bytes"] = float(sum(f["remote_bytes"] for f in gathered))
        out["dist_remote_share"] = remote / rows if rows else 0.0
        for key in ("sample_s", "exchange_s"):
            out[f"dist_{key}"] = sum(float(f[key]) for f in gathered) / len(gathered)
        return out

    def random_state(self) -> tuple[torch.Generator, dict[str, Any]]:
        return self.generator, {"train": self.sampler}

    def rank_report(self) -> dict[str, Any]:
        """What the rank runner returns about the exchanges: ``store``, the
        feature store's counters."""
        return {"store": self.feature_store.stats.as_dict()}

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """``model`` in :class:`~torch.nn.parallel.DistributedDataParallel`
        (gradients averaged over the ranks in the backward pass)."""
        if self.device.type == "cuda":
            index = self.device.index
            return DistributedDataParallel(
                model, device_ids=[index], output_device=index, process_group=self.group
            )
        return DistributedDataParallel(model, process_group=self.group)

    def reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` summed over the ranks (a collective), on its own device."""
        return all_reduce_sum(tensor, self.group)


__all__ = ["EPOCH_FIGURES", "RankFigures", "RankSource", "peak_rss_mb", "split_batches"]
