"""Access-frequency estimators: how often training reads each node's features.

Song & Jiang's placement ranks nodes by ``f_j``, the number of training nodes
whose L-hop sampled neighbourhood can reach ``j`` (ALGORITHMS.md §4). Three
estimators, all over the adjacency a sampler reads (the graph directory's CSC
rows: row ``t`` lists the neighbours expanding ``t`` visits):

* ``reach`` -- distinct training nodes within ``L`` hops (exact; one bounded
  BFS per training node, so for small graphs and tests);
* ``spmv`` -- path counts ``(A+I)^L · 1_train`` (``L`` sparse matrix-vector
  products; the cheap default for large graphs). Each product is one streaming
  pass over the CSR in row blocks of about :data:`SPMV_BLOCK_IDS` neighbour
  ids, so ``indptr`` / ``indices`` may be memory-mapped and bigger than memory:
  the pass holds two ``float64[N]`` vectors and one block;
* ``presample`` -- node occurrences over a few epochs of the project's own
  sampler with the training fanouts (what training will actually read).

``reach`` is a C++ kernel that releases the GIL; ``spmv`` scatters each block
with ``numpy.add.at`` (the counts are integers held exactly in float64, so the
result does not depend on the order of the additions); ``presample`` spends its
time in the sampler's C++ kernel and counts with ``numpy.add.at``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, get_args

import numpy as np

from gnncore import _C
from gnncore.plan.batching import seeded_batches
from gnncore.typing import require_csrc

#: An estimator :func:`estimate_access` accepts.
Estimator = Literal["spmv", "reach", "presample"]
#: Every :data:`Estimator`, the default first.
ESTIMATORS: tuple[str, ...] = get_args(Estimator)
#: Neighbour ids per block of a streaming spmv pass (about 200 MB of buffers).
SPMV_BLOCK_IDS = 1 << 23


def _row_blocks(indptr: np.ndarray, block_ids: int) -> list[tuple[int, int]]:
    """Row ranges ``[lo, hi)`` of about ``block_ids`` neighbour ids each (a row
    longer than that is a block alone), found by binary search on ``indptr``."""
    n = len(indptr) - 1
    blocks = []
    lo = 0
    while lo < n:
        target = int(indptr[lo]) + block_ids
        hi = int(np.searchsorted(indptr, target, side="right")) - 1
        hi = min(max(hi, lo + 1), n)
        blocks.append((lo, hi))
        lo = hi
    return blocks


def spmv_access(
    indptr: np.ndarray,
    indices: np.ndarray,
    train_nodes: np.ndarray,
    layers: int,
    *,
    block_ids: int = SPMV_BLOCK_IDS,
    progress: Callable[[str], None] | None = None,
) -> np.ndarray:
    """Path counts ``(A+I)^L · 1_train`` as ``float64[N]``, where row ``t`` of
    the CSR lists the ``j`` with ``A[j, t] = 1``: each of the ``L`` passes sets
    ``y = x`` and adds ``x[t]`` to ``y[j]`` for every ``j`` in row ``t``.

    ``indptr`` / ``indices`` are read ``block_ids`` neighbour ids at a time
    (memory-mapped arrays stay on disk); besides the two vectors a pass holds
    one block's ids, weights and row pointers. Raises ``ValueError`` for a
    malformed CSR or a training id outside ``[0, N)``.
    """
    if layers < 0:
        raise ValueError(f"layers must be >= 0, got {layers}")
    if len(indptr) < 1:
        raise ValueError("indptr must have N + 1 >= 1 entries, got 0")
    n = len(indptr) - 1
    if int(indptr[0]) != 0 or int(indptr[n]) != len(indices):
        raise ValueError(
            f"indptr must start at 0 and end at len(indices) = {len(indices)}, got "
            f"{int(indptr[0])} ... {int(indptr[n])}"
        )
    train = np.asarray(train_nodes, dtype=np.int64)
    if len(train) and (train.min() < 0 or train.max() >= n):
        raise ValueError(f"a training node is outside [0, {n})")
    x = np.zeros(n, dtype=np.float64)
    x[train] = 1.0
    blocks = _row_blocks(indptr, max(int(block_ids), 1)) if layers else []
    for layer in range(layers):
        y = x.copy()
        for lo, hi in blocks:
            ptr = np.asarray(indptr[lo : hi + 1], dtype=np.int64)
            lengths = np.diff(ptr)
            if len(lengths) and lengths.min() < 0:
                raise ValueError(f"indptr must be non-decreasing (rows {lo}..{hi})")
            ids = np.asarray(indices[ptr[0] : ptr[-1]])
            if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= n):
                raise ValueError(f"a neighbour id of rows {lo}..{hi} is outside [0, {n})")
            np.add.at(y, ids, np.repeat(x[lo:hi], lengths))
        x = y
        if progress is not None:
            progress(f"spmv: pass {layer + 1}/{layers} over {n} rows in {len(blocks)} blocks")
    return x


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
    # Lazy: the samplers load torch and PyG (seconds), which the planners' other
    # estimators and the Dagster code location importing this module do not need.
    from gnncore.sampler import build_sampler

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
    progress: Callable[[str], None] | None = None,
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
        num_threads: OpenMP threads of the ``reach`` kernel (0: default);
            results do not depend on it.
        progress: Called with a line per ``spmv`` pass.

    Raises:
        ValueError: For an unknown estimator or ``layers < 0``.
    """
    require_csrc()
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; choose one of {', '.join(ESTIMATORS)}")
    if layers < 0:
        raise ValueError(f"layers must be >= 0, got {layers}")
    train = np.ascontiguousarray(train_nodes, dtype=np.int64)
    if estimator == "reach":
        counts = _C.access_reach(indptr, indices, train, layers, num_threads=num_threads)
        return np.asarray(counts, dtype=np.float64)
    if estimator == "spmv":
        return spmv_access(indptr, indices, train, layers, progress=progress)
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
