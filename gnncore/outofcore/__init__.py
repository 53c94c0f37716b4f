"""Out-of-core training: the partitioned store (:mod:`gnncore.outofcore.store`), the
orders in which partitions pass through a memory buffer
(:mod:`gnncore.outofcore.ordering`) and the buffer itself with its prefetch thread
(:mod:`gnncore.outofcore.buffer`); HierBatching and the training modes follow."""

from gnncore.outofcore.buffer import BufferStats, BufferView, PartitionBuffer
from gnncore.outofcore.ordering import (
    BufferPlan,
    beta_states,
    beta_swap_count,
    comet_epoch,
    comet_settings,
    first_cover_buckets,
    node_classification_states,
    static_cache_states,
    swap_count,
    swap_lower_bound,
)

__all__ = [
    "BufferStats",
    "BufferView",
    "PartitionBuffer",
    "BufferPlan",
    "beta_states",
    "beta_swap_count",
    "comet_epoch",
    "comet_settings",
    "first_cover_buckets",
    "node_classification_states",
    "static_cache_states",
    "swap_count",
    "swap_lower_bound",
]
