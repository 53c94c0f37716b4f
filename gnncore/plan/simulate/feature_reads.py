"""Feature reads of a simulated data-parallel run over ``n`` devices with a
feature placement (Song & Jiang; :mod:`gnncore.plan.simulate`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gnncore.plan.batching import seeded_batches
from gnncore.plan.lookup import lookup_tables
from gnncore.plan.simulate.batches import check_batch_args, frozen, owner_labels, train_ids

if TYPE_CHECKING:
    from gnncore.sampler.neighbor import NeighborSampler


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
    ``dev_num`` of :func:`gnncore.plan.lookup.lookup_tables`.

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
    check_batch_args(batch_size, epochs, seed)
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
    train = train_ids(train_nodes, num_nodes)
    labels = None if owner is None else owner_labels(owner, num_nodes, devices)[0]

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
        batches=frozen(batches),
        local=frozen(local),
        peer=frozen(peer),
        host=frozen(host),
    )
