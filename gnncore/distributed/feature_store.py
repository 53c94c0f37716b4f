r"""A PyG :class:`~torch_geometric.data.FeatureStore` spread over the ranks of a
``torch.distributed`` process group (DistDGL's distributed KV store).

Assumptions of this store:

* The graph is homogeneous (``group_name=None``); ``"x"`` (float32 ``[N, F]``)
  and ``"y"`` (int64 ``[N]``) are present when the rank data holds them.
* Indices are *global* (relabelled) node ids (a tensor, array, list, int or a
  bounded slice). Rank ``r`` holds the rows of its core range
  (:class:`~gnncore.distributed.rank_data.RankData`), memory-mapped; rows
  owned elsewhere are fetched from their owner.
* One gather (:meth:`~torch_geometric.data.FeatureStore.multi_get_tensor`
  with any number of attributes, or one
  :meth:`~torch_geometric.data.FeatureStore.get_tensor`) is one batched
  exchange: the distinct remote ids are sent to their owners and the rows come
  back, in three ``all_to_all_single`` collectives (request counts and
  attribute masks, ids, row bytes) whatever the ids, so a rank with nothing to
  ask still takes part. **Every rank of the group must therefore make the
  same number of gathers** (the training loop gives every rank the same
  number of batches); a rank that gathers alone waits for its peers until the
  process group's timeout.
* Rows of nodes in ``replica`` (e.g. an HDR plan's replicated high-degree
  nodes) are served from this rank's copy, never fetched, in the gathers
  whose attributes the replica holds.
* Read-only: :meth:`put_tensor` and :meth:`remove_tensor` raise.

:attr:`stats` counts, per rank, the rows served locally and fetched, and the
bytes of rows and ids exchanged.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch_geometric.data import FeatureStore, TensorAttr

from gnncore.distributed.collectives import all_gather_fields, comm_device
from gnncore.distributed.rank_data import NODE_ATTRS, RankData

#: The fixed order of attributes in a packed row and in the request mask.
_ORDER = tuple(NODE_ATTRS)
_DTYPES = {"x": torch.float32, "y": torch.int64}


@dataclass
class ExchangeStats:
    """Counters of one rank's gathers (rows are distinct ids per gather).

    Attributes:
        gathers (int): Exchanges taken part in.
        requested (int): Ids asked for, summed over the attributes of each
            gather, repeats included.
        local_rows (int): Distinct ids served from this rank (core or replica).
        replica_rows (int): Of ``local_rows``, those served from the replica.
        remote_rows (int): Distinct ids fetched from other ranks.
        remote_bytes (int): Row bytes received from other ranks.
        served_rows (int): Rows sent to other ranks.
        served_bytes (int): Row bytes sent to other ranks.
        id_bytes (int): Request bytes sent (ids, counts and masks).
        seconds (float): Wall time spent in the collectives.
    """

    gathers: int = 0
    requested: int = 0
    local_rows: int = 0
    replica_rows: int = 0
    remote_rows: int = 0
    remote_bytes: int = 0
    served_rows: int = 0
    served_bytes: int = 0
    id_bytes: int = 0
    seconds: float = 0.0

    @property
    def remote_share(self) -> float:
        """Fetched distinct rows / all distinct rows asked for (0 when none)."""
        total = self.local_rows + self.remote_rows
        return self.remote_rows / total if total else 0.0

    def as_dict(self) -> dict[str, float]:
        return {**asdict(self), "remote_share": self.remote_share}

    @staticmethod
    def typed(row: Mapping[str, float]) -> dict[str, Any]:
        """``row`` (the fields as floats, as they travel) with each field's own
        type back: ``int`` for the counters."""
        return {
            f.name: int(row[f.name]) if f.type == "int" else row[f.name]
            for f in fields(ExchangeStats)
        }


@dataclass(frozen=True)
class Replica:
    """Rows this rank keeps of nodes it does not own.

    Attributes:
        ids (Tensor): Sorted distinct global ids, int64.
        tensors (Mapping[str, Tensor]): Attribute -> rows in ``ids`` order.
    """

    ids: torch.Tensor
    tensors: Mapping[str, torch.Tensor]

    @classmethod
    def of(cls, data: RankData) -> Replica | None:
        """The replicated rows ``data`` holds (HDR: ``replica_*.npy``, written by
        ``write_rank_data(..., replication=PLAN)``), ``None`` without them."""
        held = data.replica_rows()
        if held is None:
            return None
        ids, rows = held
        return cls(torch.from_numpy(ids), {k: torch.from_numpy(v) for k, v in rows.items()})


def _row_bytes(name: str, num_features: int) -> int:
    return 4 * num_features if name == "x" else 8


def _mask_of(names: list[str]) -> int:
    return sum(1 << _ORDER.index(n) for n in names)


def _names_of(mask: int) -> list[str]:
    return [n for i, n in enumerate(_ORDER) if mask >> i & 1]


def _check_replica(replica: Replica) -> None:
    ids = replica.ids
    if ids.dtype != torch.int64 or ids.dim() != 1:
        raise ValueError(f"replica ids must be 1-d int64, got {ids.dtype}{tuple(ids.shape)}")
    if len(ids) > 1 and not bool(torch.all(ids[1:] > ids[:-1])):
        raise ValueError("replica ids must be sorted and distinct")
    for name, rows in replica.tensors.items():
        if name not in _ORDER or len(rows) != len(ids):
            raise ValueError(f"replica holds {len(rows)} {name!r} rows for {len(ids)} ids")


class DistFeatureStore(FeatureStore):
    r"""Node features and labels of a partitioned graph, one rank's share local.

    Args:
        data (RankData): This rank's data; its rank must be the process group
            rank and its part count the group's size.
        group (ProcessGroup, optional): The group to exchange over
            (default: the default group, which must be initialised).
        replica (Replica, optional): Rows of other ranks' nodes kept here.
    """

    def __init__(self, data: RankData, group: Any = None, replica: Replica | None = None) -> None:
        super().__init__()
        if not dist.is_initialized():
            raise RuntimeError("DistFeatureStore needs an initialised torch.distributed group")
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        if world != data.parts or rank != data.rank:
            raise ValueError(
                f"rank data of rank {data.rank} of {data.parts} opened by rank {rank} "
                f"of a group of {world}"
            )
        self.data = data
        self.group = group
        self.stats = ExchangeStats()
        self._stats_lock = threading.Lock()
        self._offsets = torch.from_numpy(np.asarray(data.offsets))
        self._arrays = {
            attr: data.array(stem) for attr, stem in NODE_ATTRS.items() if data.has(stem)
        }
        self._device = comm_device(group)
        if replica is not None:
            _check_replica(replica)
        self.replica = replica

    def on_group(self, group: Any) -> DistFeatureStore:
        """This store exchanging over ``group`` (same ranks; its collectives on the
        device ``group``'s backend needs): a view
        sharing its arrays, replica and :class:`ExchangeStats`, for the
        collectives of another thread
        (:class:`~gnncore.distributed.source.ahead.AheadBatches`)."""
        view = copy.copy(self)
        view.group = group
        view._device = comm_device(group)
        return view

    @property
    def attr_names(self) -> list[str]:
        """The attributes held, in the fixed order."""
        return [n for n in _ORDER if n in self._arrays]

    # Gathering ---------------------------------------------------------------

    def _ids(self, index: Any) -> torch.Tensor:
        if index is None:
            raise ValueError(
                f"{type(self).__name__} serves rows by global id; a whole tensor is not gathered"
            )
        if isinstance(index, slice):
            index = range(*index.indices(self.data.num_nodes))
        ids = torch.as_tensor(np.asarray(index) if not isinstance(index, torch.Tensor) else index)
        ids = ids.detach().to("cpu", torch.int64).reshape(-1)
        if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= self.data.num_nodes):
            raise IndexError(f"node ids must lie in [0, {self.data.num_nodes})")
        return ids

    def _local_rows(self, name: str, ids: torch.Tensor) -> torch.Tensor:
        """Rows of core nodes given by global id."""
        local = (ids - self.data.core_range[0]).numpy()
        return torch.from_numpy(np.take(self._arrays[name], local, axis=0))

    def _pack(self, names: list[str], ids: torch.Tensor) -> torch.Tensor:
        """The rows of ``ids`` (core nodes) for ``names``, as one byte row each."""
        local = (ids - self.data.core_range[0]).numpy()
        f = self.data.num_features
        parts = [
            np.ascontiguousarray(np.take(self._arrays[n], local, axis=0))
            .reshape(len(local), f if n == "x" else 1)
            .view(np.uint8)
            for n in names
        ]
        if not parts:
            return torch.zeros(0, dtype=torch.uint8)
        return torch.from_numpy(np.concatenate(parts, axis=1).reshape(-1))

    def _unpack(self, names: list[str], raw: torch.Tensor, rows: int) -> dict[str, torch.Tensor]:
        """Split received byte rows (``names`` packed side by side) into tensors."""
        f = self.data.num_features
        widths = [_row_bytes(n, f) for n in names]
        table = raw.numpy().reshape(rows, sum(widths))
        out, start = {}, 0
        for n, width in zip(names, widths):
            # A copy, not ascontiguousarray: that returns an empty slice as it is, with
            # the row stride of the packed table, which need not be a multiple of 8.
            block = table[:, start : start + width].copy()
            values = block.view(np.float32 if n == "x" else np.int64)
            out[n] = torch.from_numpy(values.reshape(rows, f) if n == "x" else values[:, 0])
            start += width
        return out

    def gather(self, names: list[str], ids: torch.Tensor) -> dict[str, torch.Tensor]:
        """Rows of the distinct, sorted global ``ids`` for each attribute in
        ``names``: one exchange with every other rank (a collective call)."""
        started = time.perf_counter()
        world, me = self.data.parts, self.data.rank
        owner = torch.searchsorted(self._offsets, ids, right=True) - 1
        local = owner == me
        in_replica = torch.zeros_like(local)
        replica = self.replica
        if replica is not None and len(replica.ids) and all(n in replica.tensors for n in names):
            pos = torch.searchsorted(replica.ids, ids).clamp(max=len(replica.ids) - 1)
            in_replica = (replica.ids[pos] == ids) & ~local
        remote = ~(local | in_replica)
        send_ids = ids[remote]  # sorted, so grouped by owner in rank order
        send_counts = torch.bincount(owner[remote], minlength=world)
        mask = _mask_of(names)
        header = torch.stack([send_counts, torch.full_like(send_counts, mask)], dim=1)
        peer_header = self._exchange(header.reshape(-1), [2] * world, [2] * world).reshape(world, 2)
        recv_counts = peer_header[:, 0]
        asked = self._exchange(send_ids, send_counts.tolist(), recv_counts.tolist())
        # Serve each peer the attributes it asked for, in rank order.
        chunks, out_sizes, start = [], [], 0
        for peer in range(world):
            count = int(recv_counts[peer])
            peer_names = _names_of(int(peer_header[peer, 1]))
            chunk = self._pack(peer_names, asked[start : start + count])
            chunks.append(chunk)
            out_sizes.append(len(chunk))
            start += count
        served = torch.cat(chunks) if chunks else torch.zeros(0, dtype=torch.uint8)
        width = sum(_row_bytes(n, self.data.num_features) for n in names)
        in_sizes = (send_counts * width).tolist()
        raw = self._exchange(served, out_sizes, in_sizes, dtype=torch.uint8)
        fetched = self._unpack(names, raw, len(send_ids))
        out = {}
        for n in names:
            rows = torch.empty((len(ids), *self._row_shape(n)), dtype=_DTYPES[n])
            rows[local] = self._local_rows(n, ids[local])
            if replica is not None and bool(in_replica.any()):
                pos = torch.searchsorted(replica.ids, ids[in_replica])
                rows[in_replica] = replica.tensors[n][pos].to(_DTYPES[n])
            rows[remote] = fetched[n]
            out[n] = rows
        with self._stats_lock:  # views of other threads share the stats
            s = self.stats
            s.gathers += 1
            s.local_rows += int(local.sum()) + int(in_replica.sum())
            s.replica_rows += int(in_replica.sum())
            s.remote_rows += len(send_ids)
            s.remote_bytes += int(sum(in_sizes))
            s.served_rows += int(recv_counts.sum()) - int(recv_counts[me])
            s.served_bytes += int(served.numel()) - int(out_sizes[me])
            s.id_bytes += 8 * (len(send_ids) + 2 * world)
            s.seconds += time.perf_counter() - started
        return out

    def _row_shape(self, name: str) -> tuple[int, ...]:
        return (self.data.num_features,) if name == "x" else ()

    def _exchange(
        self,
        tensor: torch.Tensor,
        send_sizes: list[int],
        recv_sizes: list[int],
        dtype: torch.dtype = torch.int64,
    ) -> torch.Tensor:
        """One ``all_to_all_single`` of a 1-d tensor with the given split sizes."""
        out = torch.empty(sum(recv_sizes), dtype=dtype, device=self._device)
        dist.all_to_all_single(
            out, tensor.to(self._device), recv_sizes, send_sizes, group=self.group
        )
        return out.cpu()

    # FeatureStore hooks ---------------------------------------------------------

    def _check(self, attr: TensorAttr) -> str:
        if attr.group_name is not None or attr.attr_name not in self._arrays:
            raise KeyError(
                f"{type(self).__name__} holds node attributes {self.attr_names} of a "
                f"homogeneous graph; got {attr.group_name!r}/{attr.attr_name!r}"
            )
        return str(attr.attr_name)

    def _multi_get_tensor(self, attrs: list[TensorAttr]) -> list[torch.Tensor]:
        names = [self._check(a) for a in attrs]
        indices = [self._ids(a.index) for a in attrs]
        every = torch.cat(indices) if indices else torch.zeros(0, dtype=torch.int64)
        if self.data.parts == 1:
            out = self._read_alone(names, indices, every)
        else:
            ids, inverse = torch.unique(every, sorted=True, return_inverse=True)
            with self._stats_lock:
                self.stats.requested += len(every)
            rows = self.gather([n for n in _ORDER if n in names], ids)
            out, start = [], 0
            for name, index in zip(names, indices):
                out.append(rows[name][inverse[start : start + len(index)]])
                start += len(index)
        scalar = [not isinstance(a.index, (torch.Tensor, np.ndarray, list, slice)) for a in attrs]
        return [t[0] if s else t for t, s in zip(out, scalar)]

    def _read_alone(
        self, names: list[str], indices: list[torch.Tensor], every: torch.Tensor
    ) -> list[torch.Tensor]:
        """A single rank owns every row: each attribute's rows read in its
        index's order, with no de-duplication and no collective. The stats
        count the distinct rows, as :meth:`gather` does (one index shared by
        every attribute, the usual batch, needs no ``unique`` for that)."""
        started = time.perf_counter()
        out = [self._local_rows(n, i).to(_DTYPES[n]) for n, i in zip(names, indices)]
        first = indices[0] if indices else every
        shared = all(len(i) == len(first) and torch.equal(i, first) for i in indices)
        distinct = len(first) if shared else len(torch.unique(every))
        with self._stats_lock:
            s = self.stats
            s.requested += len(every)
            s.gathers += 1
            s.local_rows += distinct
            s.seconds += time.perf_counter() - started
        return out

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor:
        return self._multi_get_tensor([attr])[0]

    def _put_tensor(self, tensor: Any, attr: TensorAttr) -> bool:
        raise NotImplementedError(f"{type(self).__name__} is read-only")

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        raise NotImplementedError(f"{type(self).__name__} is read-only")

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...]:
        name = self._check(attr)
        if attr.index is None:
            return (self.data.num_nodes, *self._row_shape(name))
        return (len(self._ids(attr.index)), *self._row_shape(name))

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        return [self._tensor_attr_cls(None, name, None) for name in self.attr_names]

    def all_stats(self) -> list[dict[str, float]]:
        """Every rank's :attr:`stats` as :meth:`ExchangeStats.as_dict` (a
        collective: all ranks must call it); the counters travel as one float64
        row per rank (:func:`~gnncore.distributed.exchange.all_gather_fields`)."""
        names = [f.name for f in fields(ExchangeStats)]
        rows = all_gather_fields(asdict(self.stats), names, self.group)
        return [ExchangeStats(**ExchangeStats.typed(row)).as_dict() for row in rows]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.data!r}, attrs={self.attr_names})"


__all__ = ["DistFeatureStore", "ExchangeStats", "Replica"]
