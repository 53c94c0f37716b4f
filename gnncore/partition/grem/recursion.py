"""GREM's recursive bisection over an edge file: each sub-problem is seeded
(:mod:`.seed`) and streamed (:func:`~.bisect.grem_bisect`); sibling
bisections may run in worker processes (:mod:`~gnncore.partition.task_tree`)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gnncore import _C
from gnncore.heap import trim_heap
from gnncore.memory import cgroup_limit, mem_available
from gnncore.partition.base import part_label_dtype
from gnncore.partition.edge_stream import EdgeFile
from gnncore.partition.grem.bisect import (
    BisectionRecord,
    grem_bisect,
    halves,
    node_id_dtype,
    side_capacity,
)
from gnncore.partition.grem.chunk import ChunkRows
from gnncore.partition.grem.plan import MAX_CLUSTERS, ClusterPlan, cluster_plan, plan_applies
from gnncore.partition.grem.seed import SEED_METHODS, seed_sides
from gnncore.partition.task_tree import run_task_tree
from gnncore.store.scratch import scratch_dir
from gnncore.typing import require_csrc
from gnncore.usage import peak_rss_bytes


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
    #: OpenMP threads of each worker process (0: OpenMP's default)
    worker_threads: int = 0


#: ``workers=0`` (auto) runs sibling bisections in worker processes from this
#: many edges up, one worker per CPU: below, a second-level bisection takes
#: about as long as a worker's start and costs an interpreter and a plan more
#: (20M edges, p = 16, 1% chunks: 6.4-6.7 s and 285 MiB with 2 workers
#: against 6.1-7.3 s and 118 MiB in one process). At a billion edges two
#: workers took the second level from 129 s to 83 s, the third from 118 s to
#: 71 s and the fourth from 98 s to 55 s (docs/BENCHMARKS.md, session 33).
AUTO_WORKERS_MIN_EDGES = 1 << 26


def usable_cpus() -> int:
    """CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def check_worker_setting(workers: Any) -> int:
    """``workers`` as an int >= 0 (0: :func:`resolve_workers` chooses), else ``ValueError``."""
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 0:
        raise ValueError(f"workers must be an integer >= 0 (0: auto), got {workers!r}")
    return int(workers)


#: Bytes a worker holds per node of the graph (its second-level sub-problem's
#: state, 21 bytes a node of half the graph, with its member list, sides and
#: restreaming state) and per chunk row (the chunk, the one read ahead and its
#: adjacency), plus its interpreter: about 2 GB for each of two workers at 100M
#: nodes and 10M-row chunks (measured 1.9-2.0 GiB, docs/BENCHMARKS.md, session 33).
WORKER_BYTES_PER_NODE = 16
WORKER_BYTES_PER_CHUNK_ROW = 32
WORKER_BYTES_BASE = 64 << 20
#: Bytes this process holds per node while the workers run (labels, the root's
#: member list, the plan's clusters).
WAITING_BYTES_PER_NODE = 9
#: Share of the memory room auto workers may take: the rest is left to the page
#: cache that holds the per-side edge files they read.
AUTO_WORKERS_ROOM_SHARE = 0.75


def worker_bytes(num_nodes: int, chunk_rows: int) -> int:
    """Estimated peak of one worker process of a run over ``num_nodes`` nodes."""
    return (
        WORKER_BYTES_PER_NODE * num_nodes
        + WORKER_BYTES_PER_CHUNK_ROW * chunk_rows
        + WORKER_BYTES_BASE
    )


def memory_room() -> int | None:
    """Bytes the run may hold: this process's cgroup limit when it has one,
    else the machine's ``MemAvailable`` (``None`` when neither can be read)."""
    limit = cgroup_limit()
    return limit if limit is not None else mem_available()


