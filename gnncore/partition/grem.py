"""GREM — Greedy plus Refinement for Edge-cut Minimization (ALGORITHMS.md §1).

The edge stream (``edges_shuffled.npy``) is read from disk in chunks of
``ceil(chunk · |E|)`` edges of the whole graph, never as a whole. Python drives
the recursive bisection; per bisection it reads the first chunk (C++), seeds its
nodes (:mod:`~gnncore.partition.grem_seed`: ``metis`` via pymetis on the chunk's
subgraph, ``random``, ``ldg``, or ``clusters`` from a global plan made once, see
:mod:`~gnncore.partition.grem_plan`), then one
C++ call streams the remaining chunks (GREM pass), runs the
restreaming refinement passes and splits the edge file into one temporary file
per side for the next level. Temporary files live in a private directory that
is removed afterwards, also on error. Memory: O(|V|) arrays plus one chunk
(per worker process with ``workers > 1``: sibling bisections run at once).

Memory accounting for an int32 graph (N nodes; a chunk of m edges over c
nodes; measured per phase by ``benchmarks/grem_memory.py``, see
docs/BENCHMARKS.md, "GREM's memory per chunk edge"):

* all along (Python): part labels (int8 while p <= 128), the sub-problem's
  node list (int32), the plan's cluster of every node (int32): 9 B/node;
* seed of a bisection (:mod:`~gnncore.partition.grem_seed`): the chunk's rows
  (8 B/edge, freed once renumbered: :class:`~gnncore.partition.grem_chunk.ChunkRows`),
  the local pairs (8 B/edge), the majority rounds' open pairs (<= 8 B/edge),
  ~22 B per chunk node, a 4 B/node renumbering scratch;
* GREM pass (C++): side (1 B/node), running estimates (16 B/node),
  global-to-chunk map (4 B/node); the chunk's rows and adjacency (16 B/edge),
  its nodes and offsets (8 B per chunk node), the seeds (5 B per first-chunk node);
* refinement passes and the split: side and counters (9 B/node), blocks of at
  most 2^20 rows whatever the chunk size;
* the clusters plan: METIS on a cluster graph of at most ``max(1% of |E|,
  2^19)`` edges (~240 B per cluster-graph edge), independent of the chunk.

    from gnncore.partition.grem import GremPartitioner
    labels = GremPartitioner(chunk=0.1, passes=3).assign(graph, PartitionOptions(parts=8))
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gnncore.partition.base import Partitioner, PartitionOptions
from gnncore.partition.edge_stream import EdgeFile, chunk_rows
from gnncore.partition.grem_chunk import ChunkRows, chunk_components, tree_roots
from gnncore.partition.grem_plan import (
    MAX_CLUSTERS,
    ClusterPlan,
    cluster_chunk,
    cluster_graph_edges,
    cluster_plan,
    default_clusters,
    plan_applies,
    plan_sides,
    trim_cluster_graph,
)
from gnncore.partition.grem_seed import SEED_METHODS, default_seed_method, seed_sides
from gnncore.partition.task_tree import check_workers, run_task_tree
from gnncore.store import GraphDir
from gnncore.typing import require_csrc
from gnncore.usage import peak_rss_bytes

if TYPE_CHECKING:
    from gnncore import _C


def node_id_dtype(num_nodes: int) -> type[np.signedinteger[Any]]:
    """``np.int32`` when every id in ``[0, num_nodes)`` fits it, else ``np.int64``:
    the width of the sub-problems' node lists (4 bytes a node instead of 8)."""
    return np.int32 if num_nodes <= np.iinfo(np.int32).max + 1 else np.int64


def part_label_dtype(parts: int) -> type[np.signedinteger[Any]]:
    """The narrowest of int8/int16/int32/int64 holding part labels ``[0, parts)``:
    the labels kept during the recursion, widened to int64 once at the end."""
    for dtype in (np.int8, np.int16, np.int32):
        if parts - 1 <= np.iinfo(dtype).max:
            return dtype
    return np.int64


def halves(q: int) -> tuple[int, int]:
    """The parts each side of a bisection of ``q`` parts takes: ``⌊q/2⌋, ⌈q/2⌉``."""
    return q // 2, q - q // 2


