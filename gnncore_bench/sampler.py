"""DENSE versus per-layer sampling on one graph (a thesis Table 3.5-style comparison).

Every sampler sees the same random seed batches, interleaved batch by batch
(the order of the samplers rotates from batch to batch), so a change in the
machine's load hits all of them alike. Samplers:

* ``dense`` -- :class:`~gnncore.sampler.DenseSampler` (``build_sampler("dense")``):
  each node's neighbours once per batch, in the PyG :class:`SamplerOutput`
  that training consumes.
* ``per-layer`` -- :class:`~gnncore.sampler.PerLayerSampler`
  (``build_sampler("per-layer")``): the DGL / classic PyG scheme, every hop
  samples every node known before it again, same PyG output.
* ``dense, Alg. 1 layout`` -- ``_C.sample_dense``: DENSE's draws in the
  layout of thesis Alg. 1 (``node_ids``, ``nbrs``, ``repr`` ...), no
  SamplerOutput; shows what the PyG layout costs.

Per sampler: nodes and edges per batch (mean), ms per batch (median, and the
interquartile range), the median over batches of its time divided by
per-layer's time on the same batch (paired, so robust to slow load drift),
sampled edges per second (edges per batch over the median time: the
sampler's throughput on all its threads), the same per core (total edges
over total time, divided by the threads the kernels use) and the process CPU
time per batch (median; on a loaded machine it moves less than the wall
time, which also counts the time the threads wait for a core).

By default the samplers read one copy of the CSR in 2 MiB transparent huge
pages (``_C.huge_page_copy``, as ``NeighborSampler(huge_pages=True)``
does): a graph directory's arrays are file mappings, which get 4 KiB pages
only, and the draws' random reads of ``indices`` then miss the TLB. On the
2M-node graph of docs/BENCHMARKS.md that copy took 13-25% off the DENSE
kernel's CPU time per batch. ``huge_pages=False`` measures the file mapping.
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

SAMPLERS = ("dense", "per-layer", "dense, Alg. 1 layout")


def _samplers(
    indptr: np.ndarray,
    indices: np.ndarray,
    fanouts: list[int],
    seed: int,
    threads: int,
) -> dict[str, Callable[[np.ndarray], tuple[int, int]]]:
    """One ``seeds -> (nodes, edges)`` callable per entry of :data:`SAMPLERS`."""
    import torch
    from torch_geometric.sampler import NodeSamplerInput

    from gnncore.sampler import DenseSampler, build_sampler

    def node_input(seeds: np.ndarray) -> NodeSamplerInput:
        return NodeSamplerInput(input_id=None, node=torch.from_numpy(seeds))

    def through(mode: str) -> Callable[[np.ndarray], tuple[int, int]]:
        sampler = build_sampler(mode, (indptr, indices), fanouts, seed=seed, num_threads=threads)

        def sample(seeds: np.ndarray) -> tuple[int, int]:
            out = sampler.sample_from_nodes(node_input(seeds))
            return len(out.node), len(out.row)

        return sample

    # same seed and batch counter as "dense": the same draws, another layout
    layout_sampler = DenseSampler((indptr, indices), fanouts, seed=seed, num_threads=threads)

    def dense_layout(seeds: np.ndarray) -> tuple[int, int]:
        layout = layout_sampler.sample_dense(node_input(seeds))
        return len(layout["node_ids"]), len(layout["nbrs"])

    return {
        "dense": through("dense"),
        "per-layer": through("per-layer"),
        "dense, Alg. 1 layout": dense_layout,
    }


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows of :func:`bench_sampling` as a Markdown table."""
    lines = [
        "| fanouts | sampler | nodes / batch | edges / batch | ms / batch (median) "
        "| ms IQR | time / per-layer | sampled edges/s | sampled edges/s per core "
        "| CPU ms / batch |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {','.join(map(str, r['fanouts']))} | {r['sampler']} "
            f"| {r['nodes_per_batch']:,.0f} | {r['edges_per_batch']:,.0f} "
            f"| {r['ms_per_batch']:.1f} | {r['ms_q1']:.1f}–{r['ms_q3']:.1f} "
            f"| {r['time_vs_per_layer']:.2f} | {r['edges_per_s']:,.0f} "
            f"| {r['edges_per_s_per_core']:,.0f} | {r['cpu_ms_per_batch']:.1f} |"
        )
    return "\n".join(lines)


