"""Out-of-core training: the partitioned store (:mod:`gnncore.outofcore.store`) and
its sequential reader (:mod:`gnncore.outofcore.reader`), the orders in which
partitions pass through a memory buffer (:mod:`gnncore.outofcore.ordering`), the
batch sources that walk them with a prefetch thread -- HierBatching mega-batches
(:mod:`gnncore.outofcore.megabatch`) and the node-classification buffer
(:mod:`gnncore.outofcore.hierbatching`), the
link-prediction buffer over embeddings on disk (:mod:`gnncore.outofcore.link_buffer`).
The benchmark of the modes is ``gnncore_bench.outofcore``."""

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
