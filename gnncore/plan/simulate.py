"""Replay the project's sampler over virtual devices / partitions and count data movement.

Two simulators run the real sampler (:meth:`NeighborSampler._sample
<gnncore.sampler.NeighborSampler._sample>`, the C++ kernel training uses) on
seeded mini-batches and count what a multi-GPU run would move, without
several GPUs (ALGORITHMS.md §3, "What HyDRA measures ...", and §4):

* :func:`simulate_feature_reads` -- data-parallel training over ``n`` devices
  with a feature placement (``dev_num``): every node of every sampled batch
  is one feature read, from the device's own cache, a peer's cache or host
  memory; the Song & Jiang cost of a device is ``alpha · peer + host``.
* :func:`simulate_neighbor_traffic` -- ``M`` virtual partitions, each
  training on its own training nodes: for every node whose neighbours a hop
  samples and whose neighbour list another partition owns, the neighbour ids
  that cross partitions under DSP-style sampling, whole-list memory sharing,
  HDR (replicated lists are local) and HDR with threshold pruning.

Batches and seeding (reproducible; the samplers' own batch counters and base
seed are not used): the training nodes are de-duplicated and sorted
(``np.unique``); each epoch permutes them with
``np.random.default_rng([seed, epoch])`` and cuts the permutation into
batches of ``batch_size`` (the last one may be smaller); batch ``i`` is
sampled with the seed ``SeedSequence([seed, epoch, i]).generate_state(1,
uint64)`` -- the batches :func:`gnncore.plan.estimators.presample_access`
counts. For partitions, partition ``m``'s training nodes are permuted with
``default_rng([seed, epoch, m])`` and its batch ``i`` uses
``SeedSequence([seed, epoch, m, i])``.

Per batch the work is a few numpy gathers and reductions over the sampled
arrays (no Python loop over nodes), so an epoch costs about as much as
sampling it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gnncore.plan.batching import seeded_batches
from gnncore.plan.placement import lookup_tables
from gnncore.plan.replication import stored_ids
from gnncore.sampler.prune import prune_thresholds

if TYPE_CHECKING:
    from gnncore.sampler.neighbor import NeighborSampler

#: The neighbour-traffic schemes of :class:`NeighborTraffic`, in table order.
SCHEMES: tuple[str, ...] = ("dsp", "whole_list", "hdr", "hdr_pruned")


# Shared helpers ------------------------------------------------------------


def _frozen(array: np.ndarray) -> np.ndarray:
    """``array`` as a read-only int64 array (the results are immutable)."""
    out = np.array(array, dtype=np.int64)
    out.flags.writeable = False
    return out


def _check_args(batch_size: int, epochs: int, seed: int) -> None:
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")


def _train_ids(train_nodes: np.ndarray, num_nodes: int) -> np.ndarray:
    """The training nodes, de-duplicated and sorted; raises for ids out of range."""
    train = np.unique(np.asarray(train_nodes, dtype=np.int64))
    if len(train) and (train[0] < 0 or train[-1] >= num_nodes):
        raise ValueError(f"train_nodes must be node ids in [0, {num_nodes})")
    return train


def _padded(counts: Sequence[int], length: int) -> np.ndarray:
    """``counts`` as int64, cut or padded with zeros to ``length``."""
    out = np.zeros(length, dtype=np.int64)
    values = np.asarray(counts, dtype=np.int64)[:length]
    out[: len(values)] = values
    return out


# Feature reads (data parallel, Song & Jiang) -------------------------------


@dataclass(frozen=True, eq=False)
class FeatureReadCounts:
    """Feature reads per device of a simulated data-parallel run.

    Every node of a sampled batch (seeds included) is one read on the device
    that trains the batch: ``local`` from its own cache, ``peer`` from
    another device's cache, ``host`` from host memory. Arrays are
    ``int64[devices]`` and read-only.

    Attributes:
        devices: Number of devices ``n``.
        epochs: Epochs simulated.
        batches: Mini-batches each device trained.
        local, peer, host: Reads of each kind per device.
    """

    devices: int
    epochs: int
    batches: np.ndarray
    local: np.ndarray
    peer: np.ndarray
    host: np.ndarray

    @property
    def reads(self) -> np.ndarray:
        """All reads per device (``local + peer + host``)."""
        return self.local + self.peer + self.host

    @property
    def totals(self) -> dict[str, int]:
        """Reads of each kind (and ``reads``, ``batches``) over all devices."""
        return {
            "batches": int(self.batches.sum()),
            "reads": int(self.reads.sum()),
            "local": int(self.local.sum()),
            "peer": int(self.peer.sum()),
            "host": int(self.host.sum()),
        }

    @property
    def shares(self) -> dict[str, float]:
        """Fraction of all reads that are ``local`` / ``peer`` / ``host`` (0 without reads)."""
        totals = self.totals
        reads = totals["reads"]
        return {k: totals[k] / reads if reads else 0.0 for k in ("local", "peer", "host")}

    def device_costs(self, alpha: float) -> np.ndarray:
        """Each device's read cost, ``alpha · peer + host`` (C_gpu = alpha, C_cpu = 1)."""
        return alpha * self.peer.astype(np.float64) + self.host

    def cost(self, alpha: float) -> float:
        """The Song & Jiang objective: the largest device cost (see :meth:`device_costs`)."""
        return float(self.device_costs(alpha).max()) if self.devices else 0.0

    def to_rows(self, alpha: float | None = None) -> list[dict[str, Any]]:
        """One row per device (``cost`` too when ``alpha`` is given), for tables."""
        costs = None if alpha is None else self.device_costs(alpha)
        rows = []
        for d in range(self.devices):
            reads = int(self.reads[d])
            row: dict[str, Any] = {
                "device": d,
                "batches": int(self.batches[d]),
                "reads": reads,
                "local": int(self.local[d]),
                "peer": int(self.peer[d]),
                "host": int(self.host[d]),
                "local_share": int(self.local[d]) / reads if reads else 0.0,
                "peer_share": int(self.peer[d]) / reads if reads else 0.0,
                "host_share": int(self.host[d]) / reads if reads else 0.0,
            }
            if costs is not None:
                row["cost"] = float(costs[d])
            rows.append(row)
        return rows

    def as_dict(self, alpha: float | None = None) -> dict[str, Any]:
        """JSON-ready summary: per-device lists, totals, shares (and cost for ``alpha``)."""
        out: dict[str, Any] = {
            "devices": self.devices,
            "epochs": self.epochs,
            "batches": self.batches.tolist(),
            "local": self.local.tolist(),
            "peer": self.peer.tolist(),
            "host": self.host.tolist(),
            "totals": self.totals,
            "shares": self.shares,
        }
        if alpha is not None:
            out["alpha"] = float(alpha)
            out["device_costs"] = self.device_costs(alpha).tolist()
            out["cost"] = self.cost(alpha)
        return out


