"""GREM — Greedy plus Refinement for Edge-cut Minimization (ALGORITHMS.md §1).

The edge stream (``edges_shuffled.npy``) is read from disk in chunks of
``ceil(chunk · |E|)`` edges of the whole graph, never as a whole. Python drives
the recursive bisection; per bisection it reads the first chunk (C++), seeds its
nodes (:mod:`~gnncore.partition.grem.seed`: ``metis`` via pymetis on the chunk's
subgraph, ``random``, ``ldg``, or ``clusters`` from a global plan made once, see
:mod:`~gnncore.partition.grem.plan`), then one
C++ call streams the remaining chunks (GREM pass), runs the
restreaming refinement passes and splits the edge file into one temporary file
per side for the next level. Temporary files live in a private directory that
is removed afterwards, also on error. Each side's file holds the side's own
ids (a node's rank among the side's nodes), so a bisection's arrays are sized
by its sub-problem. Memory: O(|V|) arrays plus one chunk (per worker process
with ``workers > 1``: sibling bisections run at once).

Memory accounting for an int32 graph (N nodes; a chunk of m edges over c
nodes; measured per phase by ``benchmarks/grem_memory.py``, see
docs/BENCHMARKS.md, "GREM's memory per chunk edge"):

* all along (Python): part labels (int8 while p <= 128), the sub-problem's
  node list (int32), the plan's cluster of every node (int32): 9 B/node;
* seed of a bisection (:mod:`~gnncore.partition.grem.seed`): the chunk's rows
  (8 B/edge, freed once renumbered: :class:`~gnncore.partition.grem.chunk.ChunkRows`),
  the local pairs (8 B/edge), the majority rounds' open pairs (<= 8 B/edge),
  ~22 B per chunk node, a 4 B/node renumbering scratch;
* GREM pass (C++): each sub-problem node's state in one packed entry (running
  estimates, chunk-local id, side: 21 B/node); the chunk's rows and adjacency (16 B/edge)
  and the next chunk's rows, read on a thread meanwhile (8 B/edge), its nodes,
  offsets and sides (9 B per chunk node), the seeds (5 B per first-chunk node);
* refinement passes and the split: side and side-with-gain (5 B/node), then side and
  new id in one word (4 B/node), blocks of at most 2^20 rows whatever the chunk size
  (the refinement's next block read ahead: two of them);
* the clusters plan: METIS on a cluster graph of at most ``max(1% of |E|,
  2^18)`` edges (~190 B per cluster-graph edge, its CSR built in C++ with
  nothing beside it), independent of the chunk.

    from gnncore.partition.grem import GremPartitioner
    labels = GremPartitioner(chunk=0.1, passes=3).assign(graph, PartitionOptions(parts=8))

After the recursion, :mod:`.refine` runs the final k-way refinement over the
whole partition (``final_passes``; size-constrained label propagation
streamed over the CSR, then one coarse level of clusters on graphs of at most
2^22 edges; none on directed graphs).

The package, one module per step (lower ones first): :mod:`.chunk` (a chunk's
rows, renumbering, components), :mod:`.plan` (the clusters plan), :mod:`.seed`
(the seed of a bisection), :mod:`.bisect` (one bisection, C++),
:mod:`.recursion` (the recursive bisection over the edge file), :mod:`.refine`
(the final k-way refinement) and :mod:`.partitioner` (:class:`GremPartitioner`
on a graph directory).
"""

from gnncore.partition.base import part_label_dtype
from gnncore.partition.edge_stream import EdgeFile, chunk_rows
from gnncore.partition.grem.bisect import (
    BisectionRecord,
    grem_bisect,
    halves,
    node_id_dtype,
    side_capacity,
)
from gnncore.partition.grem.chunk import chunk_components, tree_roots
from gnncore.partition.grem.partitioner import (
    GreedyPartitioner,
    GremPartitioner,
    greedy_partitioner,
)
from gnncore.partition.grem.plan import (
    ClusterPlan,
    cluster_chunk,
    cluster_graph_edges,
    cluster_plan,
    default_clusters,
    plan_applies,
    plan_sides,
    trim_cluster_graph,
)
from gnncore.partition.grem.recursion import grem_partition_file, helper_peak_rss, widest_level
from gnncore.partition.grem.refine import RefineRecord, refine_kway
from gnncore.partition.grem.seed import SEED_METHODS, default_seed_method, seed_sides

__all__ = [
    "BisectionRecord",
    "ClusterPlan",
    "EdgeFile",
    "GreedyPartitioner",
    "GremPartitioner",
    "RefineRecord",
    "SEED_METHODS",
    "chunk_components",
    "chunk_rows",
    "cluster_chunk",
    "cluster_graph_edges",
    "cluster_plan",
    "default_clusters",
    "default_seed_method",
    "greedy_partitioner",
    "grem_bisect",
    "grem_partition_file",
    "halves",
    "helper_peak_rss",
    "node_id_dtype",
    "part_label_dtype",
    "plan_applies",
    "plan_sides",
    "refine_kway",
    "seed_sides",
    "side_capacity",
    "tree_roots",
    "trim_cluster_graph",
    "widest_level",
]
