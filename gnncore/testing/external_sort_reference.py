"""Plain-NumPy reference of the external edge sorter (:mod:`gnncore.store.external_sort`).

Everything in memory: concatenate the chunks, drop self-loops, add the reverse
of every edge for undirected graphs, keep the distinct ``(dst, src)`` pairs and
count them into a CSR whose row ``v`` lists the sources of the edges into ``v``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from numpy.typing import DTypeLike


def external_sort_csr_reference(
    chunks: Iterable[tuple[np.ndarray, np.ndarray]],
    num_nodes: int,
    *,
    directed: bool,
    index_dtype: DTypeLike = np.int32,
) -> tuple[np.ndarray, np.ndarray]:
    """``(indptr int64[num_nodes + 1], indices index_dtype[E])`` of the edges."""
    pairs = [(np.asarray(s, dtype=np.int64), np.asarray(d, dtype=np.int64)) for s, d in chunks]
    src = np.concatenate([s for s, _ in pairs] + [np.zeros(0, dtype=np.int64)])
    dst = np.concatenate([d for _, d in pairs] + [np.zeros(0, dtype=np.int64)])
    keep = src != dst
    src, dst = src[keep], dst[keep]
    if not directed:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    edges = np.unique(np.stack([dst, src], axis=1).reshape(-1, 2), axis=0)
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(edges[:, 0], minlength=num_nodes), out=indptr[1:])
    return indptr, edges[:, 1].astype(index_dtype)