def side_capacity(num_nodes: int, share: int, parts: int, imbalance: float) -> int:
    """``P = ceil(N · q/p · (1 + imbalance))`` for a side holding ``q`` of ``p`` parts."""
    return int(math.ceil((1 + imbalance) * num_nodes * share / parts - 1e-9))


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
) -> _C.GremBisectResult:
    """One GREM bisection of a sub-problem over the edge file ``edges`` (C++).

    The low-level step :func:`grem_partition_file` repeats: ``seed_nodes`` /
    ``seed_labels`` must label exactly the nodes of the first ``chunk_edges``
    rows. Returns ``gnncore._C.GremBisectResult`` (``side`` is aligned with
    ``members``); bad options raise ``ValueError`` naming the
    ``GremBisectOptions`` field. ``members`` and the seeds go to C++ as int32
    ids and int8 sides while the ids fit (:func:`node_id_dtype`; C++ reads them
    in that width: no int64 copies alive during the call).
    """
    require_csrc()
    from gnncore import _C

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
        np.ascontiguousarray(members, dtype=ids),
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


@dataclass(frozen=True)
class _Recursion:
    """What every bisection of one :func:`grem_partition_file` run shares."""

    num_nodes: int
    parts: int
    chunk_edges: int
    passes: int
    seed_method: str
    refine: bool
    seed: int
    imbalance: float
    plan: ClusterPlan | None
    work: str


@dataclass(frozen=True)
class _SubProblem:
    """One bisection to run: the nodes ``members`` of parts ``[lo, lo + q)``,
    whose edges are ``source`` (a temporary file of the run when ``owned``)."""

    source: EdgeFile
    lo: int
    q: int
    owned: bool
    members: np.ndarray


@dataclass(frozen=True)
class _Bisected:
    """A bisection's outcome: ``side[i]`` of ``members[i]``, the per-side edge
    files (``None`` for a side of one part) and its record."""

    side: np.ndarray
    children: tuple[EdgeFile | None, EdgeFile | None]
    record: BisectionRecord