def dev_num_from_caches(
    caches: Sequence[np.ndarray],
    num_nodes: int,
    peer_groups: Sequence[Sequence[int]] | None = None,
) -> np.ndarray:
    """The read-source table ``dev_num[d, v]`` of devices caching ``caches[d]``.

    Device ``d`` reads ``v`` locally (``d``) when ``caches[d]`` holds ``v``;
    else from the lowest-numbered device of its peer group whose cache holds
    ``v``; else from host memory (``-1``). ``peer_groups`` lists disjoint
    groups of devices that read each other's caches (``[[0, 1], [2, 3]]``:
    NVLink pairs); ``None`` links every device with every other; a device in
    no group reads only its own cache. Returns ``int16[n, N]``, the
    ``dev_num`` of :func:`gnncore.plan.placement.lookup_tables`.

    Raises:
        ValueError: For node ids out of range, device ids out of range or a
            device in two groups.
    """
    devices = len(caches)
    cached = [np.asarray(c, dtype=np.int64).ravel() for c in caches]
    for d, ids in enumerate(cached):
        if len(ids) and (ids.min() < 0 or ids.max() >= num_nodes):
            raise ValueError(f"caches[{d}] holds ids outside [0, {num_nodes})")
    if peer_groups is None:
        groups = [list(range(devices))]
    else:
        groups = [[int(d) for d in group] for group in peer_groups]
        seen: set[int] = set()
        for group in groups:
            for d in group:
                if not 0 <= d < devices:
                    raise ValueError(f"peer group device {d} is not in [0, {devices})")
                if d in seen:
                    raise ValueError(f"device {d} is in more than one peer group")
                seen.add(d)
        groups += [[d] for d in range(devices) if d not in seen]
    return lookup_tables(cached, num_nodes, groups)[0]


