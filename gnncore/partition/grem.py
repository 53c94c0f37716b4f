"""GREM — Greedy plus Refinement for Edge-cut Minimization (ALGORITHMS.md §1).

The edge stream (``edges_shuffled.npy``) is read from disk in chunks of
``ceil(chunk · |E|)`` edges of the whole graph, never as a whole. Python drives
the recursive bisection; per bisection it reads the first chunk (C++), seeds its
nodes (``metis`` via pymetis on the chunk's subgraph, ``random`` or ``ldg``),
then one C++ call streams the remaining chunks (GREM pass), runs the
restreaming refinement passes and splits the edge file into one temporary file
per side for the next level. Temporary files live in a private directory that
is removed afterwards, also on error. Memory: O(|V|) arrays plus one chunk.

    from gnncore.partition.grem import GremPartitioner
    labels = GremPartitioner(chunk=0.1, passes=3).assign(graph, PartitionOptions(parts=8))
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gnncore.partition.base import PartitionOptions, Partitioner
from gnncore.store import GraphDir
from gnncore.typing import require_csrc

SEED_METHODS = ("metis", "random", "ldg")


@dataclass(frozen=True)
class EdgeFile:
    """Rows of ``(u, v)`` node-id pairs in a binary file.

    Attributes:
        path (str): The file.
        offset (int): Byte offset of row 0 (a ``.npy`` file's data offset, or 0).
        dtype (str): ``"int32"`` or ``"int64"`` (little-endian).
        rows (int): Number of rows.
    """

    path: str
    offset: int
    dtype: str
    rows: int

    @property
    def int64(self) -> bool:
        return self.dtype == "int64"

    @classmethod
    def from_npy(cls, path: str | os.PathLike[str]) -> EdgeFile:
        """Describe a C-ordered little-endian int32/int64 ``[E, 2]`` ``.npy`` file
        from its header (nothing else is read)."""
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            reader = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                      else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = reader(fh, max_header_size=10_000)
            offset = fh.tell()
        if dtype.str not in ("<i4", "<i8"):
            raise ValueError(f"{path}: edge ids must be little-endian int32 or int64, "
                             f"not {dtype.str}")
        if len(shape) != 2 or shape[1] != 2 or (fortran and shape[0] > 1):
            raise ValueError(f"{path}: expected a C-ordered [E, 2] array, got shape {shape}"
                             + (" in Fortran order" if fortran else ""))
        return cls(str(path), int(offset), "int64" if dtype.str == "<i8" else "int32",
                   int(shape[0]))

    def read(self, begin: int, count: int) -> np.ndarray:
        """Rows ``[begin, begin + count)`` as ``int64[k, 2]`` (one chunk)."""
        from gnncore import _C

        flat = _C.grem_read_edges(self.path, self.offset, self.int64, self.rows, begin, count)
        return np.asarray(flat).reshape(-1, 2)


def chunk_rows(fraction: float, num_edges: int) -> int:
    """``ceil(fraction · |E|)`` edges (at least 1), robust to float round-off."""
    return max(1, math.ceil(round(fraction * num_edges, 6)))


def side_capacity(num_nodes: int, share: int, parts: int, imbalance: float) -> int:
    """``P = ceil(N · q/p · (1 + imbalance))`` for a side holding ``q`` of ``p`` parts."""
    return int(math.ceil((1 + imbalance) * num_nodes * share / parts - 1e-9))


def first_appearance(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nodes of ``pairs`` in first-appearance order (row by row, ``u`` before
    ``v``) and the pairs renumbered to those local ids."""
    flat = pairs.reshape(-1)
    uniq, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[order] = np.arange(len(uniq))
    return uniq[order], rank[inverse].reshape(-1, 2)


def chunk_csr(local_pairs: np.ndarray, num_local: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric CSR (int64, rows sorted) of a chunk over its local ids."""
    from gnncore import _C

    u = np.ascontiguousarray(local_pairs[:, 0], dtype=np.int64)
    v = np.ascontiguousarray(local_pairs[:, 1], dtype=np.int64)
    indptr, indices, _ = _C.build_csr(np.concatenate([u, v]), np.concatenate([v, u]),
                                      num_local, False)
    return indptr, indices


def seed_sides(pairs: np.ndarray, method: str, weights: tuple[int, int],
               capacities: tuple[int, int], seed: int, imbalance: float,
               rng_key: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Seed labels of the first chunk's nodes (first-appearance order).

    ``metis``: pymetis bisection of the chunk's subgraph with target weights
    ``w0 : w1`` (``ufactor = 1000 · imbalance``, ``seed``); ``random``: a
    balanced random split in that ratio; ``ldg``: Linear Deterministic Greedy
    over the chunk's nodes in first-appearance order with capacities
    ``ceil(k · w_s / (w0 + w1) · (1 + imbalance))``. A side left with more than
    its capacity ``P`` (METIS can exceed its tolerance on small chunks) gives
    back its nodes with the fewest chunk neighbours on its own side minus the
    other side.
    """
    from gnncore import _C

    nodes, local = first_appearance(pairs)
    k = len(nodes)
    if k == 0:
        return nodes, np.zeros(0, dtype=np.int64)
    total = weights[0] + weights[1]
    if method == "random":
        rng = np.random.default_rng([seed, *rng_key])
        n0 = int(round(k * weights[0] / total))
        sides = np.ones(k, dtype=np.int64)
        sides[rng.permutation(k)[:n0]] = 0
    else:
        indptr, indices = chunk_csr(local, k)
        if method == "ldg":
            caps = [max(1, math.ceil((1 + imbalance) * k * w / total - 1e-9)) for w in weights]
            sides = np.asarray(_C.ldg_bisect(indptr, indices, caps[0], caps[1], *weights))
        else:
            import pymetis

            options = pymetis.Options()
            options.seed = seed
            options.ufactor = int(round(imbalance * 1000))
            tpwgts = None if weights[0] == weights[1] else [w / total for w in weights]
            result = pymetis.part_graph(2, pymetis.CSRAdjacency(indptr, indices), tpwgts=tpwgts,
                                        recursive=True, options=options)
            sides = np.asarray(result.vertex_part, dtype=np.int64)
    return nodes, _repair_capacity(sides, local, capacities)


def _repair_capacity(sides: np.ndarray, local: np.ndarray,
                     capacities: tuple[int, int]) -> np.ndarray:
    for s in (0, 1):
        excess = int(np.count_nonzero(sides == s)) - capacities[s]
        if excess <= 0:
            continue
        same = sides[local[:, 0]] == sides[local[:, 1]]
        score = np.zeros(len(sides), dtype=np.int64)  # own-side minus other-side neighbours
        for col in (0, 1):
            np.add.at(score, local[:, col], np.where(same, 1, -1))
        mine = np.flatnonzero(sides == s)
        move = mine[np.argsort(score[mine], kind="stable")[:excess]]
        sides = sides.copy()
        sides[move] = 1 - s
    return sides


def grem_bisect(
    edges: EdgeFile,
    num_nodes: int,
    members: np.ndarray,
    *,
    chunk_edges: int,
    seed_nodes: np.ndarray,
    seed_labels: np.ndarray,
    capacities: tuple[int, int],
    weights: tuple[int, int] = (1, 1),
    refine: bool = True,
    passes: int = 0,
    out_paths: tuple[str, str] = ("", ""),
) -> dict[str, Any]:
    """One GREM bisection of a sub-problem over the edge file ``edges`` (C++).

    The low-level step :func:`grem_partition_file` repeats: ``seed_nodes`` /
    ``seed_labels`` must label exactly the nodes of the first ``chunk_edges``
    rows; see ``gnncore._C.grem_bisect`` for the returned dict (``side`` is
    aligned with ``members``).
    """
    require_csrc()
    from gnncore import _C

    return _C.grem_bisect(
        edges.path, edges.offset, edges.int64, edges.rows, num_nodes,
        np.ascontiguousarray(members, dtype=np.int64),
        np.ascontiguousarray(seed_nodes, dtype=np.int64),
        np.ascontiguousarray(seed_labels, dtype=np.int64),
        chunk_edges, capacities[0], capacities[1], weights[0], weights[1], refine, passes,
        str(out_paths[0]), str(out_paths[1]))


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


def grem_partition_file(
    edges: EdgeFile,
    num_nodes: int,
    parts: int,
    *,
    chunk_edges: int,
    passes: int = 3,
    seed_method: str = "metis",
    refine: bool = True,
    seed: int = 0,
    imbalance: float = 0.03,
    tmp_dir: str | os.PathLike[str] | None = None,
    records: list[BisectionRecord] | None = None,
) -> np.ndarray:
    """GREM recursive bisection of the graph whose edge stream is ``edges``.

    Args:
        edges (EdgeFile): Distinct undirected pairs in stream order (no self-loops).
        num_nodes (int): ``N``; ids are in ``[0, N)``. Nodes in no edge go to the
            smaller side of each bisection.
        parts (int): ``p >= 1``; sides get ``⌊q/2⌋`` and ``⌈q/2⌉`` of a
            sub-problem's ``q`` parts.
        chunk_edges (int): Edges per chunk, the same at every level.
        passes (int): Restreaming refinement passes per bisection (0: the thesis' GREM).
        seed_method (str): ``"metis"``, ``"random"`` or ``"ldg"``.
        refine (bool): GREM's averaging refinement (``False``: streaming greedy).
        seed (int): Seed of METIS and of the random seed labels.
        imbalance (float): A side holding ``q`` of ``p`` parts takes at most
            ``ceil(N · q/p · (1 + imbalance))`` nodes (and, on tiny graphs, at
            most the sub-problem's nodes minus one per part of the other side,
            so no part is empty).
        tmp_dir: Where the private directory of per-side edge files is made
            (default: the system's temporary directory).
        records (list, optional): Receives one :class:`BisectionRecord` per bisection.

    Returns:
        ``int64[num_nodes]`` part labels in ``[0, parts)``.
    """
    require_csrc()
    _check_run_args(num_nodes, parts, chunk_edges, passes, seed_method, imbalance)
    label = np.zeros(num_nodes, dtype=np.int64)
    if parts == 1:
        return label
    work = Path(tempfile.mkdtemp(prefix="grem-", dir=tmp_dir))
    try:
        stack: list[tuple[EdgeFile, int, int, bool]] = [(edges, 0, parts, False)]
        count = 0
        while stack:
            source, lo, q, owned = stack.pop()
            start = time.perf_counter()
            q0, q1 = q // 2, q - q // 2
            members = np.flatnonzero(label == lo).astype(np.int64)
            # P from the global target; on tiny graphs also leave the other side
            # one node per part so that no part ends up empty.
            caps = (min(side_capacity(num_nodes, q0, parts, imbalance), len(members) - q1),
                    min(side_capacity(num_nodes, q1, parts, imbalance), len(members) - q0))
            first = source.read(0, chunk_edges)
            seed_nodes, seed_labels = seed_sides(first, seed_method, (q0, q1), caps, seed,
                                                 imbalance, (lo, q))
            del first
            outs = [str(work / f"b{count}-s{s}.bin") if share > 1 else ""
                    for s, share in enumerate((q0, q1))]
            result = grem_bisect(source, num_nodes, members, chunk_edges=chunk_edges,
                                 seed_nodes=seed_nodes, seed_labels=seed_labels,
                                 capacities=caps, weights=(q0, q1), refine=refine,
                                 passes=passes, out_paths=(outs[0], outs[1]))
            if owned:
                os.remove(source.path)
            side = np.asarray(result["side"])
            label[members[side == 1]] = lo + q0
            if records is not None:
                records.append(BisectionRecord(
                    lo, q, len(members), source.rows, int(result["num_chunks"]),
                    int(result["first_chunk_nodes"]), int(result["isolated"]),
                    int(result["reassigned"]), list(result["moves"]),
                    tuple(result["sizes"]), caps, time.perf_counter() - start))
            for s, (share, first_part) in reversed(list(enumerate(((q0, lo), (q1, lo + q0))))):
                if share > 1:
                    child = EdgeFile(outs[s], 0, source.dtype, int(result["rows_written"][s]))
                    stack.append((child, first_part, share, True))
            count += 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return label


def _check_run_args(num_nodes: int, parts: int, chunk_edges: int, passes: int,
                    seed_method: str, imbalance: float) -> None:
    if num_nodes < 0:
        raise ValueError(f"num_nodes must be >= 0, got {num_nodes}")
    if not isinstance(parts, (int, np.integer)) or parts < 1:
        raise ValueError(f"parts must be an integer >= 1, got {parts!r}")
    if parts > max(num_nodes, 1):
        raise ValueError(f"cannot split {num_nodes} nodes into {parts} parts")
    if not isinstance(chunk_edges, (int, np.integer)) or chunk_edges < 1:
        raise ValueError(f"chunk_edges must be an integer >= 1, got {chunk_edges!r}")
    _check_method_args(passes, seed_method)
    if not 0 <= imbalance < 1:
        raise ValueError(f"imbalance must be in [0, 1), got {imbalance}")


def _check_method_args(passes: Any, seed_method: Any) -> None:
    if isinstance(passes, bool) or not isinstance(passes, (int, np.integer)) or passes < 0:
        raise ValueError(f"passes must be an integer >= 0, got {passes!r}")
    if seed_method not in SEED_METHODS:
        raise ValueError(f"seed_method must be one of {', '.join(SEED_METHODS)}, "
                         f"got {seed_method!r}")


class GremPartitioner(Partitioner):
    """GREM over the graph's shuffled edge stream (``edges_shuffled.npy``).

    Args:
        chunk (float): Chunk size as a fraction of the whole graph's undirected
            edges, in ``(0, 1]`` (default: 0.1); fixed across recursion levels.
        passes (int): Restreaming refinement passes per bisection (default: 3;
            0 is the thesis' GREM).
        seed_method (str): Seed of the first chunk: ``"metis"`` (default),
            ``"random"`` or ``"ldg"``.
        refine (bool): Averaging refinement of earlier labels (default: True;
            False is streaming greedy).
        tmp_dir (str, optional): Parent of the temporary per-side edge files
            (default: the system's temporary directory).

    After :meth:`assign`, :attr:`last_stats` lists one
    :class:`BisectionRecord` per bisection.
    """

    name = "grem"

    def __init__(self, chunk: float = 0.1, passes: int = 3, seed_method: str = "metis",
                 refine: bool = True, tmp_dir: str | os.PathLike[str] | None = None) -> None:
        if isinstance(chunk, bool) or not isinstance(chunk, (int, float)) \
                or not 0 < chunk <= 1:
            raise ValueError(f"chunk must be a fraction of the edges in (0, 1], got {chunk!r}")
        _check_method_args(passes, seed_method)
        if not isinstance(refine, bool):
            raise ValueError(f"refine must be True or False, got {refine!r}")
        self.chunk = float(chunk)
        self.passes = int(passes)
        self.seed_method = seed_method
        self.refine = refine
        self.tmp_dir = tmp_dir
        self.last_stats: list[BisectionRecord] = []

    def assign(self, graph: GraphDir, options: PartitionOptions) -> np.ndarray:
        options.validate(graph.num_nodes)
        edges = EdgeFile.from_npy(graph.path / "edges_shuffled.npy")
        expected = graph.manifest.num_undirected_edges
        if edges.rows != expected:
            raise ValueError(f"{edges.path} holds {edges.rows} rows, the manifest counts "
                             f"{expected} undirected edges")
        self.last_stats = []
        return grem_partition_file(
            edges, graph.num_nodes, options.parts, chunk_edges=chunk_rows(self.chunk, edges.rows),
            passes=self.passes, seed_method=self.seed_method, refine=self.refine,
            seed=options.seed, imbalance=options.imbalance, tmp_dir=self.tmp_dir,
            records=self.last_stats)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(chunk={self.chunk}, passes={self.passes}, "
                f"seed_method={self.seed_method!r}, refine={self.refine})")


class GreedyPartitioner(GremPartitioner):
    """The paper's streaming greedy baseline: GREM without refinement
    (a node keeps its first label) and no restreaming passes."""

    name = "greedy"

    def __init__(self, chunk: float = 0.1, seed_method: str = "metis",
                 tmp_dir: str | os.PathLike[str] | None = None) -> None:
        super().__init__(chunk=chunk, passes=0, seed_method=seed_method, refine=False,
                         tmp_dir=tmp_dir)

    def __repr__(self) -> str:
        return f"GreedyPartitioner(chunk={self.chunk}, seed_method={self.seed_method!r})"


def greedy_partitioner(chunk: float = 0.1) -> GreedyPartitioner:
    """Streaming greedy (``refine=False``, ``passes=0``) with ``chunk`` fraction chunks."""
    return GreedyPartitioner(chunk=chunk)


__all__ = [
    "BisectionRecord",
    "EdgeFile",
    "GreedyPartitioner",
    "GremPartitioner",
    "SEED_METHODS",
    "chunk_rows",
    "greedy_partitioner",
    "grem_bisect",
    "grem_partition_file",
    "seed_sides",
    "side_capacity",
]
