"""HyDRA's tables from the project's sampler (``gnncore bench plans replication``):
neighbour ids crossing partitions under DSP-style sampling, whole-list memory
sharing, HDR and HDR with threshold pruning, for a range of replication rates
over a METIS partition (with the memory each rate costs), and Table II's whole
list / DSP for range, random and METIS partitions. Returns a JSON-ready dict
with a ``markdown`` entry and, given ``out_dir``, writes
``plans_replication.json`` / ``.md`` there.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from gnncore.partition.metrics import partition_metrics
from gnncore.partition.simple import random_assignment, range_assignment
from gnncore.plan.placement import train_node_ids
from gnncore.plan.replication import ReplicationSettings, compute_replication
from gnncore.plan.simulate import SCHEMES, simulate_neighbor_traffic
from gnncore.sampler import build_sampler
from gnncore.store import GraphDir
from gnncore_bench.plan import (
    adjacency,
    graph_info,
    machine_info,
    ratio,
    seconds_text,
    timed_metis,
    write_result,
)

#: Partitions of HyDRA's Table II, in table order.
TABLE2_PARTITIONS = ("range", "random", "metis")


def replication_markdown(result: dict[str, Any]) -> str:
    """The two tables of :func:`bench_replication`."""
    g, s = result["graph"], result["settings"]
    lines = [
        f"HDR over a METIS partition: {g['name']} ({g['num_nodes']:,} nodes, "
        f"{g['num_edges']:,} stored edges), p = {s['parts']}; training nodes: "
        f"{result['train_nodes']} ({result['num_train']:,}); {s['sampler']} sampler over the "
        f"{s['direction']!r} adjacency, fanouts {','.join(map(str, s['fanouts']))}, batch "
        f"{s['batch_size']}, {s['epochs']} epoch(s), seed {s['seed']}; pruning θ per hop "
        f"{result['thetas']}.",
        "",
        "Cross-partition neighbour ids by replication rate (totals; / DSP in brackets):",
        "",
        "| p_r | replicated nodes | memory increase | DSP | whole list | HDR | HDR + pruning |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rates"]:
        t, n = r["totals"], r["normalised"]
        cells = " | ".join(f"{t[k]:,} ({n[k]:.3f})" for k in SCHEMES)
        lines.append(
            f"| {100 * r['rate']:g}% | {r['replicated_nodes']:,} "
            f"| {100 * r['memory_increase']:.2f}% | {cells} |"
        )
    lines += [
        "",
        "HyDRA Table II's shape, p_r = 0 (whole-list memory sharing / DSP):",
        "",
        "| partition | edge cut % | DSP ids | whole-list ids | whole list / DSP |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in result["table2"]:
        lines.append(
            f"| {r['partition']} | {100 * r['edge_cut_fraction']:.2f} | {r['dsp']:,} "
            f"| {r['whole_list']:,} | {r['whole_list_over_dsp']:.3f} |"
        )
    lines += ["", f"METIS took {seconds_text(result['times']['metis_seconds'])} s.", ""]
    return "\n".join(lines)


def bench_replication(
    graph_dir: str | os.PathLike[str],
    parts: int = 4,
    rates: Sequence[float] = (0.0, 0.001, 0.01, 0.05),
    fanouts: Sequence[int] = (25, 10),
    batch_size: int = 1024,
    epochs: int = 1,
    seed: int = 0,
    sampler: str = "dense",
    train_nodes: str = "auto",
    direction: str = "in",
    out_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Neighbour ids crossing partitions under DSP / whole list / HDR / HDR + pruning.

    A METIS partition (``make_partitioner("metis")``) into ``parts``; for each
    rate the HDR plan keeping METIS's labels
    (:func:`~gnncore.plan.replication.compute_replication`) and
    :func:`simulate_neighbor_traffic` with its replicated set and θ per hop
    from :meth:`~gnncore.plan.replication.Replication.prune_threshold`. Then
    HyDRA's Table II: whole-list / DSP at rate 0 for range, random and METIS
    partitions. Every run replays the same sampler and ``seed``; the batches
    depend on the partition only, so they are the same for every rate.

    Args:
        train_nodes: ``"auto"`` (the train split, else every node),
            ``"split"`` or ``"all"``.
        direction: The adjacency the sampler reads: ``"in"`` (the graph
            directory's rows, what the plans store and training samples) or
            ``"both"`` (in- and out-neighbours, each once; θ and the memory
            increase then use this adjacency's lists).

    Raises:
        ValueError: For bad counts, rates or names.
    """
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    rates = [float(r) for r in rates]
    if not rates or any(not 0.0 <= r <= 1.0 for r in rates):
        raise ValueError(f"rates must be a non-empty list in [0, 1], got {rates}")
    if direction not in ("in", "both"):
        raise ValueError(f"direction must be 'in' or 'both', got {direction!r}")
    fanouts = tuple(int(f) for f in fanouts)
    graph = GraphDir.open(graph_dir)
    num_nodes = graph.num_nodes
    if parts > max(num_nodes, 1):
        raise ValueError(f"cannot split {num_nodes} nodes into {parts} parts")
    indptr, indices = adjacency(graph)
    train, train_text = train_node_ids(graph, train_nodes)
    node_sampler = build_sampler(
        sampler, (indptr, indices), list(fanouts), seed=seed, direction=direction
    )
    sim: dict[str, Any] = {"batch_size": batch_size, "epochs": epochs, "seed": seed, "parts": parts}

    metis_labels, metis_seconds = timed_metis(graph, parts, seed)
    rows, thetas = _rate_rows(
        graph, metis_labels, parts, rates, fanouts, direction, node_sampler, train, sim
    )
    labels = {
        "range": range_assignment(num_nodes, parts),
        "random": random_assignment(num_nodes, parts, seed),
        "metis": metis_labels,
    }
    at_zero = next((r["totals"] for r in rows if r["rate"] == 0.0), None)
    result: dict[str, Any] = {
        "benchmark": "plans_replication",
        "graph": graph_info(graph),
        "train_nodes": train_text,
        "num_train": int(len(train)),
        "settings": {
            "parts": parts,
            "rates": rates,
            "fanouts": list(fanouts),
            "batch_size": batch_size,
            "epochs": epochs,
            "seed": seed,
            "sampler": sampler,
            "direction": direction,
            "partition": "metis",
        },
        "thetas": thetas,
        "rates": rows,
        "table2": _table2(graph, labels, parts, at_zero, node_sampler, train, sim),
        "times": {"metis_seconds": metis_seconds},
        "machine": machine_info(),
    }
    result["markdown"] = replication_markdown(result)
    write_result(out_dir, "plans_replication", result)
    return result


