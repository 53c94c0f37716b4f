"""Neighbour ids crossing partitions in a simulated run over ``M`` partitions
(HyDRA; :mod:`gnncore.plan.simulate`): DSP-style sampling, whole-list
memory sharing, HDR and HDR with threshold pruning."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gnncore.plan.batching import seeded_batches
from gnncore.plan.replication import stored_ids
from gnncore.plan.simulate.batches import (
    check_batch_args,
    frozen,
    owner_labels,
    padded,
    train_ids,
)
from gnncore.sampler.per_layer import PerLayerSampler
from gnncore.sampler.prune import prune_thresholds

if TYPE_CHECKING:
    from gnncore.sampler.neighbor import NeighborSampler

#: The neighbour-traffic schemes of :class:`NeighborTraffic`, in table order.
SCHEMES: tuple[str, ...] = ("dsp", "whole_list", "hdr", "hdr_pruned")


def frontier_kind(sampler: NeighborSampler) -> str:
    """Which nodes a hop of ``sampler`` samples neighbours for.

    ``"per-layer"`` (:class:`~gnncore.sampler.PerLayerSampler`): hop ``h``
    samples every node known before it (seeds and all nodes reached at hops
    ``< h``). ``"dense"`` (:class:`~gnncore.sampler.DenseSampler` and the
    plain :class:`~gnncore.sampler.NeighborSampler`): hop ``h`` samples the
    nodes first reached at hop ``h - 1`` (the seeds at hop 0).
    """
    return "per-layer" if isinstance(sampler, PerLayerSampler) else "dense"


@dataclass(frozen=True, eq=False)
class NeighborTraffic:
    """Neighbour ids crossing partitions in a simulated run over ``M`` partitions.

    Counts are ``int64[parts, hops]`` (read-only), per partition and hop, for
    the *remote* frontier nodes: nodes a hop samples neighbours for whose
    owner is not the partition training the batch.

    Attributes:
        parts: Number of partitions ``M``.
        fanouts: The sampler's fanouts.
        frontier: ``"dense"`` or ``"per-layer"`` (see :func:`frontier_kind`).
        thetas: θ per hop (``None``: not pruned, fanout ``-1``).
        epochs: Epochs simulated.
        memory_increase: Extra neighbour ids stored for the replicated set
            (see :func:`memory_increase`).
        batches: ``int64[parts]``: mini-batches each partition trained.
        frontier_nodes: Nodes the hop samples neighbours for.
        remote_nodes: Of those, nodes another partition owns.
        dsp: DSP-style sampling: per remote node the request id plus the
            sampled ids returned (``1 + sampled``).
        whole_list: Memory sharing of whole lists: ``deg(v)`` per remote node.
        hdr: HDR: ``deg(v)`` per remote node that is not replicated.
        hdr_pruned: HDR with threshold pruning: ``min(deg(v), θ)`` per remote,
            non-replicated node.
    """

    parts: int
    fanouts: tuple[int, ...]
    frontier: str
    thetas: tuple[int | None, ...]
    epochs: int
    memory_increase: float
    batches: np.ndarray
    frontier_nodes: np.ndarray
    remote_nodes: np.ndarray
    dsp: np.ndarray
    whole_list: np.ndarray
    hdr: np.ndarray
    hdr_pruned: np.ndarray

    def per_partition(self, name: str) -> np.ndarray:
        """``int64[parts]``: a count (a scheme of :data:`SCHEMES`, ``frontier_nodes``
        or ``remote_nodes``) summed over hops."""
        if name not in (*SCHEMES, "frontier_nodes", "remote_nodes"):
            raise ValueError(f"unknown count {name!r}")
        counts: np.ndarray = getattr(self, name)
        return counts.sum(axis=1)

    @property
    def totals(self) -> dict[str, int]:
        """Every count summed over partitions and hops (and ``batches``)."""
        out = {"batches": int(self.batches.sum())}
        for name in ("frontier_nodes", "remote_nodes", *SCHEMES):
            out[name] = int(getattr(self, name).sum())
        return out

    def normalised(self) -> dict[str, float]:
        """Each scheme's total over the DSP total (HyDRA Table II: ``whole_list`` is
        (b)/(a)); ``nan`` when nothing crosses partitions under DSP."""
        totals = self.totals
        base = totals["dsp"]
        return {name: totals[name] / base if base else math.nan for name in SCHEMES}

    def to_rows(self) -> list[dict[str, Any]]:
        """One row per partition (summed over hops) and a last ``"all"`` row."""
        rows: list[dict[str, Any]] = []
        names = ("frontier_nodes", "remote_nodes", *SCHEMES)
        per = {name: self.per_partition(name) for name in names}
        for m in range(self.parts):
            row: dict[str, Any] = {"partition": m, "batches": int(self.batches[m])}
            row.update({name: int(per[name][m]) for name in names})
            rows.append(row)
        rows.append({"partition": "all", **self.totals})
        return rows

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary: settings, totals, normalised totals, per-partition/hop lists."""
        out: dict[str, Any] = {
            "parts": self.parts,
            "fanouts": list(self.fanouts),
            "frontier": self.frontier,
            "thetas": list(self.thetas),
            "epochs": self.epochs,
            "memory_increase": self.memory_increase,
            "totals": self.totals,
            "normalised": self.normalised(),
            "batches": self.batches.tolist(),
        }
        for name in ("frontier_nodes", "remote_nodes", *SCHEMES):
            out[name] = getattr(self, name).tolist()
        return out


