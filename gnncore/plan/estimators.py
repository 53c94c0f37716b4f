"""Access-frequency estimators: how often training reads each node's features.

Song & Jiang's placement ranks nodes by ``f_j``, the number of training nodes
whose L-hop sampled neighbourhood can reach ``j`` (ALGORITHMS.md §4). Three
estimators, all over the adjacency a sampler reads (the graph directory's CSC
rows: row ``t`` lists the neighbours expanding ``t`` visits):

* ``reach`` -- distinct training nodes within ``L`` hops (exact; one bounded
  BFS per training node, so for small graphs and tests);
* ``spmv`` -- path counts ``(A+I)^L · 1_train`` (``L`` sparse matrix-vector
  products; the cheap default for large graphs);
* ``presample`` -- node occurrences over a few epochs of the project's own
  sampler with the training fanouts (what training will actually read).

``reach`` and ``spmv`` are C++ kernels that release the GIL; ``presample``
spends its time in the sampler's C++ kernel and counts with ``numpy.bincount``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import numpy as np

from gnncore.plan.batching import seeded_batches
from gnncore.sampler import build_sampler
from gnncore.typing import require_csrc

#: An estimator :func:`estimate_access` accepts.
Estimator = Literal["spmv", "reach", "presample"]
#: Every :data:`Estimator`, the default first.
ESTIMATORS: tuple[str, ...] = get_args(Estimator)


def presample_access(
    indptr: np.ndarray,
    indices: np.ndarray,
    train_nodes: np.ndarray,
    fanouts: Sequence[int],
    *,
    epochs: int = 1,
    batch_size: int = 1024,
    sampler: str = "dense",
    seed: int = 0,
) -> np.ndarray:
    """Count how often each node appears in sampled mini-batches of ``train_nodes``.

    Each epoch shuffles ``train_nodes`` (``numpy`` generator seeded with
    ``(seed, epoch)``), cuts them into batches of ``batch_size`` and samples
    every batch with the ``sampler`` mode (:func:`gnncore.sampler.build_sampler`)
    and ``fanouts``, batch ``i`` seeded from ``(seed, epoch, i)``. Returns
    ``float64[N]``: each node's reads per epoch (occurrences / ``epochs``).
    """
    if epochs < 1:
        raise ValueError(f"presample epochs must be >= 1, got {epochs}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    num_nodes = len(indptr) - 1
    node_sampler = build_sampler(sampler, (indptr, indices), list(fanouts), seed=seed)
    counts = np.zeros(num_nodes, dtype=np.int64)
    train = np.unique(np.asarray(train_nodes, dtype=np.int64))
    for epoch in range(epochs):
        for _, seeds, batch in seeded_batches(train, batch_size, seed, epoch):
            node = np.asarray(node_sampler._sample(seeds, batch)[0])
            np.add.at(counts, node, 1)
    return counts.astype(np.float64) / epochs


def estimate_access(
    indptr: np.ndarray,
    indices: np.ndarray,
    train_nodes: np.ndarray,
    layers: int,
    estimator: str = "spmv",
    *,
    fanouts: Sequence[int] | None = None,
    presample_epochs: int = 1,
    batch_size: int = 1024,
    sampler: str = "dense",
    seed: int = 0,
    num_threads: int = 0,
) -> np.ndarray:
    """Estimated access frequency ``f`` (``float64[N]``) of every node.

    Args:
        indptr, indices: The adjacency a sampler reads (CSC rows).
        train_nodes: The training node ids (duplicates count once).
        layers: ``L``, the GNN's number of layers (hops).
        estimator: ``"spmv"``, ``"reach"`` or ``"presample"``.
        fanouts: ``presample`` only: neighbours per hop (default: 10 per hop
            for ``layers`` hops).
        presample_epochs, batch_size, sampler, seed: ``presample`` only (see
            :func:`presample_access`).
        num_threads: OpenMP threads of the C++ estimators (0: default);
            results do not depend on it.

    Raises:
        ValueError: For an unknown estimator or ``layers < 0``.
    """
    require_csrc()
    from gnncore import _C

    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; choose one of {', '.join(ESTIMATORS)}")
    if layers < 0:
        raise ValueError(f"layers must be >= 0, got {layers}")
    train = np.ascontiguousarray(train_nodes, dtype=np.int64)
    if estimator == "reach":
        counts = _C.access_reach(indptr, indices, train, layers, num_threads=num_threads)
        return np.asarray(counts, dtype=np.float64)
    if estimator == "spmv":
        return np.asarray(_C.access_spmv(indptr, indices, train, layers, num_threads=num_threads))
    return presample_access(
        indptr,
        indices,
        train,
        fanouts if fanouts is not None else (10,) * layers,
        epochs=presample_epochs,
        batch_size=batch_size,
        sampler=sampler,
        seed=seed,
    )
