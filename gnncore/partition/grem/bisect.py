"""One GREM bisection (C++: the streaming pass, the restreaming passes and the
split of the edge file per side) and the sizes it is given."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gnncore import _C
from gnncore.partition.edge_stream import EdgeFile
from gnncore.typing import require_csrc


def node_id_dtype(num_nodes: int) -> type[np.signedinteger[Any]]:
    """``np.int32`` when every id in ``[0, num_nodes)`` fits it, else ``np.int64``:
    the width of the sub-problems' node lists (4 bytes a node instead of 8)."""
    return np.int32 if num_nodes <= np.iinfo(np.int32).max + 1 else np.int64


def halves(q: int) -> tuple[int, int]:
    """The parts each side of a bisection of ``q`` parts takes: ``⌊q/2⌋, ⌈q/2⌉``."""
    return q // 2, q - q // 2


def side_capacity(num_nodes: int, share: int, parts: int, imbalance: float) -> int:
    """``P = ceil(N · q/p · (1 + imbalance))`` for a side holding ``q`` of ``p`` parts."""
    return int(math.ceil((1 + imbalance) * num_nodes * share / parts - 1e-9))


def grem_bisect(
    edges: EdgeFile,
    num_nodes: int,
    members: np.ndarray | None,
    *,
    chunk_edges: int,
    seed_nodes: np.ndarray,
    seed_labels: np.ndarray,
    capacities: tuple[int, int],
    weights: tuple[int, int] = (1, 1),
    refine: bool = True,
    passes: int = 0,
    out_paths: tuple[str, str] = ("", ""),
) -> _C.GremBisectResult:
    """One GREM bisection of a sub-problem over the edge file ``edges`` (C++).

    The low-level step :func:`grem_partition_file` repeats: ``seed_nodes`` /
    ``seed_labels`` must label exactly the nodes of the first ``chunk_edges``
    rows. ``members`` lists the sub-problem's nodes, or is ``None`` for every
    id in ``[0, num_nodes)`` (how the recursion calls it: each sub-problem's
    edge file is in its own ids, so its arrays are sized by its nodes).
    Returns ``gnncore._C.GremBisectResult`` (``side`` is aligned with
    ``members``, or indexed by id for ``None``); bad options raise
    ``ValueError`` naming the ``GremBisectOptions`` field. The per-side files
    of ``out_paths`` hold each side's edges in that side's own ids (a node's
    rank among the side's members in increasing id order). ``members`` and
    the seeds go to C++ as int32 ids and int8 sides while the ids fit
    (:func:`node_id_dtype`; C++ reads them in that width: no int64 copies
    alive during the call).
    """
    require_csrc()
    options = _C.GremBisectOptions(
        num_nodes=num_nodes,
        chunk_rows=chunk_edges,
        capacities=capacities,
        weights=weights,
        refine=refine,
        passes=passes,
        out_paths=(str(out_paths[0]), str(out_paths[1])),
    )
    ids = node_id_dtype(num_nodes)
    return _C.grem_bisect(
        edges.spec(),
        None if members is None else np.ascontiguousarray(members, dtype=ids),
        np.ascontiguousarray(seed_nodes, dtype=ids),
        np.ascontiguousarray(seed_labels, dtype=np.int8 if ids == np.int32 else np.int64),
        options,
    )


@dataclass
class BisectionRecord:
    """What one bisection did (kept in :attr:`GremPartitioner.last_stats`)."""

    first_part: int
    parts: int
    nodes: int
    edges: int
    chunks: int
    first_chunk_nodes: int
    isolated: int
    reassigned: int
    moves: list[int]
    sizes: tuple[int, int]
    capacities: tuple[int, int]
    seconds: float
    seed: str = ""
    #: wall time of each phase: ``seed`` (read the first chunk and label it),
    #: ``grem`` (the streaming pass), ``passes`` (one per restreaming pass run)
    #: and ``split`` (the per-side edge files)
    phase_seconds: dict[str, Any] = field(default_factory=dict)
    #: the process that ran it and that process's peak RSS when it ended
    pid: int = 0
    process_peak_rss_bytes: int = 0