def _replicated_mask(replicated: np.ndarray | None, num_nodes: int) -> np.ndarray:
    """``bool[N]`` from a mask or an id array (``None``: nothing replicated)."""
    if replicated is None:
        return np.zeros(num_nodes, dtype=bool)
    given = np.asarray(replicated)
    if given.dtype == np.bool_:
        if given.shape != (num_nodes,):
            raise ValueError(f"replicated mask must have shape [{num_nodes}]")
        return given
    ids = given.astype(np.int64).ravel()
    if len(ids) and (ids.min() < 0 or ids.max() >= num_nodes):
        raise ValueError(f"replicated ids must be in [0, {num_nodes})")
    mask = np.zeros(num_nodes, dtype=bool)
    mask[ids] = True
    return mask


def memory_increase(
    indptr: np.ndarray,
    owner: np.ndarray,
    replicated: np.ndarray | None,
    parts: int | None = None,
) -> float:
    """Extra neighbour ids stored under HDR over the ids stored without replication.

    Every partition stores its own nodes' lists and, with HDR, the full lists
    of the replicated nodes it does not own: with one owner per node the
    extra ids are ``(M - 1) · Σ_{v ∈ V_r} deg(v)``, divided by ``E``
    (``indptr[-1]``; 0 for an empty graph). ``replicated`` is a ``bool[N]``
    mask or an id array; ``M`` is ``parts`` or ``owner.max() + 1``.
    """
    offsets = np.asarray(indptr, dtype=np.int64)
    if offsets.ndim != 1 or len(offsets) < 1:
        raise ValueError("indptr must be a 1-d array of length N + 1")
    num_nodes = len(offsets) - 1
    labels, count = owner_labels(owner, num_nodes, parts)
    mask = _replicated_mask(replicated, num_nodes)
    total = int(offsets[-1])
    if total == 0:
        return 0.0
    stored = stored_ids(np.diff(offsets), labels, count, np.flatnonzero(mask))
    return float(stored.sum() - total) / total


