"""GREM on a graph directory: :class:`GremPartitioner` (and the streaming greedy,
:class:`GreedyPartitioner`) over its shuffled edge stream.

    from gnncore.partition.grem import GremPartitioner
    labels = GremPartitioner(chunk=0.1, passes=3).assign(graph, PartitionOptions(parts=8))
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from gnncore.heap import trim_heap
from gnncore.partition.base import Partitioner, PartitionOptions
from gnncore.partition.edge_stream import EdgeFile, chunk_rows
from gnncore.partition.grem.bisect import BisectionRecord
from gnncore.partition.grem.plan import ClusterPlan, cluster_plan
from gnncore.partition.grem.recursion import (
    check_clusters,
    check_method_args,
    check_worker_setting,
    grem_partition_file,
    helper_peak_rss,
    resolve_workers,
)
from gnncore.partition.grem.refine import RefineRecord, block_entries_for, refine_kway
from gnncore.partition.grem.seed import default_seed_method
from gnncore.partition.metrics import max_part_size
from gnncore.store import GraphDir

FINAL_PASSES = 8
"""GREM's default final k-way refinement passes (at most; see :func:`refine_kway`)."""


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
            (and a cluster graph of at most ``max(prefix, 2**18)`` edges).
        refine (bool): Averaging refinement of earlier labels (default: True;
            False is streaming greedy).
        tmp_dir (str, optional): Parent of the temporary per-side edge files
            (default: the system's temporary directory).
        clusters (int, optional): Seed ``clusters`` only, in ``[2, 65536]``:
            sets the target cluster size ``prefix nodes / clusters``
            (default: :func:`default_clusters`; see :func:`cluster_chunk`).
        workers (int): Bisections run at once, in ``workers`` spawned
            processes after this one ran the top bisection (1: all here;
            default 0: one per CPU from :data:`AUTO_WORKERS_MIN_EDGES` edges
            up as the memory holds them, else 1, see :func:`resolve_workers`).
            Same labels for any value; less time, more memory (see
            :func:`grem_partition_file`).
        final_passes (int): Passes at most of the final k-way refinement over
            the whole partition (:func:`refine_kway`: size-constrained label
            propagation streamed over the CSR in blocks of a chunk's adjacency,
            never adding a cut edge or breaking the cap; default:
            :data:`FINAL_PASSES`; 0: none, the partition of the bisections).
            Greedy (``refine=False``) runs none, nor does a directed graph
            (its CSR holds each edge once, not the symmetric adjacency the
            passes count on).

    After :meth:`assign`, :attr:`last_stats` lists one
    :class:`BisectionRecord` per bisection, :attr:`last_plan` holds the
    :class:`ClusterPlan` of seed ``clusters`` (else ``None``) and
    :attr:`helper_peak_rss_bytes` the summed peak RSS of the worker processes
    and :attr:`last_refine` the :class:`RefineRecord` of the final refinement
    (``None`` when none ran).
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
        workers: int = 0,
        final_passes: int = FINAL_PASSES,
    ) -> None:
        if isinstance(chunk, bool) or not isinstance(chunk, (int, float)) or not 0 < chunk <= 1:
            raise ValueError(f"chunk must be a fraction of the edges in (0, 1], got {chunk!r}")
        check_method_args(passes, "metis" if seed_method is None else seed_method)
        if seed_method is None:
            seed_method = default_seed_method(int(passes))
        check_clusters(clusters, seed_method)
        if not isinstance(refine, bool):
            raise ValueError(f"refine must be True or False, got {refine!r}")
        if isinstance(final_passes, bool) or not isinstance(final_passes, int) or final_passes < 0:
            raise ValueError(f"final_passes must be an integer >= 0, got {final_passes!r}")
        self.chunk = float(chunk)
        self.passes = int(passes)
        self.seed_method = seed_method
        self.refine = refine
        self.tmp_dir = tmp_dir
        self.clusters = None if clusters is None else int(clusters)
        self.workers = check_worker_setting(workers)
        self.last_workers = 1
        self.final_passes = final_passes if refine else 0
        self.last_refine: RefineRecord | None = None
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
        self.last_workers = resolve_workers(
            self.workers, edges.rows, options.parts, graph.num_nodes, chunk_edges
        )
        if self.progress is not None and self.last_workers > 1:
            self.progress(
                f"{self.name}: bisections below the top one in {self.last_workers} worker processes"
            )
        if self.seed_method == "clusters" and options.parts > 1:
            self.last_plan = cluster_plan(
                edges,
                graph.num_nodes,
                options.parts,
                chunk_edges=chunk_edges,
                clusters=self.clusters,
                seed=options.seed,
                imbalance=options.imbalance,
                background=self.last_workers > 1,
            )
            if self.progress is not None:
                plan, took = self.last_plan, self.last_plan.seconds
                self.progress(
                    f"{self.name}: seed plan of {plan.clusters:,} clusters "
                    f"({plan.cluster_edges:,} edges between them) in {sum(took.values()):.2f} s: "
                    + ", ".join(f"{phase} {seconds:.2f} s" for phase, seconds in took.items())
                    + (
                        ""
                        if plan.lower is None
                        else " (its top split; METIS below it runs beside the top bisection)"
                    )
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
            workers=self.last_workers,
            on_bisection=self._report(options.parts),
            on_plan=self._plan_completed,
        )
        self.helper_peak_rss_bytes = helper_peak_rss(self.last_stats)
        self.last_refine = None
        if self.final_passes and options.parts > 1 and not graph.manifest.directed:
            labels = np.ascontiguousarray(labels, dtype=np.int64)
            trim_heap()
            cap = max_part_size(graph.num_nodes, options.parts, options.imbalance)
            self.last_refine = refine_kway(
                graph.path,
                labels,
                options.parts,
                cap,
                max_passes=self.final_passes,
                block_entries=block_entries_for(chunk_edges),
            )
            if self.progress is not None:
                r = self.last_refine
                self.progress(
                    f"{self.name}: final refinement, {r.passes} passes: moved "
                    f"{sum(r.moves):,} nodes, cut {sum(r.gains):,} edges fewer in {r.seconds:.2f} s"
                )
        return labels

    def _plan_completed(self, plan: ClusterPlan) -> None:
        """Keep the whole plan once its lower levels are in, and say what they took."""
        self.last_plan = plan
        if self.progress is not None:
            took = plan.seconds
            self.progress(
                f"{self.name}: the plan's METIS below its top split took "
                f"{took['lower levels']:.2f} s in the background; waited "
                f"{took['waited']:.2f} s for it after the top bisection"
            )

    def _report(self, parts: int) -> Callable[[BisectionRecord, int], None] | None:
        """The :attr:`progress` line of each finished bisection."""
        say = self.progress
        if say is None:
            return None
        label = self.name if self.refine else "greedy"

        def report(record: BisectionRecord, done: int) -> None:
            where = "" if record.pid == os.getpid() else f", worker {record.pid}"
            phases = record.phase_seconds
            say(
                f"{label}: bisection {done}/{parts - 1} of parts {record.first_part}.."
                f"{record.first_part + record.parts - 1}: {record.nodes:,} nodes, "
                f"{record.edges:,} edges, sides {record.sizes[0]:,}/{record.sizes[1]:,} "
                f"in {record.seconds:.2f} s (seed {phases['seed']:.2f}, pass "
                f"{phases['grem']:.2f}, restreams "
                + ("+".join(f"{s:.2f}" for s in phases["passes"]) or "none")
                + f", split {phases['split']:.2f}){where}"
            )

        return report

    def __repr__(self) -> str:
        extra = "" if self.clusters is None else f", clusters={self.clusters}"
        extra += "" if self.workers == 0 else f", workers={self.workers}"
        extra += "" if self.final_passes == FINAL_PASSES else f", final_passes={self.final_passes}"
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
        workers: int = 0,
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
        extra = "" if self.workers == 0 else f", workers={self.workers}"
        return f"GreedyPartitioner(chunk={self.chunk}, seed_method={self.seed_method!r}{extra})"


def greedy_partitioner(chunk: float = 0.1) -> GreedyPartitioner:
    """Streaming greedy (``refine=False``, ``passes=0``) with ``chunk`` fraction chunks."""
    return GreedyPartitioner(chunk=chunk)
