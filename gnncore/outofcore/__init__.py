"""Out-of-core training: the orders in which partitions pass through a memory buffer
(:mod:`gnncore.outofcore.ordering`); the partitioned store, the buffer and
HierBatching follow (docs/ARCHITECTURE.md)."""

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
