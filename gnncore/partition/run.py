"""Run a partitioner end to end: graph directory in, partition directory out."""

from __future__ import annotations

import importlib
import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gnncore.partition.base import PartitionOptions, Partitioner
from gnncore.partition.metrics import PartitionMetrics, partition_metrics
from gnncore.partition.store import PartitionDir, write_partition_dir
from gnncore.store import GraphDir


@dataclass(frozen=True)
class MethodSettings:
    """Method-specific settings; each method reads the ones it understands.

    Args:
        chunk (float): GREM/greedy chunk size as a fraction of the edges.
        passes (int): GREM restreaming refinement passes (0: the thesis' GREM).
        seed_method (str): GREM first-chunk seeding: metis, random or ldg.
        hops (int): ByteGNN block radius.
    """

    chunk: float = 0.1
    passes: int = 3
    seed_method: str = "metis"
    hops: int = 2


# method -> (module, class, settings it takes, fixed keyword arguments)
_REGISTRY: dict[str, tuple[str, str, tuple[str, ...], dict[str, Any]]] = {
    "metis": ("gnncore.partition.metis", "MetisPartitioner", (), {"recursive": False}),
    "metis-recursive": ("gnncore.partition.metis", "MetisPartitioner", (),
                        {"recursive": True}),
    "grem": ("gnncore.partition.grem", "GremPartitioner", ("chunk", "passes", "seed_method"),
             {}),
    "greedy": ("gnncore.partition.grem", "GremPartitioner", ("chunk", "seed_method"),
               {"refine": False, "passes": 0}),
    "ldg": ("gnncore.partition.stream", "LdgPartitioner", (), {}),
    "fennel": ("gnncore.partition.stream", "FennelPartitioner", (), {}),
    "random": ("gnncore.partition.simple", "RandomPartitioner", (), {}),
    "range": ("gnncore.partition.simple", "RangePartitioner", (), {}),
    "bytegnn": ("gnncore.partition.bytegnn", "ByteGnnPartitioner", ("hops",), {}),
}
METHODS = tuple(_REGISTRY)


def method_params(method: str, settings: MethodSettings) -> dict[str, Any]:
    """The settings ``method`` uses, by name (what reports and MLflow record)."""
    return {name: getattr(settings, name) for name in _registered(method)[2]}


def _registered(method: str) -> tuple[str, str, tuple[str, ...], dict[str, Any]]:
    if method not in _REGISTRY:
        raise ValueError(f"unknown partitioning method {method!r}; choose from "
                         f"{', '.join(METHODS)}")
    return _REGISTRY[method]


def make_partitioner(method: str, settings: MethodSettings | None = None) -> Partitioner:
    """The partitioner registered under ``method``, configured by ``settings``."""
    module, cls, _, fixed = _registered(method)
    factory = getattr(importlib.import_module(module), cls)
    return factory(**method_params(method, settings or MethodSettings()), **fixed)


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
    params: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "parts": self.parts,
            "seed": self.seed,
            **self.params,
            "out_dir": self.out_dir,
            "edge_cut_fraction": self.metrics.edge_cut_fraction,
            "max_part_ratio": self.metrics.max_part_ratio,
            "split_balance": self.metrics.split_balance,
            "seconds": self.seconds,
            "peak_rss_bytes": self.peak_rss_bytes,
        }


def partition_graph(graph_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str],
                    method: str = "metis", parts: int = 2, seed: int = 0,
                    imbalance: float = 0.03,
                    settings: MethodSettings | None = None) -> PartitionReport:
    """Partition the graph at ``graph_dir`` into ``out_dir`` (written atomically).

    Args:
        graph_dir: A graph directory (see docs/FORMAT.md).
        out_dir: The partition directory to create or replace.
        method (str): A name from :data:`METHODS` (default: ``"metis"``).
        parts (int): Number of partitions (default: 2).
        seed (int): Random seed (default: 0).
        imbalance (float): Allowed excess of the largest part (default: 0.03).
        settings (MethodSettings, optional): Method-specific settings.
    """
    graph = GraphDir.open(graph_dir)
    settings = settings or MethodSettings()
    partitioner = make_partitioner(method, settings)
    params = method_params(method, settings)
    options = PartitionOptions(parts=parts, seed=seed, imbalance=imbalance)
    options.validate(graph.num_nodes)
    start = time.perf_counter()
    assignment = np.asarray(partitioner.assign(graph, options), dtype=np.int64)
    seconds = time.perf_counter() - start
    rss = peak_rss_bytes()
    metrics = partition_metrics(graph, assignment, parts)
    info = {"method": method, "parts": parts, "seed": seed, "imbalance": imbalance, **params,
            "seconds": seconds, "peak_rss_bytes": rss, "metrics": metrics.to_dict()}
    write_partition_dir(out_dir, graph, assignment, info)
    return PartitionReport(method, parts, seed, str(Path(out_dir)), seconds, rss, metrics,
                           params)


__all__ = ["METHODS", "MethodSettings", "PartitionDir", "PartitionReport", "make_partitioner",
           "method_params", "partition_graph"]
