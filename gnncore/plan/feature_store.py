r"""A PyG :class:`~torch_geometric.data.FeatureStore` that serves node features
through a placement plan (:mod:`gnncore.plan.placement`).

For the plan's device ``d`` the store serves three tiers of the feature matrix:

* **local** -- the rows of ``d``'s own cache, copied once onto the training
  device (the GPU on CUDA, so a hit costs no transfer; on a CPU run the copy
  is a CPU tensor, so the lookup logic runs, and is tested, everywhere);
* **peer** -- rows ``d`` reads from another device's cache (a peer of its
  group caches ``v``, ``d`` does not). One process cannot reach another
  process's GPU memory, so these rows are gathered from host memory here and
  counted as peer reads, as the plan would serve them; multi-GPU peer tiers
  come with distributed training;
* **host** -- everything else, gathered from the memory-mapped features
  (pinned when the cache is on a GPU) and copied to the device.

The store looks nodes up by binary search in the plan's sorted per-device
tables (O(cache) memory, never O(N)): ``d``'s own cached ids and rows, and
the sorted ids its peers cache.

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


def _find(sorted_ids: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(position, found)`` of each ``index`` in ``sorted_ids`` (binary search)."""
    if not len(sorted_ids):
        return torch.zeros_like(index), torch.zeros(len(index), dtype=torch.bool)
    pos = torch.searchsorted(sorted_ids, index).clamp_(max=len(sorted_ids) - 1)
    return pos, sorted_ids[pos] == index


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
        self.device = self._resolve(device)
        features = base.graph.features()
        if features is None:
            raise ValueError(f"{base.graph.path} has no features to place")
        self._features = features
        # The local tier holds the rows in the plan's cache order (caches[d]); a
        # node found at position i of the sorted ids is at row cached_rows[d, i].
        self._own_ids = torch.from_numpy(np.array(plan.cached_ids()[device_index], np.int64))
        self._own_rows = torch.from_numpy(np.array(plan.cached_rows()[device_index], np.int64))
        self._peer_ids = torch.from_numpy(plan.peer_ids(device_index).astype(np.int64))
        own = np.asarray(plan.caches()[device_index], dtype=np.int64)
        self._local = torch.from_numpy(np.take(features, own, axis=0)).to(self.device)
        self._pin = self.device.type == "cuda"
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(TIERS, 0)

    @staticmethod
    def _resolve(device: torch.device | str) -> torch.device:
        """``cuda`` without an index means the current CUDA device (prefetch
        threads would otherwise gather onto device 0)."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            return torch.device("cuda", torch.cuda.current_device())
        return device

    @property
    def cache_bytes(self) -> int:
        """Bytes of the local cache tier."""
        return self._local.numel() * self._local.element_size()

    def take_counts(self) -> dict[str, float]:
        """Rows served per tier since the last call (``feature_reads_<tier>``), reset."""
        with self._lock:
            counts, self._counts = self._counts, dict.fromkeys(TIERS, 0)
        return {f"feature_reads_{tier}": float(n) for tier, n in counts.items()}

    def gather(self, index: torch.Tensor) -> torch.Tensor:
        """Rows ``index`` of the feature matrix, on :attr:`device`, tier by tier."""
        index = index.detach().to("cpu", torch.long)
        out = torch.empty(
            (len(index), self._features.shape[1]), dtype=torch.float32, device=self.device
        )
        pos, hit = _find(self._own_ids, index)
        local = hit.nonzero().view(-1)
        if len(local):
            rows = self._own_rows[pos[local]]
            out[local.to(self.device)] = self._local[rows.to(self.device)]
        other = (~hit).nonzero().view(-1)
        peer = 0
        if len(other):
            rows = torch.from_numpy(np.take(self._features, index[other].numpy(), axis=0))
            if self._pin:
                rows = rows.pin_memory()
            out[other.to(self.device)] = rows.to(self.device, non_blocking=self._pin)
            peer = int(_find(self._peer_ids, index[other])[1].sum())
        with self._lock:
            self._counts["local"] += len(local)
            self._counts["peer"] += peer
            self._counts["host"] += len(other) - peer
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
