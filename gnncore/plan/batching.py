"""Seeded mini-batches the planning tools replay: one rule for the estimators,
the simulators and the benchmarks.

:func:`seeded_batches` permutes the seed nodes with
``numpy.random.default_rng(list(key))`` and cuts them into consecutive batches;
batch ``i`` gets the sampler seed derived from ``SeedSequence([*key, i])``. The
key is ``(seed, epoch)`` for data-parallel epochs and ``(seed, epoch, part)``
for a partition's own batches, so every tool samples the same batches for the
same key, whatever a sampler's internal counters say.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


def batch_seed(*entropy: int) -> int:
    """A 64-bit sampler seed derived from ``entropy`` (non-negative ints)."""
    return int(np.random.SeedSequence(list(entropy)).generate_state(1, np.uint64)[0])


def seeded_batches(
    nodes: np.ndarray, batch_size: int, *key: int
) -> Iterator[tuple[int, np.ndarray, int]]:
    """``(i, seeds, sampler seed)`` of each batch of ``nodes`` permuted by ``key``."""
    order = np.random.default_rng(list(key)).permutation(nodes)
    for i, start in enumerate(range(0, len(order), batch_size)):
        yield i, np.ascontiguousarray(order[start : start + batch_size]), batch_seed(*key, i)