def resolve_workers(
    workers: int, rows: int, parts: int, num_nodes: int = 0, chunk_rows: int = 0
) -> int:
    """The worker processes a run uses: ``workers`` when given, else (0, auto)
    one per usable CPU when the stream holds at least
    :data:`AUTO_WORKERS_MIN_EDGES` rows, else 1, and no more than
    :data:`AUTO_WORKERS_ROOM_SHARE` of :func:`memory_room` holds
    (:func:`worker_bytes` each, beside this process's
    :data:`WAITING_BYTES_PER_NODE`); never more than the widest level of the
    recursion holds bisections."""
    workers = check_worker_setting(workers)
    if workers == 0:
        workers = usable_cpus() if rows >= AUTO_WORKERS_MIN_EDGES else 1
        room = memory_room() if workers > 1 else None
        if room is not None:
            each = worker_bytes(num_nodes, chunk_rows)
            spare = AUTO_WORKERS_ROOM_SHARE * room - WAITING_BYTES_PER_NODE * num_nodes
            workers = min(workers, int(spare // each))
    return max(1, min(workers, widest_level(parts)))


def _setup_worker(run: _Recursion) -> None:
    """A worker's OpenMP threads: its share of the CPUs (the workers' kernels
    would otherwise each start one thread per CPU and wait on each other's)."""
    if run.worker_threads:
        _C.set_num_threads(run.worker_threads)


def _mapped_plan(plan: ClusterPlan | None, work: Path) -> ClusterPlan | None:
    """``plan`` with its per-node cluster array saved in ``work`` and
    memory-mapped: it pickles to the workers as its file's path (each maps
    the same pages) instead of a copy of ``4 · N`` bytes each."""
    if plan is None:
        return None
    path = work / "plan-cluster.npy"
    np.save(path, plan.cluster)
    return dataclasses.replace(plan, cluster=np.load(path, mmap_mode="r"))


@dataclass(frozen=True)
class _SubProblem:
    """One bisection to run: the nodes ``members`` of parts ``[lo, lo + q)``,
    whose edges are ``source`` (a temporary file of the run when ``owned``).

    ``source`` is in the sub-problem's own ids: id ``i`` there is the node
    ``members[i]`` (``members`` increasing), so a bisection's arrays hold
    ``len(members)`` entries, not one per node of the graph."""

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
    use_plan = plan is not None and plan_applies(plan, first.pairs, len(members), lo, (q0, q1))
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
        num_nodes=len(members),
        first_part=lo,
        use_plan=use_plan,
        members=members,
    )
    del first
    seed_labels = seed_labels.astype(np.int8)  # 0/1; alive during the C++ call
    seeded = time.perf_counter() - start
    outs = [
        str(Path(run.work) / f"p{first_part}-q{share}.bin") if share > 1 else ""
        for share, first_part in ((q0, lo), (q1, lo + q0))
    ]
    trim_heap()  # the seed's freed temporaries, before the C++ pass allocates
    result = grem_bisect(
        sub.source,
        len(members),
        None,  # every id of the sub-problem's own numbering
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
    del result
    trim_heap()
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
    on_plan: Callable[[ClusterPlan], None] | None = None,
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
        workers (int): Bisections run at once (default: 1; 0: auto,
            :func:`resolve_workers`). Sibling
            bisections are independent: with ``workers > 1`` this process runs
            the top bisection, then ``workers`` spawned processes (at most as
            many as the widest level of the recursion has bisections) run the
            others while this one waits (see
            :func:`~gnncore.partition.task_tree.run_task_tree`). The labels are
            the same for any ``workers``, except where seed ``clusters`` makes
            its plan here from a cluster graph of at least
            :data:`~gnncore.partition.grem.plan_levels.PLAN_SPLIT_MIN_EDGES`
            edges: with workers, METIS below the plan's top split then runs
            beside the top bisection (another plan of the same recursion).
            Time drops and memory grows: each
            worker holds its own interpreter (~40 MiB), its sub-problem's arrays
            and a chunk, and runs its share of the CPUs as OpenMP threads. The
            plan's per-node clusters are memory-mapped from the run's scratch
            directory, shared by all.
        on_bisection (callable, optional): ``f(record, done)`` as each
            bisection ends (in completion order; ``done`` of ``parts - 1``).
        on_plan (callable, optional): ``f(plan)`` with the whole plan, when
            its lower levels ran in the background (``plan.lower`` given, or
            made here with ``workers > 1``) and are collected, after the top
            bisection.

    Returns:
        ``int64[num_nodes]`` part labels in ``[0, parts)``.
    """
    require_csrc()
    check_run_args(num_nodes, parts, chunk_edges, passes, seed_method, imbalance)
    check_clusters(clusters, seed_method)
    workers = resolve_workers(workers, edges.rows, parts, num_nodes, chunk_edges)
    if parts == 1:
        return np.zeros(num_nodes, dtype=np.int64)
    label = np.zeros(num_nodes, dtype=part_label_dtype(parts))
    if seed_method == "clusters" and plan is None:
        plan = cluster_plan(
            edges, num_nodes, parts, chunk_edges=chunk_edges, clusters=clusters, seed=seed,
            imbalance=imbalance, background=workers > 1,
        )  # fmt: skip
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

    work = scratch_dir("gnncore-grem-", tmp_dir)
    lower = plan.lower if plan is not None else None
    try:
        shared = _Recursion(
            num_nodes, parts, chunk_edges, passes, seed_method, refine, seed, imbalance,
            plan if workers == 1 or lower is not None else _mapped_plan(plan, work), str(work),
            worker_threads=max(1, usable_cpus() // workers) if workers > 1 else 0,
        )  # fmt: skip
        root = _SubProblem(
            edges, 0, parts, False, np.arange(num_nodes, dtype=node_id_dtype(num_nodes))
        )
        _run_bisections(root, shared, expand, workers, work, on_plan)
    finally:
        if lower is not None:
            lower.close()
        shutil.rmtree(work, ignore_errors=True)
    if records is not None:
        records.extend(sorted(done, key=lambda r: (r.first_part, -r.parts)))
    return label.astype(np.int64)


def _run_bisections(
    root: _SubProblem,
    shared: _Recursion,
    expand: Callable[[_SubProblem, _Bisected], list[_SubProblem]],
    workers: int,
    work: Path,
    on_plan: Callable[[ClusterPlan], None] | None,
) -> None:
    """Every bisection from ``root`` (:func:`run_task_tree`). When the plan's
    METIS below its top split runs in the background (``plan.lower``,
    :mod:`~gnncore.partition.grem.plan_levels`): the top bisection here beside
    it, then, with the whole plan (given to ``on_plan``), every bisection below
    in the workers."""
    plan = shared.plan
    if plan is None or plan.lower is None:
        run_task_tree([root], _bisect, expand, shared, workers=workers, worker_setup=_setup_worker)
        return
    children = expand(root, _bisect(shared, root))
    plan = plan.completed()
    if on_plan is not None:
        on_plan(plan)
    shared = dataclasses.replace(shared, plan=_mapped_plan(plan, work))
    run_task_tree(
        children, _bisect, expand, shared, workers=workers, worker_setup=_setup_worker,
        run_first_here=False,
    )  # fmt: skip


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


def check_run_args(
    num_nodes: int, parts: int, chunk_edges: int, passes: int, seed_method: str, imbalance: float
) -> None:
    """Raise ``ValueError`` naming the first bad argument of :func:`grem_partition_file`."""
    if num_nodes < 0:
        raise ValueError(f"num_nodes must be >= 0, got {num_nodes}")
    if not isinstance(parts, (int, np.integer)) or parts < 1:
        raise ValueError(f"parts must be an integer >= 1, got {parts!r}")
    if parts > max(num_nodes, 1):
        raise ValueError(f"cannot split {num_nodes} nodes into {parts} parts")
    if not isinstance(chunk_edges, (int, np.integer)) or chunk_edges < 1:
        raise ValueError(f"chunk_edges must be an integer >= 1, got {chunk_edges!r}")
    check_method_args(passes, seed_method)
    if not 0 <= imbalance < 1:
        raise ValueError(f"imbalance must be in [0, 1), got {imbalance}")


def check_clusters(clusters: Any, seed_method: Any) -> None:
    """Raise ``ValueError`` unless ``clusters`` is ``None`` or a cluster count
    that ``seed_method`` uses."""
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


def check_method_args(passes: Any, seed_method: Any) -> None:
    """Raise ``ValueError`` unless ``passes`` is an integer >= 0 and ``seed_method`` a known one."""
    if isinstance(passes, bool) or not isinstance(passes, (int, np.integer)) or passes < 0:
        raise ValueError(f"passes must be an integer >= 0, got {passes!r}")
    if seed_method not in SEED_METHODS:
        raise ValueError(
            f"seed_method must be one of {', '.join(SEED_METHODS)}, got {seed_method!r}"
        )
