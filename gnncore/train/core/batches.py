r"""Batch sources: where an epoch's training batches come from.

The epoch driver (:meth:`~gnncore.train.core.session.TrainingSession.run_epochs`)
does not build loaders. It takes a :class:`BatchSource`: an object that owns
its :class:`~torch_geometric.data.FeatureStore`, yields the epoch's prepared
mini-batches, is told when an epoch starts and ends, and names the random
state a checkpoint must capture for a resumed run to draw the same batches.
Training modes differ in their source, not in the loop:

* :class:`LoaderBatchSource` (this module): a PyG
  :class:`~torch_geometric.loader.NodeLoader` or
  :class:`~torch_geometric.loader.LinkLoader` over in-memory or
  memory-mapped stores, pipelined by
  :class:`~gnncore.train.core.prefetch.Prefetcher`.
* Out-of-core sources (a partition buffer that swaps partitions at epoch
  boundaries, HierBatching mega-batches) and distributed ranks implement the
  same protocol: their ``start_epoch`` / ``end_epoch`` hooks load, evict or
  synchronise; their ``feature_store`` serves from disk, a cache or peers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

import torch
from torch_geometric.data import FeatureStore

from gnncore.train.core.prefetch import Prefetcher


@runtime_checkable
class BatchSource(Protocol):
    """What the epoch driver needs from a source of training batches.

    Optionally, a source may define ``adapt(epoch, throughput) -> dict``: called
    after each epoch with its throughput figures, it changes what the next epoch
    draws (e.g. a sampling scale) and returns figures to log with the epoch.

    A source that is one process of a distributed run
    (:class:`gnncore.distributed.source.node.DistBatchSource`) may also define
    ``main_process`` (``False``: read checkpoints to resume, never write them),
    ``wrap_model(model) -> module`` (what the training step calls, e.g.
    :class:`~torch.nn.parallel.DistributedDataParallel`) and
    ``reduce_sum(tensor) -> tensor`` (evaluation counts summed over the
    processes, so that every process gets the same metrics).
    """

    #: Serves the node features (and labels) the batches are joined from.
    feature_store: FeatureStore

    def __len__(self) -> int:
        """Batches per epoch (sizes the progress bar; an estimate is fine)."""
        ...

    def start_epoch(self, epoch: int) -> None:
        """Called before epoch ``epoch`` (1-based) draws its first batch."""
        ...

    def batches(self) -> AbstractContextManager[Iterator[Any]]:
        """The epoch's batches, ready for the model's step; closing the context
        stops any background preparation (also on ``break`` or an error)."""
        ...

    def end_epoch(self, epoch: int) -> None:
        """Called after epoch ``epoch``'s last step, before validation."""
        ...

    def random_state(self) -> tuple[torch.Generator, dict[str, Any]]:
        """``(shuffling generator, name -> sampler)``: what a checkpoint records so
        that a resumed run draws the same batches (samplers with batch counters)."""
        ...


class LoaderBatchSource:
    """A PyG loader as a :class:`BatchSource`: batches prepared ahead of compute
    by ``prefetch_workers`` threads, ``prefetch_depth`` deep (same batches as
    plain iteration), on ``device``.

    Args:
        loader: A :class:`~torch_geometric.loader.NodeLoader` or
            :class:`~torch_geometric.loader.LinkLoader` (any DataLoader).
        feature_store: The store ``loader`` joins features from.
        generator: The loader's shuffling generator.
        samplers: Name -> sampler whose state a checkpoint records
            (``{"train": sampler}``).
        device: Where batches are used (CUDA: pinned, copied on a side stream).
        prefetch_workers, prefetch_depth: See
            :class:`~gnncore.train.core.prefetch.Prefetcher`.
        adapters: Objects with ``adapt(epoch, throughput) -> dict`` run after
            each epoch (e.g. :class:`~gnncore.plan.sampling.LasScaleAdapter`); their
            ``state_dict`` goes into checkpoints with the samplers'.
    """

    def __init__(
        self,
        loader: Any,
        feature_store: FeatureStore,
        generator: torch.Generator,
        samplers: dict[str, Any],
        device: torch.device,
        prefetch_workers: int = 1,
        prefetch_depth: int = 4,
        adapters: Sequence[Any] = (),
    ) -> None:
        self.loader = loader
        self.adapters = list(adapters)
        self.feature_store = feature_store
        self.generator = generator
        self.samplers = dict(samplers)
        self.prefetcher = Prefetcher(loader, prefetch_workers, prefetch_depth, device)

    def __len__(self) -> int:
        return len(self.loader)

    def start_epoch(self, epoch: int) -> None:
        """Nothing to load: the stores are in memory (or memory-mapped)."""

    def batches(self) -> AbstractContextManager[Iterator[Any]]:
        return iter(self.prefetcher)

    def end_epoch(self, epoch: int) -> None:
        """Nothing to release."""

    def random_state(self) -> tuple[torch.Generator, dict[str, Any]]:
        adapters = {f"adapter{i}": a for i, a in enumerate(self.adapters)}
        return self.generator, {**self.samplers, **adapters}

    def adapt(self, epoch: int, throughput: dict[str, float]) -> dict[str, float]:
        figures: dict[str, float] = {}
        for adapter in self.adapters:
            figures.update(adapter.adapt(epoch, throughput))
        return figures