def bench_sampling(
    graph_dir: str | os.PathLike[str],
    fanouts_list: Sequence[Sequence[int]],
    batch_size: int,
    batches: int,
    out_dir: str | os.PathLike[str],
    seed: int = 0,
    num_threads: int = 0,
    huge_pages: bool = True,
) -> dict[str, Any]:
    """Time every sampler of :data:`SAMPLERS` on ``batches`` random seed batches per fanout list.

    The samplers run interleaved on the same batches; one warm-up batch per
    sampler is not timed. ``num_threads`` <= 0 uses every CPU this process may
    run on. With ``huge_pages`` (the default) the samplers share one copy of
    the CSR in transparent huge pages (``_C.huge_page_copy``); without it they
    read the graph directory's arrays (file mappings). The 1-minute
    load average before and after each fanout list is recorded. Writes
    ``sampling.json`` and ``sampling.md`` under ``out_dir``; returns the JSON
    object plus ``markdown``.

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
        raise ValueError(
            f"need batches >= 1 and 0 < batch_size <= {num_nodes}; got "
            f"batches={batches}, batch_size={batch_size}"
        )
    if huge_pages:  # one copy for every sampler (each would copy its own)
        from gnncore import _C

        indptr, indices = _C.huge_page_copy(indptr), _C.huge_page_copy(indices)
    threads = num_threads if num_threads > 0 else len(os.sched_getaffinity(0))
    rng = np.random.default_rng(seed)
    seed_batches = [
        np.sort(rng.choice(num_nodes, batch_size, replace=False)) for _ in range(batches + 1)
    ]

    rows: list[dict[str, Any]] = []
    load: list[dict[str, Any]] = []
    for fanouts in fanouts_list:
        fanouts = [int(f) for f in fanouts]
        samplers = _samplers(indptr, indices, fanouts, seed, threads)
        names = list(samplers)
        for sample in samplers.values():
            sample(seed_batches[0])  # warm-up: page in the graph
        stats: dict[str, dict[str, list[float]]] = {
            name: {"nodes": [], "edges": [], "seconds": [], "cpu": []} for name in names
        }
        load_before = os.getloadavg()[0]
        for b, seeds in enumerate(seed_batches[1:]):
            for name in names[b % len(names) :] + names[: b % len(names)]:
                start, cpu = time.perf_counter(), time.process_time()
                n, e = samplers[name](seeds)
                stats[name]["seconds"].append(time.perf_counter() - start)
                stats[name]["cpu"].append(time.process_time() - cpu)
                stats[name]["nodes"].append(n)
                stats[name]["edges"].append(e)
        load.append({"fanouts": fanouts, "before": load_before, "after": os.getloadavg()[0]})
        reference = stats["per-layer"]["seconds"]
        for name in names:
            seconds = stats[name]["seconds"]
            paired = [a / b for a, b in zip(seconds, reference)]
            q1, _, q3 = statistics.quantiles(seconds, n=4) if len(seconds) > 1 else [seconds[0]] * 3
            rows.append(
                {
                    "fanouts": fanouts,
                    "sampler": name,
                    "nodes_per_batch": float(np.mean(stats[name]["nodes"])),
                    "edges_per_batch": float(np.mean(stats[name]["edges"])),
                    "ms_per_batch": 1000.0 * statistics.median(seconds),
                    "ms_q1": 1000.0 * q1,
                    "ms_q3": 1000.0 * q3,
                    "edges_per_s": float(np.mean(stats[name]["edges"]))
                    / statistics.median(seconds),
                    "edges_per_s_per_core": sum(stats[name]["edges"]) / sum(seconds) / threads,
                    "cpu_ms_per_batch": 1000.0 * statistics.median(stats[name]["cpu"]),
                    "time_vs_per_layer": statistics.median(paired),
                }
            )
    result = {
        "graph_dir": str(graph_dir),
        "num_nodes": num_nodes,
        "num_adjacency_entries": len(indices),
        "batch_size": batch_size,
        "batches": batches,
        "seed": seed,
        "threads": threads,
        "huge_pages": huge_pages,
        "load_average_1min": load,
        "rows": rows,
    }
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sampling.json").write_text(json.dumps(result, indent=2) + "\n")
    table = markdown_table(rows)
    loads = ", ".join(
        f"{','.join(map(str, x['fanouts']))}: {x['before']:.1f} -> {x['after']:.1f}" for x in load
    )
    (out / "sampling.md").write_text(
        f"Sampling on {graph_dir}: {num_nodes:,} nodes, {len(indices):,} adjacency entries, "
        f"{batches} batches of {batch_size} seeds, {threads} threads, samplers interleaved"
        f"{', CSR in huge pages' if huge_pages else ''}; "
        f"1-min load average {loads}.\n\n{table}\n"
    )
    result["markdown"] = table
    return result