def simulate_feature_reads(
    sampler: NeighborSampler,
    train_nodes: np.ndarray,
    dev_num: np.ndarray,
    *,
    batch_size: int,
    epochs: int = 1,
    seed: int = 0,
    owner: np.ndarray | None = None,
) -> FeatureReadCounts:
    """Count the feature reads of data-parallel training with the read sources ``dev_num``.

    Each epoch's batches (module docstring: ``default_rng([seed, epoch])``
    permutation, batch ``i`` seeded from ``(seed, epoch, i)``) are spread
    round-robin, batch ``i`` to device ``i % n``. Every node of the batch's
    sampled ``node`` array is one read on that device, classified by
    ``dev_num[device, node]``: the device itself is local, another device a
    peer read, ``-1`` a host read.

    With ``owner`` (partition-based training, as PaGraph-style systems run
    it), device ``d`` trains on the training nodes ``v`` with ``owner[v] ==
    d`` instead: each epoch permutes them with ``default_rng([seed, epoch,
    d])`` and seeds its batch ``i`` from ``(seed, epoch, d, i)``, the
    batching of :func:`simulate_neighbor_traffic`.

    Args:
        sampler: The sampler training uses (any
            :class:`~gnncore.sampler.NeighborSampler`); only its
            ``_sample`` is called.
        train_nodes: Training node ids (duplicates count once).
        dev_num: ``[n, N]`` integer array; ``dev_num[d, v]`` is the device
            ``d`` reads ``v``'s features from, ``-1`` for host memory.
        batch_size: Seeds per mini-batch.
        epochs: Epochs to simulate.
        seed: Seed of the permutations and batch seeds (>= 0).
        owner: ``int[N]`` device of every node (labels in ``[0, n)``): each
            device trains on its own training nodes; ``None`` (default):
            data parallel, batches dealt round-robin.

    Raises:
        ValueError: For a ``dev_num`` of the wrong shape or with entries
            outside ``[-1, n)``, an ``owner`` of the wrong shape or with
            labels outside ``[0, n)``, or bad counts / ids.
    """
    _check_args(batch_size, epochs, seed)
    num_nodes = sampler.num_nodes
    table = np.asarray(dev_num)
    if table.ndim != 2 or table.shape[1] != num_nodes or table.shape[0] < 1:
        raise ValueError(
            f"dev_num must have shape [devices >= 1, {num_nodes}], got {list(table.shape)}"
        )
    if not np.issubdtype(table.dtype, np.integer):
        raise ValueError(f"dev_num must hold integers, got {table.dtype}")
    devices = table.shape[0]
    if table.size and (table.min() < -1 or table.max() >= devices):
        raise ValueError(f"dev_num entries must be in [-1, {devices})")
    rows = [np.ascontiguousarray(table[d]) for d in range(devices)]
    train = _train_ids(train_nodes, num_nodes)
    labels = None if owner is None else _owners(owner, num_nodes, devices)[0]

    batches = np.zeros(devices, dtype=np.int64)
    local = np.zeros(devices, dtype=np.int64)
    peer = np.zeros(devices, dtype=np.int64)
    host = np.zeros(devices, dtype=np.int64)

    def count(d: int, seeds: np.ndarray, batch_seed: int) -> None:
        node = np.asarray(sampler._sample(seeds, batch_seed)[0])
        source = rows[d][node]
        here = np.count_nonzero(source == d)
        off = np.count_nonzero(source < 0)
        batches[d] += 1
        local[d] += here
        host[d] += off
        peer[d] += len(node) - here - off

    for epoch in range(epochs):
        if labels is None:
            for i, seeds, batch in seeded_batches(train, batch_size, seed, epoch):
                count(i % devices, seeds, batch)
            continue
        train_owner = labels[train]
        for d in range(devices):
            mine = train[train_owner == d]
            for _, seeds, batch in seeded_batches(mine, batch_size, seed, epoch, d):
                count(d, seeds, batch)
    return FeatureReadCounts(
        devices=devices,
        epochs=epochs,
        batches=_frozen(batches),
        local=_frozen(local),
        peer=_frozen(peer),
        host=_frozen(host),
    )


