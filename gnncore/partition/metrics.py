"""Quality metrics shared by every partitioning (ALGORITHMS.md §2)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from gnncore import _C
from gnncore.partition.edge_stream import EdgeFile
from gnncore.store import GraphDir
from gnncore.store.graph_dir import SPLITS
from gnncore.typing import require_csrc

#: Edge rows read at a time by the streaming passes over ``edges_shuffled.npy``
#: (16 MiB of int64 rows, 8 MiB of int32 ones).
EDGE_CHUNK_ROWS = 1 << 20


@dataclass(frozen=True)
class PartitionMetrics:
    """Cut and balance of an assignment.

    ``edge_cut_fraction`` is over undirected deduplicated edges;
    ``max_part_ratio`` is the largest part over ``N/p``; ``split_balance``
    maps ``train``/``val``/``test`` to max/mean of the per-part counts.
    """

    parts: int
    num_nodes: int
    num_edges: int
    edge_cut: int
    edge_cut_fraction: float
    part_sizes: list[int]
    max_part_ratio: float
    split_counts: dict[str, list[int]]
    split_balance: dict[str, float]

    def to_dict(self) -> dict:
        return asdict(self)

    def markdown_table(self) -> str:
        """Per-part nodes and split counts as a markdown table."""
        splits = list(self.split_counts)
        lines = [
            "| part | nodes | " + " | ".join(splits) + " |",
            "|---|---|" + "---|" * len(splits),
        ]
        for p in range(self.parts):
            counts = "".join(f" {self.split_counts[s][p]} |" for s in splits)
            lines.append(f"| {p} | {self.part_sizes[p]} |{counts}")
        return "\n".join(lines) + "\n"


def edge_cut(u: np.ndarray, v: np.ndarray, assignment: np.ndarray) -> int:
    """Number of edges whose endpoints lie in different parts."""
    return int(np.count_nonzero(assignment[u] != assignment[v]))


def balance_ratio(counts: np.ndarray) -> float:
    """max / mean of per-part counts (1.0 is perfect; 0 counts give 1.0)."""
    mean = counts.mean() if len(counts) else 0.0
    return float(counts.max() / mean) if mean > 0 else 1.0


def graph_edge_file(graph: GraphDir) -> EdgeFile:
    """The graph's distinct undirected pairs (``edges_shuffled.npy``) as an
    :class:`~gnncore.partition.edge_stream.EdgeFile`, read a chunk at a time."""
    return EdgeFile.from_npy(graph.path / "edges_shuffled.npy")


def streamed_edge_cut(
    graph: GraphDir, assignment: np.ndarray, parts: int, chunk_rows: int = EDGE_CHUNK_ROWS
) -> int:
    """Undirected edges cut by ``assignment`` (``int64[N]`` in ``[0, parts)``),
    counted in one read of ``edges_shuffled.npy``, ``chunk_rows`` rows at a time
    (C++, GIL released): memory is one chunk, whatever the edge count."""
    require_csrc()
    a = np.ascontiguousarray(assignment, dtype=np.int64)
    if len(a) != graph.num_nodes:
        raise ValueError(f"assignment has {len(a)} entries for {graph.num_nodes} nodes")
    return int(_C.edge_pass(graph_edge_file(graph).spec(), a, parts, chunk_rows=chunk_rows).cut)


def partition_metrics(
    graph: GraphDir,
    assignment: np.ndarray,
    parts: int,
    cut: int | None = None,
    chunk_rows: int = EDGE_CHUNK_ROWS,
) -> PartitionMetrics:
    """Compute :class:`PartitionMetrics` for ``assignment`` over ``graph``.

    The cut is counted by :func:`streamed_edge_cut` unless given (``cut``:
    already counted by a pass over the same edges); the rest needs O(|V|).
    """
    n = graph.num_nodes
    a = np.ascontiguousarray(assignment, dtype=np.int64)
    if cut is None:
        cut = streamed_edge_cut(graph, a, parts, chunk_rows)
    num_edges = graph.manifest.num_undirected_edges  # the rows of edges_shuffled.npy
    sizes = np.bincount(a, minlength=parts)
    split_counts, split_balance = {}, {}
    for split in SPLITS:
        if graph.has(split):
            name = split.removesuffix("_idx")
            counts = np.bincount(a[graph.array(split)], minlength=parts)
            split_counts[name] = counts.tolist()
            split_balance[name] = balance_ratio(counts)
    return PartitionMetrics(
        parts=parts,
        num_nodes=n,
        num_edges=int(num_edges),
        edge_cut=int(cut),
        edge_cut_fraction=cut / num_edges if num_edges else 0.0,
        part_sizes=sizes.tolist(),
        max_part_ratio=float(sizes.max() / (n / parts)) if n else 1.0,
        split_counts=split_counts,
        split_balance=split_balance,
    )


def max_part_size(num_nodes: int, parts: int, imbalance: float) -> int:
    """The largest part allowed: ``ceil((1 + imbalance) · N / p)``."""
    return int(np.ceil((1 + imbalance) * num_nodes / parts - 1e-9))


def balance_violations(metrics: PartitionMetrics, imbalance: float) -> list[str]:
    """Why a partitioning is out of balance (empty list when it is balanced)."""
    problems = []
    limit = max_part_size(metrics.num_nodes, metrics.parts, imbalance)
    for part, size in enumerate(metrics.part_sizes):
        if size > limit:
            problems.append(
                f"part {part} holds {size} nodes, more than the limit {limit} "
                f"(ceil({1 + imbalance:g}·N/p))"
            )
        if size == 0:
            problems.append(f"part {part} is empty")
    return problems
