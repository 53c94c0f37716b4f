"""Replay the project's sampler over virtual devices / partitions and count data movement.

Two simulators run the real sampler (:meth:`NeighborSampler._sample
<gnncore.sampler.NeighborSampler._sample>`, the C++ kernel training uses) on
seeded mini-batches and count what a multi-GPU run would move, without
several GPUs (ALGORITHMS.md §3, "What HyDRA measures ...", and §4):

* :func:`simulate_feature_reads` -- data-parallel training over ``n`` devices
  with a feature placement (``dev_num``): every node of every sampled batch
  is one feature read, from the device's own cache, a peer's cache or host
  memory; the Song & Jiang cost of a device is ``alpha · peer + host``.
* :func:`simulate_neighbor_traffic` -- ``M`` virtual partitions, each
  training on its own training nodes: for every node whose neighbours a hop
  samples and whose neighbour list another partition owns, the neighbour ids
  that cross partitions under DSP-style sampling, whole-list memory sharing,
  HDR (replicated lists are local) and HDR with threshold pruning.

Batches and seeding (reproducible; the samplers' own batch counters and base
seed are not used): the training nodes are de-duplicated and sorted
(``np.unique``); each epoch permutes them with
``np.random.default_rng([seed, epoch])`` and cuts the permutation into
batches of ``batch_size`` (the last one may be smaller); batch ``i`` is
sampled with the seed ``SeedSequence([seed, epoch, i]).generate_state(1,
uint64)`` -- the batches :func:`gnncore.plan.estimators.presample_access`
counts. For partitions, partition ``m``'s training nodes are permuted with
``default_rng([seed, epoch, m])`` and its batch ``i`` uses
``SeedSequence([seed, epoch, m, i])``.

Per batch the work is a few numpy gathers and reductions over the sampled
arrays (no Python loop over nodes), so an epoch costs about as much as
sampling it.
"""

from gnncore.plan.simulate.feature_reads import (
    FeatureReadCounts,
    dev_num_from_caches,
    simulate_feature_reads,
)
from gnncore.plan.simulate.neighbor_traffic import (
    SCHEMES,
    NeighborTraffic,
    frontier_kind,
    memory_increase,
    simulate_neighbor_traffic,
)

__all__ = [
    "SCHEMES",
    "FeatureReadCounts",
    "NeighborTraffic",
    "dev_num_from_caches",
    "frontier_kind",
    "memory_increase",
    "simulate_feature_reads",
    "simulate_neighbor_traffic",
]