# Neighbour-id traffic across partitions (HyDRA) -----------------------------


def frontier_kind(sampler: NeighborSampler) -> str:
    """Which nodes a hop of ``sampler`` samples neighbours for.

    ``"per-layer"`` (:class:`~gnncore.sampler.PerLayerSampler`): hop ``h``
    samples every node known before it (seeds and all nodes reached at hops
    ``< h``). ``"dense"`` (:class:`~gnncore.sampler.DenseSampler` and the
    plain :class:`~gnncore.sampler.NeighborSampler`): hop ``h`` samples the
    nodes first reached at hop ``h - 1`` (the seeds at hop 0).
    """
    from gnncore.sampler.per_layer import PerLayerSampler

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


def _owners(owner: np.ndarray, num_nodes: int, parts: int | None) -> tuple[np.ndarray, int]:
    labels = np.asarray(owner)
    if labels.shape != (num_nodes,):
        raise ValueError(f"owner must have shape [{num_nodes}], got {list(labels.shape)}")
    labels = labels.astype(np.int64, copy=False)
    found = int(labels.max()) + 1 if num_nodes else 0
    if num_nodes and labels.min() < 0:
        raise ValueError("owner labels must be >= 0")
    count = found if parts is None else int(parts)
    if count < 1 or found > count:
        raise ValueError(f"parts must be >= 1 and above every owner label, got {parts}")
    return labels, count


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
    labels, count = _owners(owner, num_nodes, parts)
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
    _check_args(batch_size, epochs, seed)
    num_nodes = sampler.num_nodes
    labels, count = _owners(owner, num_nodes, parts)
    mask = _replicated_mask(replicated, num_nodes)
    fanouts = tuple(int(f) for f in sampler.fanouts)
    hops = len(fanouts)
    avg_degree = len(sampler.indices) / num_nodes if num_nodes else 0.0
    thetas = prune_thresholds(
        fanouts, avg_degree, theta, prune_alpha=prune_alpha, prune_beta=prune_beta
    )
    kind = frontier_kind(sampler)
    degree = np.diff(sampler.indptr).astype(np.int64)
    train = _train_ids(train_nodes, num_nodes)
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
                node_end = np.cumsum(_padded(out[4], hops + 1))
                edge_end = np.cumsum(_padded(out[5], hops))
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
        batches=_frozen(batches),
        frontier_nodes=_frozen(counts["frontier_nodes"]),
        remote_nodes=_frozen(counts["remote_nodes"]),
        dsp=_frozen(counts["dsp"]),
        whole_list=_frozen(counts["whole_list"]),
        hdr=_frozen(counts["hdr"]),
        hdr_pruned=_frozen(counts["hdr_pruned"]),
    )
