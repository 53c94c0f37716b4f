r"""Per-rank link-prediction data: the edge splits and the message-passing graph.

:func:`~gnncore.distributed.rank_write.write_rank_data` with ``link=True``
adds these files to every ``rank_<r>/`` (global ids are the partition's
relabelled ids, as everywhere in the rank data):

* ``link_train.npy``, ``link_val.npy``, ``link_test.npy`` (int64 ``[T_r, 3]``):
  the split triples ``(head, relation, tail)`` of
  :func:`~gnncore.train.link.data.link_splits` whose **head** rank ``r`` owns
  (each triple lies in exactly one rank's files). Edge splits hold every
  undirected edge once, with its lower *original* id as the head.
* ``link_indptr.npy`` (int64 ``[n_r + 1]``), ``link_indices.npy`` and
  ``link_edge_ids.npy`` (int64 ``[E_r]``), ``link_halo.npy``: the
  message-passing graph of single-process link training
  (:func:`~gnncore.train.link.data.message_passing_csc`: the training triples
  in both directions, without repeats or self-loops) restricted to the core
  nodes' rows, in the layout of ``indptr`` / ``indices``; an entry's edge id
  is the row (in the whole training split) of the first training triple that
  joins its pair; ``link_halo`` lists the non-core neighbours (sorted). The
  graph's own in-edges (``indptr.npy`` ...) hold validation and test edges
  too, so link training never samples them.
* ``link_known.npy`` (int64 ``[K_r, 3]``): every known ``(source, filter
  relation, answer)`` of the filtered ranking protocol
  (:func:`~gnncore.train.link.ranking.known_edges`, over ``2R`` relations)
  whose *answer* rank ``r`` owns: what rank ``r`` needs to filter its
  candidates when every rank ranks each query against its own core nodes.

The manifest's ``link`` entry records the split's source (``kg`` or
``edges``), whether it is symmetric, the relation count and the triple
counts. The writer holds the whole graph's split triples and message-passing
pairs in memory (about 100 bytes per training edge), as single-process link
training does; the ranks hold their own files only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gnncore.store import GraphDir

#: Bumped when the link files change; part of the rank data's stage key.
LINK_FORMAT_VERSION = 1
LINK_SPLITS = ("train", "val", "test")
#: Link files whose rows are not the core nodes (``link_indptr`` has ``n_r + 1``).
LINK_NOT_CORE_ROWS = (
    "link_indices",
    "link_edge_ids",
    "link_halo",
    *(f"link_{s}" for s in LINK_SPLITS),
    "link_known",
)


@dataclass(frozen=True)
class LinkArrays:
    """The whole graph's link data in global (relabelled) ids, from which each
    rank's files are cut (:meth:`write_rank`)."""

    splits: dict[str, np.ndarray]  # split -> int64 [T, 3]
    #: Message-passing entries sorted by (target, source): target, source, edge id.
    target: np.ndarray
    source: np.ndarray
    edge_id: np.ndarray
    known: np.ndarray  # int64 [K, 3]: (source, filter relation, answer)
    info: dict[str, Any]

    @classmethod
    def of(cls, graph: GraphDir, new_of_old: np.ndarray) -> LinkArrays:
        """The link splits of ``graph`` relabelled by ``new_of_old``."""
        # lazy: it imports torch, and ``gnncore.distributed`` (RankData) loads without it
        from gnncore.train.link.data import link_splits

        found = link_splits(graph)
        relabel = np.asarray(new_of_old, dtype=np.int64)
        splits = {}
        for name, triples in zip(LINK_SPLITS, (found.train, found.val, found.test), strict=True):
            t = np.array(triples, dtype=np.int64)
            t[:, 0], t[:, 2] = relabel[t[:, 0]], relabel[t[:, 2]]
            splits[name] = t
        target, source, edge_id = _message_passing_entries(splits["train"])
        known = _known_entries(list(splits.values()), found.num_relations, found.symmetric)
        info = {
            "format_version": LINK_FORMAT_VERSION,
            "source": found.source,
            "symmetric": bool(found.symmetric),
            "num_relations": int(found.num_relations),
            **{f"num_{name}": int(len(t)) for name, t in splits.items()},
        }
        return cls(splits, target, source, edge_id, known, info)

    def write_rank(self, lo: int, hi: int, folder: Path, save: Any) -> None:
        """Write the link files of the rank owning ``[lo, hi)`` into ``folder``
        (``save(folder, name, array)``)."""
        for name, t in self.splits.items():
            save(folder, f"link_{name}", np.ascontiguousarray(t[(t[:, 0] >= lo) & (t[:, 0] < hi)]))
        start, stop = np.searchsorted(self.target, [lo, hi])
        rows = self.target[start:stop] - lo
        indptr = np.zeros(hi - lo + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=hi - lo), out=indptr[1:])
        sources = self.source[start:stop]
        save(folder, "link_indptr", indptr)
        save(folder, "link_indices", np.ascontiguousarray(sources))
        save(folder, "link_edge_ids", np.ascontiguousarray(self.edge_id[start:stop]))
        save(folder, "link_halo", np.unique(sources[(sources < lo) | (sources >= hi)]))
        answer = self.known[:, 2]
        save(folder, "link_known", np.ascontiguousarray(self.known[(answer >= lo) & (answer < hi)]))


def _message_passing_entries(train: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(target, source, edge id)`` of the undirected simple graph of ``train``
    (both directions of each distinct pair, no self-loops), sorted by target,
    then source; a pair's edge id is the row of its first triple."""
    rows = np.flatnonzero(train[:, 0] != train[:, 2])
    u, v = train[rows, 0], train[rows, 2]
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    order = np.lexsort((rows, hi, lo))  # by pair, first triple first
    lo, hi, rows = lo[order], hi[order], rows[order]
    first = np.ones(len(lo), dtype=bool)
    first[1:] = (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])
    lo, hi, rows = lo[first], hi[first], rows[first]
    target = np.concatenate([hi, lo])
    source = np.concatenate([lo, hi])
    edge_id = np.concatenate([rows, rows]).astype(np.int64)
    order = np.lexsort((source, target))
    return target[order], source[order], edge_id[order]


def _known_entries(triples: list[np.ndarray], num_relations: int, symmetric: bool) -> np.ndarray:
    """Every ``(source, filter relation, answer)`` that
    :func:`~gnncore.train.link.ranking.known_edges` records, repeats removed."""
    t = np.concatenate([np.asarray(a, dtype=np.int64).reshape(-1, 3) for a in triples])
    if symmetric:
        t = np.concatenate([t, t[:, ::-1]])
    reverse = np.stack([t[:, 2], t[:, 1] + num_relations, t[:, 0]], axis=1)
    both = np.concatenate([t, reverse])
    if not len(both):
        return both.reshape(0, 3)
    return np.unique(both, axis=0)