def _rate_rows(
    graph: GraphDir,
    metis_labels: np.ndarray,
    parts: int,
    rates: list[float],
    fanouts: tuple[int, ...],
    direction: str,
    node_sampler: Any,
    train: np.ndarray,
    sim: dict[str, Any],
) -> tuple[list[dict[str, Any]], list[int | None]]:
    """One row per rate (the HDR plan over METIS's labels and its simulated
    traffic), and the pruning θ per hop of the last rate."""
    rows = []
    thetas: list[int | None] = []
    for rate in rates:
        plan = compute_replication(graph, metis_labels, parts, ReplicationSettings(rate=rate))
        theta = [plan.prune_threshold(f) for f in fanouts] if direction == "in" else None
        traffic = simulate_neighbor_traffic(
            node_sampler,
            train,
            plan.owner,
            replicated=plan.replicated,
            theta=theta,
            **sim,
        )
        thetas = list(traffic.thetas)
        rows.append(
            {
                "rate": rate,
                "replicated_nodes": int(len(plan.replicated)),
                "memory_increase": traffic.memory_increase,
                "plan_memory_increase": plan.memory_increase,
                "totals": traffic.totals,
                "normalised": traffic.normalised(),
                "per_hop": {name: getattr(traffic, name).sum(axis=0).tolist() for name in SCHEMES},
            }
        )
    return rows, thetas


def _table2(
    graph: GraphDir,
    labels: dict[str, np.ndarray],
    parts: int,
    metis_at_zero: dict[str, Any] | None,
    node_sampler: Any,
    train: np.ndarray,
    sim: dict[str, Any],
) -> list[dict[str, Any]]:
    """HyDRA's Table II: whole list / DSP at rate 0 for each partition (METIS's
    totals at rate 0 reused when that rate ran)."""
    table2 = []
    for name in TABLE2_PARTITIONS:
        if name == "metis" and metis_at_zero is not None:
            totals = metis_at_zero
        else:
            totals = simulate_neighbor_traffic(node_sampler, train, labels[name], **sim).totals
        table2.append(
            {
                "partition": name,
                "edge_cut_fraction": partition_metrics(
                    graph, labels[name], parts
                ).edge_cut_fraction,
                "dsp": totals["dsp"],
                "whole_list": totals["whole_list"],
                "whole_list_over_dsp": ratio(totals["whole_list"], totals["dsp"]),
                "remote_nodes": totals["remote_nodes"],
                "frontier_nodes": totals["frontier_nodes"],
            }
        )
    return table2


__all__ = ["TABLE2_PARTITIONS", "bench_replication", "replication_markdown"]
