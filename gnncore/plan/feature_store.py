r"""A PyG :class:`~torch_geometric.data.FeatureStore` that serves node features
through a placement plan (:mod:`gnncore.plan.placement`).

For the plan's device ``d`` the store keeps tiers of the feature matrix:

* **local** -- the rows of ``d``'s own cache, on the training device (the GPU
  on CUDA, so a hit costs no transfer);
* **peer** -- the caches of the devices ``d`` reads from (``dev_num[d, v]`` is
  another device): on ``cuda:e`` when that GPU exists, else in host memory
  (one process cannot reach another process's GPU; the reads still count as
  peer reads, as the plan would serve them);
* **host** -- everything else, gathered from the memory-mapped features
  (pinned when the cache is on a GPU) and copied to the device.

A gather returns exactly the rows of the plain store, so training with a
placement draws the same batches and reaches the same parameters as without.
Every gather counts its rows per tier; :meth:`take_counts` returns the counts
since the last call, and the training loop logs them per epoch
(``feature_reads_local`` / ``_peer`` / ``_host``). Labels (``"y"``) and any
other attribute come from the wrapped store.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import torch
from torch_geometric.data import FeatureStore, TensorAttr

from gnncore.plan.placement import PlacementPlan
from gnncore.store.feature_store import GraphDirFeatureStore

TIERS = ("local", "peer", "host")


class PlacedFeatureStore(FeatureStore):
    """Features of a graph directory served through a placement plan.

    Args:
        base: The graph's plain feature store (features and labels).
        plan: A placement plan of the same graph (checked).
        device_index: Which of the plan's devices this process is (``0 <=
            device_index < plan.devices``). (default: 0)
        device: Where the local cache lives and gathers are returned: the
            training device. (default: CPU)
    """

    def __init__(
        self,
        base: GraphDirFeatureStore,
        plan: PlacementPlan,
        device_index: int = 0,
        device: torch.device | str = "cpu",
    ) -> None:
        super().__init__()
        plan.plan.check_graph(base.graph)
        if not 0 <= device_index < plan.devices:
            raise ValueError(
                f"device_index {device_index} is outside the plan's {plan.devices} devices"
            )
        self.base = base
        self.plan = plan
        self.device_index = int(device_index)
        self.device = torch.device(device)
        features = base.graph.features()
        if features is None:
            raise ValueError(f"{base.graph.path} has no features to place")
        self._features = features
        self._dev_num = torch.from_numpy(np.asarray(plan.dev_num()[device_index], dtype=np.int64))
        self._buf_pos = torch.from_numpy(np.asarray(plan.buf_pos()[device_index], dtype=np.int64))
        caches = plan.caches()
        self._caches: dict[int, torch.Tensor] = {}
        for source in sorted(set(np.unique(np.asarray(self._dev_num)).tolist()) - {-1}):
            rows = np.take(features, np.asarray(caches[source], dtype=np.int64), axis=0)
            self._caches[source] = torch.from_numpy(rows).to(self._tier_device(source))
        self._pin = self.device.type == "cuda"
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(TIERS, 0)

    def _tier_device(self, source: int) -> torch.device:
        if source == self.device_index or self.device.type != "cuda":
            return self.device
        if source < torch.cuda.device_count():
            return torch.device("cuda", source)
        return torch.device("cpu")

    @property
    def cache_bytes(self) -> dict[str, int]:
        """Bytes held per tier: ``local`` and ``peer`` caches."""
        local = self._caches.get(self.device_index)
        peer = sum(
            t.numel() * t.element_size() for s, t in self._caches.items() if s != self.device_index
        )
        return {"local": 0 if local is None else local.numel() * local.element_size(), "peer": peer}

    def take_counts(self) -> dict[str, float]:
        """Rows served per tier since the last call (``feature_reads_<tier>``), reset."""
        with self._lock:
            counts, self._counts = self._counts, dict.fromkeys(TIERS, 0)
        return {f"feature_reads_{tier}": float(n) for tier, n in counts.items()}

    def gather(self, index: torch.Tensor) -> torch.Tensor:
        """Rows ``index`` of the feature matrix, on :attr:`device`, tier by tier."""
        index = index.detach().to("cpu", torch.long)
        source = self._dev_num[index]
        out = torch.empty(
            (len(index), self._features.shape[1]), dtype=torch.float32, device=self.device
        )
        local = 0
        peer = 0
        for device, cache in self._caches.items():
            hit = (source == device).nonzero().view(-1)
            if len(hit) == 0:
                continue
            rows = cache[self._buf_pos[index[hit]].to(cache.device)]
            out[hit.to(self.device)] = rows.to(self.device, non_blocking=True)
            if device == self.device_index:
                local += len(hit)
            else:
                peer += len(hit)
        miss = (source < 0).nonzero().view(-1)
        if len(miss):
            rows = torch.from_numpy(np.take(self._features, index[miss].numpy(), axis=0))
            if self._pin:
                rows = rows.pin_memory()
            out[miss.to(self.device)] = rows.to(self.device, non_blocking=True)
        with self._lock:
            self._counts["local"] += local
            self._counts["peer"] += peer
            self._counts["host"] += len(miss)
        return out

    # FeatureStore interface ------------------------------------------------------

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor:
        index = attr.index
        if attr.attr_name != "x" or attr.group_name is not None or index is None:
            return self.base._get_tensor(attr)
        if isinstance(index, slice):
            index = torch.arange(self._features.shape[0])[index]
        elif isinstance(index, np.ndarray):
            index = torch.from_numpy(index.astype(np.int64, copy=False))
        elif not isinstance(index, torch.Tensor):
            return self.base._get_tensor(attr)
        return self.gather(index)

    def _put_tensor(self, tensor: Any, attr: TensorAttr) -> bool:
        raise NotImplementedError(f"{type(self).__name__} is read-only")

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        raise NotImplementedError(f"{type(self).__name__} is read-only")

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...]:
        return self.base._get_tensor_size(attr)

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        return self.base.get_all_tensor_attrs()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({str(self.base.graph.path)!r}, plan="
            f"{str(self.plan.plan.path)!r}, device_index={self.device_index}, "
            f"device={self.device})"
        )
