"""The partitioning methods by name: their settings and the registry that
builds a :class:`~gnncore.partition.base.Partitioner` for each."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from gnncore.partition.base import Partitioner
from gnncore.partition.grem import default_seed_method
from gnncore.partition.hydra import DEFAULT_GROUP_SIZE


@dataclass(frozen=True)
class MethodSettings:
    """Method-specific settings; each method reads the ones it understands.

    Args:
        chunk (float): GREM/greedy chunk size as a fraction of the edges.
        passes (int): GREM restreaming refinement passes (0: the thesis' GREM).
        seed_method (str, optional): GREM first-chunk seeding: metis, random,
            ldg or clusters (default: :func:`~gnncore.partition.grem.default_seed_method`:
            clusters with refinement passes, metis, the thesis' seed, without).
        hops (int): ByteGNN block radius.
        clusters (int, optional): GREM seed ``clusters``: target cluster size
            ``prefix nodes / clusters`` (default:
            :func:`~gnncore.partition.grem.default_clusters`).
        group_size (int): HyDRA: nodes per degree-balanced greedy group.
        workers (int): GREM/greedy bisections run at once, in spawned
            processes (1: serial, the memory bound of one chunk; 0: one per
            CPU from 2**26 edges up, as 3/4 of the memory holds them, else
            1). Same labels; less time, more memory (reported RSS adds the
            workers' peaks).
        threads (int): KaMinPar's threads (1: deterministic for a seed; 0:
            every CPU this process may use).
        final_passes (int): GREM's final k-way refinement passes at most
            (size-constrained label propagation over the whole partition,
            :func:`~gnncore.partition.grem.refine.refine_kway`; 0: none).
    """

    chunk: float = 0.1
    passes: int = 3
    seed_method: str | None = None
    hops: int = 2
    clusters: int | None = None
    workers: int = 0
    group_size: int = DEFAULT_GROUP_SIZE
    threads: int = 1
    final_passes: int = 8


# method -> (module, class, settings it takes, fixed keyword arguments)
_REGISTRY: dict[str, tuple[str, str, tuple[str, ...], dict[str, Any]]] = {
    "metis": ("gnncore.partition.metis", "MetisPartitioner", (), {"recursive": False}),
    "metis-recursive": ("gnncore.partition.metis", "MetisPartitioner", (), {"recursive": True}),
    "grem": (
        "gnncore.partition.grem",
        "GremPartitioner",
        ("chunk", "passes", "seed_method", "clusters", "workers", "final_passes"),
        {},
    ),
    "greedy": (
        "gnncore.partition.grem",
        "GremPartitioner",
        ("chunk", "seed_method", "workers"),
        {"refine": False, "passes": 0},
    ),
    "ldg": ("gnncore.partition.stream", "LdgPartitioner", (), {}),
    "fennel": ("gnncore.partition.stream", "FennelPartitioner", (), {}),
    "random": ("gnncore.partition.simple", "RandomPartitioner", (), {}),
    "range": ("gnncore.partition.simple", "RangePartitioner", (), {}),
    "bytegnn": ("gnncore.partition.bytegnn", "ByteGnnPartitioner", ("hops",), {}),
    "hydra": ("gnncore.partition.hydra", "HydraPartitioner", ("group_size",), {}),
    "kaminpar": ("gnncore.partition.kaminpar", "KaMinParPartitioner", ("threads",), {}),
}
METHODS = tuple(_REGISTRY)


def method_params(method: str, settings: MethodSettings) -> dict[str, Any]:
    """The settings ``method`` uses, by name (what reports and MLflow record).

    GREM's ``seed_method`` is resolved (``None`` becomes the default for its
    passes) and ``clusters`` is left out unless given.
    """
    params = {name: getattr(settings, name) for name in _registered(method)[2]}
    if "seed_method" in params and params["seed_method"] is None:
        fixed = _registered(method)[3]
        params["seed_method"] = default_seed_method(fixed.get("passes", settings.passes))
    if params.get("clusters", 0) is None:
        del params["clusters"]
    return params


def _registered(method: str) -> tuple[str, str, tuple[str, ...], dict[str, Any]]:
    if method not in _REGISTRY:
        raise ValueError(
            f"unknown partitioning method {method!r}; choose from {', '.join(METHODS)}"
        )
    return _REGISTRY[method]


def registered_settings(method: str) -> tuple[str, ...]:
    """The names of the :class:`MethodSettings` fields ``method`` reads."""
    return _registered(method)[2]


def make_partitioner(method: str, settings: MethodSettings | None = None) -> Partitioner:
    """The partitioner registered under ``method``, configured by ``settings``."""
    module, cls, _, fixed = _registered(method)
    factory = getattr(importlib.import_module(module), cls)
    return factory(**method_params(method, settings or MethodSettings()), **fixed)


__all__ = [
    "METHODS",
    "MethodSettings",
    "make_partitioner",
    "method_params",
    "registered_settings",
]
