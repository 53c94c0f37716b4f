"""DENSE vs per-layer sampling on one graph (a thesis Table 3.5-style comparison).

Every sampler sees the same random seed batches. Three samplers:

* ``dense`` -- ``_C.sample_dense_pyg``: each node's neighbours once per batch,
  in PyG's layout (what :class:`~gnncore.sampler.DenseSampler` returns).
* ``dense (layout)`` -- ``_C.sample_dense``: the same draws in the DENSE
  layout of thesis Alg. 1 (``node_ids``, ``nbrs``, ``repr`` ...).
* ``per-layer`` -- ``_C.sample_neighbors`` (PyG semantics): hop ``h`` expands
  the nodes first reached at hop ``h - 1``.
* ``per-layer, re-sampled`` -- DGL-style blocks: layer by layer,
  ``_C.sample_neighbors`` with one hop over *every* node of the previous
  block (seeds and earlier nodes are sampled again at each layer).

Per sampler: nodes and edges per batch (mean), ms per batch (median) and
sampled edges per second per thread (edges/s divided by the threads used).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gnncore.store import GraphDir

SAMPLERS = ("dense", "dense (layout)", "per-layer", "per-layer, re-sampled")


def _samplers(indptr: np.ndarray, indices: np.ndarray, fanouts: list[int],
              threads: int) -> dict[str, Callable[[np.ndarray, int], tuple[int, int]]]:
    from gnncore import _C

    def dense(seeds: np.ndarray, seed: int) -> tuple[int, int]:
        node, row, *_ = _C.sample_dense_pyg(indptr, indices, seeds, fanouts, seed,
                                            num_threads=threads)
        return len(node), len(row)

    def dense_layout(seeds: np.ndarray, seed: int) -> tuple[int, int]:
        node_ids, _, nbrs, *_ = _C.sample_dense(indptr, indices, seeds, fanouts, seed,
                                                num_threads=threads)
        return len(node_ids), len(nbrs)

    def per_layer(seeds: np.ndarray, seed: int) -> tuple[int, int]:
        node, row, *_ = _C.sample_neighbors(indptr, indices, seeds, fanouts, seed,
                                            num_threads=threads)
        return len(node), len(row)

    def resampled(seeds: np.ndarray, seed: int) -> tuple[int, int]:
        nodes, edges = seeds, 0
        for layer, fanout in enumerate(fanouts):
            nodes, row, *_ = _C.sample_neighbors(indptr, indices, nodes, [fanout],
                                                 seed + layer, num_threads=threads)
            edges += len(row)
        return len(nodes), edges

    return {"dense": dense, "dense (layout)": dense_layout, "per-layer": per_layer,
            "per-layer, re-sampled": resampled}


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows of :func:`bench_sampling` as a Markdown table."""
    lines = ["| fanouts | sampler | nodes / batch | edges / batch | ms / batch (median) "
             "| sampled edges/s per thread |",
             "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {','.join(map(str, r['fanouts']))} | {r['sampler']} "
                     f"| {r['nodes_per_batch']:,.0f} | {r['edges_per_batch']:,.0f} "
                     f"| {r['ms_per_batch']:.1f} | {r['edges_per_s_per_thread']:,.0f} |")
    return "\n".join(lines)


def bench_sampling(graph_dir: str | os.PathLike[str], fanouts_list: Sequence[Sequence[int]],
                   batch_size: int, batches: int, out_dir: str | os.PathLike[str],
                   seed: int = 0, num_threads: int = 0) -> dict[str, Any]:
    """Time every sampler on ``batches`` random seed batches per fanout list.

    One warm-up batch per sampler is not timed. ``num_threads`` <= 0 uses
    every CPU this process may run on. Writes ``sampling.json`` and
    ``sampling.md`` under ``out_dir``; returns the JSON object plus
    ``markdown``.

    Raises:
        ValueError: For a batch larger than the graph, or no batches.
    """
    graph = GraphDir.open(graph_dir)
    indptr = np.ascontiguousarray(graph.indptr, dtype=np.int64)
    indices = np.ascontiguousarray(graph.indices)
    if indices.dtype not in (np.int32, np.int64):
        indices = indices.astype(np.int64)
    num_nodes = len(indptr) - 1
    if batches < 1 or not 0 < batch_size <= num_nodes:
        raise ValueError(f"need batches >= 1 and 0 < batch_size <= {num_nodes}; got "
                         f"batches={batches}, batch_size={batch_size}")
    threads = num_threads if num_threads > 0 else len(os.sched_getaffinity(0))
    rng = np.random.default_rng(seed)
    seed_batches = [np.sort(rng.choice(num_nodes, batch_size, replace=False))
                    for _ in range(batches + 1)]
    batch_seeds = rng.integers(0, 2**62, batches + 1).tolist()

    rows = []
    for fanouts in fanouts_list:
        fanouts = [int(f) for f in fanouts]
        for name, sample in _samplers(indptr, indices, fanouts, threads).items():
            sample(seed_batches[0], batch_seeds[0])  # warm-up: page in the graph
            nodes, edges, seconds = [], [], []
            for seeds, s in zip(seed_batches[1:], batch_seeds[1:]):
                start = time.perf_counter()
                n, e = sample(seeds, s)
                seconds.append(time.perf_counter() - start)
                nodes.append(n)
                edges.append(e)
            total_s = sum(seconds)
            rows.append({
                "fanouts": fanouts,
                "sampler": name,
                "nodes_per_batch": float(np.mean(nodes)),
                "edges_per_batch": float(np.mean(edges)),
                "ms_per_batch": 1000.0 * statistics.median(seconds),
                "edges_per_s_per_thread": sum(edges) / total_s / threads,
            })
    result = {
        "graph_dir": str(graph_dir),
        "num_nodes": num_nodes,
        "num_adjacency_entries": len(indices),
        "batch_size": batch_size,
        "batches": batches,
        "seed": seed,
        "threads": threads,
        "rows": rows,
    }
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sampling.json").write_text(json.dumps(result, indent=2) + "\n")
    table = markdown_table(rows)
    (out / "sampling.md").write_text(
        f"Sampling on {graph_dir}: {num_nodes:,} nodes, {len(indices):,} adjacency entries, "
        f"{batches} batches of {batch_size} seeds, {threads} threads.\n\n{table}\n")
    result["markdown"] = table
    return result
