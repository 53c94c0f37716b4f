"""Distributed training on ``torch.distributed`` (ALGORITHMS.md §8, docs/DISTRIBUTED.md).

- :mod:`~gnncore.distributed.rank_data`: one rank's share of a partitioned graph
  (:class:`RankData`) and :func:`owner_of`; :mod:`~gnncore.distributed.rank_write`
  writes it (:func:`write_rank_data`, the ``gnncore ranks`` verb).
- :mod:`~gnncore.distributed.feature_store`: :class:`DistFeatureStore`, rows
  fetched from their owners in one exchange per gather.
- :mod:`~gnncore.distributed.sampler`: :class:`DistNeighborSampler`,
  cross-partition multi-hop sampling, one exchange per hop.
- :mod:`~gnncore.distributed.exchange`: the variable-length all-to-all both use,
  and the fixed-layout gather of named figures (ranks exchange tensors only).
- :mod:`~gnncore.distributed.launch`: :func:`spawn_local`, ranks on this machine.
- :mod:`~gnncore.distributed.join`: the join token every rank proves at rendezvous.
- :mod:`~gnncore.distributed.sancus`: :class:`SancusSource`, SANCUS full-graph
  GCN training whose ranks skip sending embedding rows that are not too stale
  (policies in :mod:`~gnncore.train.node.staleness`).
"""

from typing import TYPE_CHECKING, Any

from gnncore.distributed.rank_data import RankData, owner_of
from gnncore.distributed.rank_write import write_rank_data

__all__ = [
    "DistFeatureStore",
    "DistNeighborSampler",
    "ExchangeStats",
    "RankData",
    "RankFailed",
    "Replica",
    "SancusSource",
    "owner_of",
    "spawn_local",
    "write_rank_data",
]

if TYPE_CHECKING:
    from gnncore.distributed.feature_store import DistFeatureStore, ExchangeStats, Replica
    from gnncore.distributed.launch import RankFailed, spawn_local
    from gnncore.distributed.sampler import DistNeighborSampler
    from gnncore.distributed.sancus import SancusSource

# torch and torch_geometric load in seconds: import them on first use only.
_LAZY = {
    "DistFeatureStore": "gnncore.distributed.feature_store",
    "ExchangeStats": "gnncore.distributed.feature_store",
    "Replica": "gnncore.distributed.feature_store",
    "DistNeighborSampler": "gnncore.distributed.sampler",
    "SancusSource": "gnncore.distributed.sancus",
    "RankFailed": "gnncore.distributed.launch",
    "spawn_local": "gnncore.distributed.launch",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