def simulate_neighbor_traffic(
    sampler: NeighborSampler,
    train_nodes: np.ndarray,
    owner: np.ndarray,
    *,
    replicated: np.ndarray | None = None,
    batch_size: int,
    epochs: int = 1,
    seed: int = 0,
    parts: int | None = None,
    theta: int | Sequence[int] | None = None,
    prune_alpha: float = 1.0,
    prune_beta: float = 1.0,
) -> NeighborTraffic:
    """Count the neighbour ids that cross partitions when each partition trains on its own nodes.

    Partition ``m`` trains on the training nodes it owns, batched as in the
    module docstring (``default_rng([seed, epoch, m])``, batch ``i`` seeded
    from ``(seed, epoch, m, i)``). For each batch and hop ``h`` the frontier
    (:func:`frontier_kind`) is read off the sampler's output: the nodes new at
    the previous hop (seeds at hop 0) for DENSE / plain sampling, every node
    known before ``h`` for per-layer sampling. For each frontier node ``v``
    with ``owner[v] != m`` the schemes of :class:`NeighborTraffic` count
    ``1 + (neighbours sampled for v at hop h)`` (DSP), ``deg(v)`` (whole
    list), ``deg(v)`` if ``v`` is not replicated (HDR) and ``min(deg(v),
    θ_h)`` if not replicated (HDR + pruning; :func:`prune_thresholds`, with
    the average degree ``E / N`` of the sampler's adjacency). ``deg(v)`` is
    the length of ``v``'s row in the sampler's ``indptr``. A list read at
    several hops (per-layer sampling) is counted at each.

    Args:
        sampler: The sampler training uses; only ``_sample`` is called.
        train_nodes: Training node ids (duplicates count once).
        owner: ``int[N]``: the partition owning each node's neighbour list.
        replicated: ``V_r`` as a ``bool[N]`` mask or ids: lists every
            partition stores (``None``: none).
        batch_size, epochs, seed: Batching (see above).
        parts: ``M`` (default ``owner.max() + 1``).
        theta, prune_alpha, prune_beta: Pruning threshold (see
            :func:`prune_thresholds`).

    Raises:
        ValueError: For arrays of the wrong shape, bad labels, ids or counts.
    """
    check_batch_args(batch_size, epochs, seed)
    num_nodes = sampler.num_nodes
    labels, count = owner_labels(owner, num_nodes, parts)
    mask = _replicated_mask(replicated, num_nodes)
    fanouts = tuple(int(f) for f in sampler.fanouts)
    hops = len(fanouts)
    avg_degree = len(sampler.indices) / num_nodes if num_nodes else 0.0
    thetas = prune_thresholds(
        fanouts, avg_degree, theta, prune_alpha=prune_alpha, prune_beta=prune_beta
    )
    kind = frontier_kind(sampler)
    degree = np.diff(sampler.indptr).astype(np.int64)
    train = train_ids(train_nodes, num_nodes)
    train_owner = labels[train]

    shape = (count, hops)
    batches = np.zeros(count, dtype=np.int64)
    counts = {
        name: np.zeros(shape, dtype=np.int64)
        for name in ("frontier_nodes", "remote_nodes", *SCHEMES)
    }
    for epoch in range(epochs):
        for m in range(count):
            mine = train[train_owner == m]
            for _, seeds, batch in seeded_batches(mine, batch_size, seed, epoch, m):
                out = sampler._sample(seeds, batch)
                node, col = np.asarray(out[0]), np.asarray(out[2])
                node_end = np.cumsum(padded(out[4], hops + 1))
                edge_end = np.cumsum(padded(out[5], hops))
                remote = labels[node] != m  # per local id
                deg = degree[node]
                far = remote & ~mask[node]  # remote and not replicated
                batches[m] += 1
                for h in range(hops):
                    lo = 0 if (kind == "per-layer" or h == 0) else int(node_end[h - 1])
                    hi = int(node_end[h])
                    edge_lo = int(edge_end[h - 1]) if h else 0
                    hop_remote = remote[lo:hi]
                    hop_deg = deg[lo:hi]
                    far_deg = hop_deg[far[lo:hi]]
                    num_remote = int(np.count_nonzero(hop_remote))
                    sampled = np.count_nonzero(remote[col[edge_lo : edge_end[h]]])
                    theta_h = thetas[h]
                    counts["frontier_nodes"][m, h] += hi - lo
                    counts["remote_nodes"][m, h] += num_remote
                    counts["dsp"][m, h] += num_remote + sampled
                    counts["whole_list"][m, h] += int(hop_deg[hop_remote].sum())
                    counts["hdr"][m, h] += int(far_deg.sum())
                    counts["hdr_pruned"][m, h] += int(
                        far_deg.sum() if theta_h is None else np.minimum(far_deg, theta_h).sum()
                    )
    return NeighborTraffic(
        parts=count,
        fanouts=fanouts,
        frontier=kind,
        thetas=thetas,
        epochs=epochs,
        memory_increase=memory_increase(sampler.indptr, labels, mask, count),
        batches=frozen(batches),
        frontier_nodes=frozen(counts["frontier_nodes"]),
        remote_nodes=frozen(counts["remote_nodes"]),
        dsp=frozen(counts["dsp"]),
        whole_list=frozen(counts["whole_list"]),
        hdr=frozen(counts["hdr"]),
        hdr_pruned=frozen(counts["hdr_pruned"]),
    )
