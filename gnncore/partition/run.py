"""Run a partitioner end to end: graph directory in, partition directory out."""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gnncore.partition.base import PartitionOptions, Partitioner
from gnncore.partition.metis import MetisPartitioner
from gnncore.partition.metrics import PartitionMetrics, partition_metrics
from gnncore.partition.store import PartitionDir, write_partition_dir
from gnncore.store import GraphDir


def make_partitioner(method: str) -> Partitioner:
    """The partitioner registered under ``method``."""
    factories = {
        "metis": lambda: MetisPartitioner(recursive=False),
        "metis-recursive": lambda: MetisPartitioner(recursive=True),
    }
    if method not in factories:
        raise ValueError(f"unknown partitioning method {method!r}; choose from "
                         f"{', '.join(sorted(factories))}")
    return factories[method]()


METHODS = ("metis", "metis-recursive")


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


@dataclass(frozen=True)
class PartitionReport:
    """What ``gnncore partition`` reports (the CLI contract's JSON keys)."""

    method: str
    parts: int
    seed: int
    out_dir: str
    seconds: float
    peak_rss_bytes: int
    metrics: PartitionMetrics

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "parts": self.parts,
            "seed": self.seed,
            "out_dir": self.out_dir,
            "edge_cut_fraction": self.metrics.edge_cut_fraction,
            "max_part_ratio": self.metrics.max_part_ratio,
            "split_balance": self.metrics.split_balance,
            "seconds": self.seconds,
            "peak_rss_bytes": self.peak_rss_bytes,
        }


def partition_graph(graph_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str],
                    method: str = "metis", parts: int = 2, seed: int = 0,
                    imbalance: float = 0.03) -> PartitionReport:
    """Partition the graph at ``graph_dir`` into ``out_dir`` (written atomically).

    Args:
        graph_dir: A graph directory (see docs/FORMAT.md).
        out_dir: The partition directory to create or replace.
        method (str): A name from :data:`METHODS` (default: ``"metis"``).
        parts (int): Number of partitions (default: 2).
        seed (int): Random seed (default: 0).
        imbalance (float): Allowed excess of the largest part (default: 0.03).
    """
    graph = GraphDir.open(graph_dir)
    partitioner = make_partitioner(method)
    options = PartitionOptions(parts=parts, seed=seed, imbalance=imbalance)
    options.validate(graph.num_nodes)
    start = time.perf_counter()
    assignment = np.asarray(partitioner.assign(graph, options), dtype=np.int64)
    seconds = time.perf_counter() - start
    rss = peak_rss_bytes()
    metrics = partition_metrics(graph, assignment, parts)
    info = {"method": method, "parts": parts, "seed": seed, "imbalance": imbalance,
            "seconds": seconds, "peak_rss_bytes": rss, "metrics": metrics.to_dict()}
    write_partition_dir(out_dir, graph, assignment, info)
    return PartitionReport(method, parts, seed, str(Path(out_dir)), seconds, rss, metrics)


__all__ = ["METHODS", "PartitionDir", "PartitionReport", "make_partitioner", "partition_graph"]
