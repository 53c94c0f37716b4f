r"""The data of a link prediction run: split triples and the message-passing graph.

Knowledge graphs (ingested with ``--format kg``) bring their own
``train/valid/test_triples.npy``. Any other graph directory is split here:
the distinct undirected edges (``edges_shuffled.npy``, already in a seeded
random order) are divided into training, validation and test edges with one
relation (id 0). The message-passing graph that GNN encoders sample from holds
the *training* edges only, in both directions (neighbours from both edge
directions, as in the thesis' link prediction setting), without repeats or
self-loops, so validation and test edges never leak into the encoder.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from gnncore.errors import InputError
from gnncore.store import GraphDir


@dataclass(frozen=True)
class LinkSplits:
    """Triples (int64 ``[T, 3]``: head, relation, tail) of each split, and sizes."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    num_nodes: int
    num_relations: int
    source: str  # "kg" (the graph's own triples) or "edges" (split here)
    symmetric: bool = False  # each triple also holds reversed (undirected edge splits)

    def tensors(self) -> list[torch.Tensor]:
        """The three splits as tensors (for checkpoint fingerprints)."""
        return [
            torch.from_numpy(np.ascontiguousarray(a)) for a in (self.train, self.val, self.test)
        ]


def _triples(graph: GraphDir, name: str) -> np.ndarray:
    array = np.array(graph.array(name), dtype=np.int64)  # a small, writable copy
    if array.ndim != 2 or array.shape[1] != 3:
        raise InputError(
            f"expected an int64 [T, 3] array, found shape {array.shape}", graph.path / f"{name}.npy"
        )
    m = graph.manifest
    bad = (array[:, [0, 2]] < 0) | (array[:, [0, 2]] >= m.num_nodes)
    if bad.any():
        row = int(np.nonzero(bad.any(axis=1))[0][0])
        raise InputError(
            f"row {row}: node id outside [0, {m.num_nodes})", graph.path / f"{name}.npy"
        )
    rel_bad = (array[:, 1] < 0) | (array[:, 1] >= max(m.num_relations, 1))
    if rel_bad.any():
        row = int(np.nonzero(rel_bad)[0][0])
        raise InputError(
            f"row {row}: relation outside [0, {m.num_relations})", graph.path / f"{name}.npy"
        )
    return array


def link_splits(
    graph: GraphDir, val_fraction: float = 0.05, test_fraction: float = 0.05
) -> LinkSplits:
    """The graph's own triples (knowledge graphs), or a split of its edges.

    Edge splits take the last ``test_fraction`` of ``edges_shuffled.npy`` as
    test edges and the ``val_fraction`` before them as validation edges
    (deterministic for a graph directory: the file is shuffled with
    ``stats.shuffle_seed``). They hold each undirected edge once (``u < v``)
    with ``symmetric=True``: training uses both orientations under relation 0
    and filtering knows both, so no id order leaks into the model.
    """
    m = graph.manifest
    if all(graph.has(f"{s}_triples") for s in ("train", "valid", "test")):
        return LinkSplits(
            _triples(graph, "train_triples"),
            _triples(graph, "valid_triples"),
            _triples(graph, "test_triples"),
            m.num_nodes,
            max(m.num_relations, 1),
            "kg",
        )
    if not (0 <= val_fraction < 1 and 0 <= test_fraction < 1 and val_fraction + test_fraction < 1):
        raise ValueError(
            f"val_fraction={val_fraction}, test_fraction={test_fraction}: each "
            "must be in [0, 1) and together below 1"
        )
    pairs = np.asarray(graph.array("edges_shuffled"), dtype=np.int64)
    count = len(pairs)
    num_test, num_val = int(count * test_fraction), int(count * val_fraction)
    num_train = count - num_test - num_val
    if num_train < 1 or (val_fraction > 0 and num_val < 1) or (test_fraction > 0 and num_test < 1):
        raise InputError(
            f"{count} edges are too few to split {val_fraction:.0%} / "
            f"{test_fraction:.0%} for validation / test",
            graph.path,
        )
    triples = np.zeros((count, 3), dtype=np.int64)
    triples[:, 0], triples[:, 2] = pairs[:, 0], pairs[:, 1]
    return LinkSplits(
        triples[:num_train],
        triples[num_train : num_train + num_val],
        triples[num_train + num_val :],
        m.num_nodes,
        1,
        "edges",
        symmetric=True,
    )


def message_passing_csc(triples: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """``(indptr, indices)`` of the undirected simple graph of ``triples``:
    row ``v`` lists every node joined to ``v`` by a triple (either direction),
    sorted, once."""
    from gnncore import _C

    t = np.asarray(triples, dtype=np.int64).reshape(-1, 3)
    keep = t[:, 0] != t[:, 2]
    u, v = t[keep, 0], t[keep, 2]
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    pairs = (
        np.unique(lo * num_nodes + hi)
        if num_nodes < 2**31
        else np.unique(np.stack([lo, hi], axis=1), axis=0)
    )
    if pairs.ndim == 1:
        lo, hi = pairs // num_nodes, pairs % num_nodes
    else:
        lo, hi = pairs[:, 0], pairs[:, 1]
    indptr, indices, _ = _C.build_csr(
        np.concatenate([hi, lo]),
        np.concatenate([lo, hi]),
        num_nodes,
        num_nodes <= np.iinfo(np.int32).max,
    )
    return indptr, indices