def _bisect(run: _Recursion, sub: _SubProblem) -> _Bisected:
    """Seed and stream one sub-problem (in this process or a worker)."""
    start = time.perf_counter()
    lo, q, members = sub.lo, sub.q, sub.members
    q0, q1 = halves(q)
    # P from the global target; on tiny graphs also leave the other side one
    # node per part so that no part ends up empty.
    caps = (
        min(side_capacity(run.num_nodes, q0, run.parts, run.imbalance), len(members) - q1),
        min(side_capacity(run.num_nodes, q1, run.parts, run.imbalance), len(members) - q0),
    )
    # the seed takes the rows and frees them once renumbered (ChunkRows)
    first = ChunkRows(sub.source.read(0, run.chunk_edges))
    plan = run.plan
    use_plan = plan is not None and plan_applies(plan, first.pairs, run.num_nodes, lo, (q0, q1))
    method = run.seed_method if use_plan or plan is None else "clusters:metis"
    seed_nodes, seed_labels = seed_sides(
        first,
        run.seed_method,
        (q0, q1),
        caps,
        run.seed,
        run.imbalance,
        (lo, q),
        plan=plan,
        num_nodes=run.num_nodes,
        first_part=lo,
        use_plan=use_plan,
    )
    del first
    seed_labels = seed_labels.astype(np.int8)  # 0/1; alive during the C++ call
    seeded = time.perf_counter() - start
    outs = [
        str(Path(run.work) / f"p{first_part}-q{share}.bin") if share > 1 else ""
        for share, first_part in ((q0, lo), (q1, lo + q0))
    ]
    result = grem_bisect(
        sub.source,
        run.num_nodes,
        members,
        chunk_edges=run.chunk_edges,
        seed_nodes=seed_nodes,
        seed_labels=seed_labels,
        capacities=caps,
        weights=(q0, q1),
        refine=run.refine,
        passes=run.passes,
        out_paths=(outs[0], outs[1]),
    )
    if sub.owned:
        os.remove(sub.source.path)
    side = np.asarray(result.side).astype(np.bool_)
    children = tuple(
        EdgeFile(outs[s], 0, sub.source.dtype, result.rows_written[s]) if outs[s] else None
        for s in (0, 1)
    )
    phases = {
        "seed": seeded,
        "grem": result.seconds_grem,
        "passes": result.seconds_passes,
        "split": result.seconds_split,
    }
    record = BisectionRecord(
        lo,
        q,
        len(members),
        sub.source.rows,
        result.num_chunks,
        result.first_chunk_nodes,
        result.isolated,
        result.reassigned,
        result.moves,
        result.sizes,
        caps,
        time.perf_counter() - start,
        method,
        phases,
        pid=os.getpid(),
        process_peak_rss_bytes=peak_rss_bytes(),
    )
    return _Bisected(side, children, record)  # type: ignore[arg-type]


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
    clusters: int | None = None,
    plan: ClusterPlan | None = None,
    workers: int = 1,
    on_bisection: Callable[[BisectionRecord, int], None] | None = None,
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
        seed_method (str): ``"metis"``, ``"random"``, ``"ldg"`` or ``"clusters"``.
        refine (bool): GREM's averaging refinement (``False``: streaming greedy).
        seed (int): Seed of METIS and of the random seed labels.
        imbalance (float): A side holding ``q`` of ``p`` parts takes at most
            ``ceil(N · q/p · (1 + imbalance))`` nodes (and, on tiny graphs, at
            most the sub-problem's nodes minus one per part of the other side,
            so no part is empty).
        tmp_dir: Where the private directory of per-side edge files is made
            (default: the system's temporary directory).
        records (list, optional): Receives one :class:`BisectionRecord` per
            bisection, in depth-first order (lower parts first).
        clusters (int, optional): Seed ``clusters``: target cluster size
            ``prefix nodes / clusters`` (default: :func:`default_clusters`).
        plan (ClusterPlan, optional): Seed ``clusters``: a plan made by
            :func:`cluster_plan` for this stream and ``parts`` (default: made here).
        workers (int): Bisections run at once (default: 1). Sibling
            bisections are independent: with ``workers > 1`` this process runs
            the top bisection, then ``workers`` spawned processes (at most as
            many as the widest level of the recursion has bisections) run the
            others while this one waits (see
            :func:`~gnncore.partition.task_tree.run_task_tree`). The labels are
            the same for any ``workers``; time drops and memory grows: each
            worker holds its own interpreter (~90 MiB), O(|V|) arrays and chunk.
        on_bisection (callable, optional): ``f(record, done)`` as each
            bisection ends (in completion order; ``done`` of ``parts - 1``).

    Returns:
        ``int64[num_nodes]`` part labels in ``[0, parts)``.
    """
    require_csrc()
    _check_run_args(num_nodes, parts, chunk_edges, passes, seed_method, imbalance)
    _check_clusters(clusters, seed_method)
    check_workers(workers)
    if parts == 1:
        return np.zeros(num_nodes, dtype=np.int64)
    label = np.zeros(num_nodes, dtype=part_label_dtype(parts))
    if seed_method == "clusters" and plan is None:
        plan = cluster_plan(
            edges,
            num_nodes,
            parts,
            chunk_edges=chunk_edges,
            clusters=clusters,
            seed=seed,
            imbalance=imbalance,
        )
    done: list[BisectionRecord] = []

    def expand(sub: _SubProblem, out: _Bisected) -> list[_SubProblem]:
        q0, q1 = halves(sub.q)
        label[sub.members[out.side]] = sub.lo + q0
        done.append(out.record)
        if on_bisection is not None:
            on_bisection(out.record, len(done))
        return [
            _SubProblem(child, first_part, share, True, sub.members[out.side == bool(s)])
            for s, (child, first_part, share) in enumerate(
                zip(out.children, (sub.lo, sub.lo + q0), (q0, q1))
            )
            if child is not None
        ]

    work = Path(tempfile.mkdtemp(prefix="grem-", dir=tmp_dir))
    try:
        shared = _Recursion(
            num_nodes,
            parts,
            chunk_edges,
            passes,
            seed_method,
            refine,
            seed,
            imbalance,
            plan,
            str(work),
        )
        root = _SubProblem(
            edges, 0, parts, False, np.arange(num_nodes, dtype=node_id_dtype(num_nodes))
        )
        run_task_tree([root], _bisect, expand, shared, workers=min(workers, widest_level(parts)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if records is not None:
        records.extend(sorted(done, key=lambda r: (r.first_part, -r.parts)))
    return label.astype(np.int64)


def widest_level(parts: int) -> int:
    """The most bisections one level of the recursion into ``parts`` holds
    (sub-problems of more than one part), so the most that can run at once."""
    level, widest = [parts], 0
    while level:
        level = [q for q in level if q > 1]
        widest = max(widest, len(level))
        level = [side for q in level for side in halves(q)]
    return max(widest, 1)


def helper_peak_rss(records: list[BisectionRecord]) -> int:
    """Summed peak RSS of the processes other than this one that ran ``records``
    (each worker's largest recorded peak)."""
    peaks: dict[int, int] = {}
    for record in records:
        if record.pid != os.getpid():
            peaks[record.pid] = max(peaks.get(record.pid, 0), record.process_peak_rss_bytes)
    return sum(peaks.values())


def _check_run_args(
    num_nodes: int, parts: int, chunk_edges: int, passes: int, seed_method: str, imbalance: float
) -> None:
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


def _check_clusters(clusters: Any, seed_method: Any) -> None:
    if clusters is None:
        return
    if (
        isinstance(clusters, bool)
        or not isinstance(clusters, (int, np.integer))
        or not 2 <= clusters <= MAX_CLUSTERS
    ):
        raise ValueError(
            f"clusters must be None or an integer in [2, {MAX_CLUSTERS}], got {clusters!r}"
        )
    if seed_method != "clusters":
        raise ValueError(f"clusters applies to seed_method 'clusters' only, not {seed_method!r}")


def _check_method_args(passes: Any, seed_method: Any) -> None:
    if isinstance(passes, bool) or not isinstance(passes, (int, np.integer)) or passes < 0:
        raise ValueError(f"passes must be an integer >= 0, got {passes!r}")
    if seed_method not in SEED_METHODS:
        raise ValueError(
            f"seed_method must be one of {', '.join(SEED_METHODS)}, got {seed_method!r}"
        )


class GremPartitioner(Partitioner):
    """GREM over the graph's shuffled edge stream (``edges_shuffled.npy``).

    Args:
        chunk (float): Chunk size as a fraction of the whole graph's undirected
            edges, in ``(0, 1]`` (default: 0.1); fixed across recursion levels.
        passes (int): Restreaming refinement passes per bisection (default: 3;
            0 is the thesis' GREM).
        seed_method (str, optional): Seed of the first chunk (default:
            :func:`default_seed_method`: ``"clusters"`` with passes,
            ``"metis"`` without): ``"metis"``, ``"random"``, ``"ldg"`` or
            ``"clusters"``: one global plan, made
            once (clusters of the stream's first ``min(chunk, max(1%, 2**17))`` edges,
            the cluster graph counted in one streaming pass and split into
            ``p`` parts by METIS;
            see :func:`cluster_plan`), seeds every bisection whose first chunk
            is sparse; a dense or thinly planned one is seeded by ``metis``
            (see :func:`plan_applies`). Memory stays O(|V|) plus one chunk
            (and a cluster graph of at most ``max(prefix, 2**19)`` edges).
        refine (bool): Averaging refinement of earlier labels (default: True;
            False is streaming greedy).
        tmp_dir (str, optional): Parent of the temporary per-side edge files
            (default: the system's temporary directory).
        clusters (int, optional): Seed ``clusters`` only, in ``[2, 65536]``:
            sets the target cluster size ``prefix nodes / clusters``
            (default: :func:`default_clusters`; see :func:`cluster_chunk`).
        workers (int): Bisections run at once, in ``workers`` spawned
            processes after this one ran the top bisection (default: 1, all
            here). Same labels for any value; less time, more memory (see
            :func:`grem_partition_file`).

    After :meth:`assign`, :attr:`last_stats` lists one
    :class:`BisectionRecord` per bisection, :attr:`last_plan` holds the
    :class:`ClusterPlan` of seed ``clusters`` (else ``None``) and
    :attr:`helper_peak_rss_bytes` the summed peak RSS of the worker processes.
    """

    name = "grem"

    def __init__(
        self,
        chunk: float = 0.1,
        passes: int = 3,
        seed_method: str | None = None,
        refine: bool = True,
        tmp_dir: str | os.PathLike[str] | None = None,
        clusters: int | None = None,
        workers: int = 1,
    ) -> None:
        if isinstance(chunk, bool) or not isinstance(chunk, (int, float)) or not 0 < chunk <= 1:
            raise ValueError(f"chunk must be a fraction of the edges in (0, 1], got {chunk!r}")
        _check_method_args(passes, "metis" if seed_method is None else seed_method)
        if seed_method is None:
            seed_method = default_seed_method(int(passes))
        _check_clusters(clusters, seed_method)
        if not isinstance(refine, bool):
            raise ValueError(f"refine must be True or False, got {refine!r}")
        self.chunk = float(chunk)
        self.passes = int(passes)
        self.seed_method = seed_method
        self.refine = refine
        self.tmp_dir = tmp_dir
        self.clusters = None if clusters is None else int(clusters)
        self.workers = check_workers(workers)
        self.last_stats: list[BisectionRecord] = []
        self.last_plan: ClusterPlan | None = None

    def assign(self, graph: GraphDir, options: PartitionOptions) -> np.ndarray:
        options.validate(graph.num_nodes)
        edges = EdgeFile.from_npy(graph.path / "edges_shuffled.npy")
        expected = graph.manifest.num_undirected_edges
        if edges.rows != expected:
            raise ValueError(
                f"{edges.path} holds {edges.rows} rows, the manifest counts "
                f"{expected} undirected edges"
            )
        self.last_stats = []
        self.last_plan = None
        self.helper_peak_rss_bytes = 0
        chunk_edges = chunk_rows(self.chunk, edges.rows)
        if self.seed_method == "clusters" and options.parts > 1:
            self.last_plan = cluster_plan(
                edges,
                graph.num_nodes,
                options.parts,
                chunk_edges=chunk_edges,
                clusters=self.clusters,
                seed=options.seed,
                imbalance=options.imbalance,
            )
        labels = grem_partition_file(
            edges,
            graph.num_nodes,
            options.parts,
            chunk_edges=chunk_edges,
            passes=self.passes,
            seed_method=self.seed_method,
            refine=self.refine,
            seed=options.seed,
            imbalance=options.imbalance,
            tmp_dir=self.tmp_dir,
            records=self.last_stats,
            clusters=self.clusters,
            plan=self.last_plan,
            workers=self.workers,
            on_bisection=self._report(options.parts),
        )
        self.helper_peak_rss_bytes = helper_peak_rss(self.last_stats)
        return labels

    def _report(self, parts: int) -> Callable[[BisectionRecord, int], None] | None:
        """The :attr:`progress` line of each finished bisection."""
        say = self.progress
        if say is None:
            return None
        label = self.name if self.refine else "greedy"

        def report(record: BisectionRecord, done: int) -> None:
            where = "" if record.pid == os.getpid() else f", worker {record.pid}"
            say(
                f"{label}: bisection {done}/{parts - 1} of parts {record.first_part}.."
                f"{record.first_part + record.parts - 1}: {record.nodes:,} nodes, "
                f"{record.edges:,} edges, sides {record.sizes[0]:,}/{record.sizes[1]:,} "
                f"in {record.seconds:.2f} s{where}"
            )

        return report

    def __repr__(self) -> str:
        extra = "" if self.clusters is None else f", clusters={self.clusters}"
        extra += "" if self.workers == 1 else f", workers={self.workers}"
        return (
            f"{type(self).__name__}(chunk={self.chunk}, passes={self.passes}, "
            f"seed_method={self.seed_method!r}, refine={self.refine}{extra})"
        )


class GreedyPartitioner(GremPartitioner):
    """The paper's streaming greedy baseline: GREM without refinement
    (a node keeps its first label) and no restreaming passes."""

    name = "greedy"

    def __init__(
        self,
        chunk: float = 0.1,
        seed_method: str = "metis",
        tmp_dir: str | os.PathLike[str] | None = None,
        workers: int = 1,
    ) -> None:
        super().__init__(
            chunk=chunk,
            passes=0,
            seed_method=seed_method,
            refine=False,
            tmp_dir=tmp_dir,
            workers=workers,
        )

    def __repr__(self) -> str:
        extra = "" if self.workers == 1 else f", workers={self.workers}"
        return f"GreedyPartitioner(chunk={self.chunk}, seed_method={self.seed_method!r}{extra})"


def greedy_partitioner(chunk: float = 0.1) -> GreedyPartitioner:
    """Streaming greedy (``refine=False``, ``passes=0``) with ``chunk`` fraction chunks."""
    return GreedyPartitioner(chunk=chunk)


__all__ = [
    "BisectionRecord",
    "ClusterPlan",
    "EdgeFile",
    "GreedyPartitioner",
    "GremPartitioner",
    "SEED_METHODS",
    "chunk_components",
    "chunk_rows",
    "cluster_chunk",
    "default_seed_method",
    "cluster_graph_edges",
    "cluster_plan",
    "default_clusters",
    "greedy_partitioner",
    "grem_bisect",
    "grem_partition_file",
    "helper_peak_rss",
    "node_id_dtype",
    "part_label_dtype",
    "widest_level",
    "plan_applies",
    "plan_sides",
    "seed_sides",
    "side_capacity",
    "tree_roots",
    "trim_cluster_graph",
]
