"""Distributed training on ``torch.distributed`` (ALGORITHMS.md §8, docs/DISTRIBUTED.md).

From the bottom up:

- :mod:`~gnncore.distributed.rank_data`: one rank's share of a partitioned graph
  (:class:`RankData`) and :func:`owner_of`; :mod:`~gnncore.distributed.rank_write`
  writes it (:func:`write_rank_data`, the ``gnncore ranks`` verb).
- :mod:`~gnncore.distributed.collectives`: the variable-length all-to-all, sums,
  the fixed-layout gather of named figures (ranks exchange tensors only) and
  the balanced shares of a split.
- :mod:`~gnncore.distributed.feature_store`: :class:`DistFeatureStore`, rows
  fetched from their owners in one exchange per gather.
- :mod:`~gnncore.distributed.sampler`: :class:`DistNeighborSampler`,
  cross-partition multi-hop sampling, one exchange per hop.
- :mod:`~gnncore.distributed.sancus`: SANCUS halo exchanges and the GCN over
  them (policies in :mod:`~gnncore.train.node.staleness`).
- :mod:`~gnncore.distributed.source`: the batch sources of the ranks, one file
  per mode (``node``, ``link``, ``sancus``).
- :mod:`~gnncore.distributed.rank`: one rank of a run (:class:`RankRun`, the
  rank runners).
- :mod:`~gnncore.distributed.tasks`: :class:`RankTask`, what a run does per task.
- :mod:`~gnncore.distributed.results`: what a run returns.
- :mod:`~gnncore.distributed.launch`: starting ranks (:func:`spawn_local`,
  torch's elastic launcher); :mod:`~gnncore.distributed.join`: the join token
  every rank proves at rendezvous.
- :mod:`~gnncore.distributed.training`: the entry, :func:`train_distributed`
  with a :class:`DistributedConfig`, restarts and the MLflow run.
"""

from typing import TYPE_CHECKING

from gnncore.distributed.rank_data import RankData, owner_of
from gnncore.lazy import lazy_attributes

__all__ = [
    "DistFeatureStore",
    "DistNeighborSampler",
    "DistributedConfig",
    "ExchangeStats",
    "Launch",
    "RankData",
    "RankFailed",
    "Replica",
    "SancusSource",
    "owner_of",
    "spawn_local",
    "train_distributed",
    "train_distributed_link",
    "write_rank_data",
]

if TYPE_CHECKING:
    from gnncore.distributed.feature_store import DistFeatureStore, ExchangeStats, Replica
    from gnncore.distributed.launch import RankFailed, spawn_local
    from gnncore.distributed.rank_write import write_rank_data
    from gnncore.distributed.sampler import DistNeighborSampler
    from gnncore.distributed.source.sancus import SancusSource
    from gnncore.distributed.training import (
        DistributedConfig,
        Launch,
        train_distributed,
        train_distributed_link,
    )

# torch and torch_geometric load in seconds: import them on first use only (and
# the rank writer, whose replication plans pull in the samplers: a rank process,
# which imports this package first, needs none of it).
_LAZY = {
    "write_rank_data": "gnncore.distributed.rank_write",
    "DistFeatureStore": "gnncore.distributed.feature_store",
    "ExchangeStats": "gnncore.distributed.feature_store",
    "Replica": "gnncore.distributed.feature_store",
    "DistNeighborSampler": "gnncore.distributed.sampler",
    "SancusSource": "gnncore.distributed.source.sancus",
    "RankFailed": "gnncore.distributed.launch",
    "spawn_local": "gnncore.distributed.launch",
    "DistributedConfig": "gnncore.distributed.training",
    "Launch": "gnncore.distributed.training",
    "train_distributed": "gnncore.distributed.training",
    "train_distributed_link": "gnncore.distributed.training",
}


__getattr__ = lazy_attributes(__name__, _LAZY)
