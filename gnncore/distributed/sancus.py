r"""SANCUS: full-graph GCN training across ranks with staleness-bounded exchanges.

``--mode sancus`` (ALGORITHMS.md §8; Liang et al., §4.3). Rank ``r`` holds the
rows of ``Â = D^{-1/2}(A + I)D^{-1/2}`` of the nodes it owns (the in-edges of
its core, normalised with the *global* degrees) and computes those nodes'
embeddings ``H_r`` at every layer; the weights are replicated. Layer ``l``
needs, besides ``H_r``, the rows of ``H^{(l)}`` of the remote in-neighbours of
the core: this rank's *halo rows* (what DistDGL fetches; the whole block of a
peer is never needed, so only these rows travel and are counted).

* **Setup** (one exchange each): every rank tells the owners which of their
  rows it reads, gets their in-degrees (for ``Â``) and their feature rows.
  The features never change, so layer 0 reads them from this copy for good.
* **Forward, layer** ``l >= 1``: each owner decides per peer whether to send
  the rows that peer reads (:mod:`~gnncore.train.node.staleness`); the
  rows sent travel in one :func:`~gnncore.distributed.collectives.exchange` and
  replace the receiver's cached copy, the others are read from that cache. The
  exchange's row counts tell each receiver which owners sent (a count is all
  or nothing), so no other agreement is needed and every rank calls the same
  collectives in the same order. ``epoch-adaptive`` adds one exchange of
  request flags before it (the receivers decide).
* **Backward**: gradients are never skipped (Algorithm 3). The gradient of
  each halo row, cached or fresh, goes back to its owner in one exchange per
  layer (:class:`_HaloRows`) and is added to the gradient of the owner's
  current rows: a cached row stands in for its owner's current one, as in
  the forward pass. The weight gradients are averaged by
  :class:`~torch.nn.parallel.DistributedDataParallel` on a second process
  group, so its all-reduce never interleaves with the halo exchanges. Each
  rank's loss is the mean over its own training nodes, its gradient scaled
  by ``W n_r / T`` (:class:`_ScaleGrad`), so the averaged gradient is that of
  the mean over all ``T`` training nodes: with ``always`` the ranks compute
  the single-process full-graph gradient.
* **Dropout** applies to each rank's input rows, its cached copies included;
  what is sent is the activation before dropout, so a cached copy stays
  comparable with the owner's current rows (the ``variation`` bound).
* **Evaluation** is exact: one fresh exchange per layer, counted apart
  (``eval_bytes``).

:class:`~gnncore.distributed.source.sancus.SancusSource` is the batch source
of the shared training loop (:func:`~gnncore.train.fit` of a :class:`~gnncore.train.NodeTask`): one
batch per epoch, the whole core, with the loop's checkpoints, early stopping
and logging; the model is the loop's PyG :class:`~torch_geometric.nn.models.GCN`,
whose layers :class:`SancusGCN` applies to the distributed rows. Byte counts
are what this rank sends: rows times row bytes.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from gnncore.distributed.collectives import exchange
from gnncore.distributed.rank_data import RankData
from gnncore.train.node.config import ConfigError
from gnncore.train.node.staleness import NEVER, Staleness, relative_change

# Setup ------------------------------------------------------------------------


@dataclass
class HaloPlan:
    """What one rank exchanges with its peers, and its rows of ``Â``.

    Attributes:
        num_core (int): Nodes this rank owns (``n``).
        halo_ids (ndarray): Global ids of the remote in-neighbours of the core,
            sorted (``m``): the order of the halo rows (grouped by owner).
        recv_counts (list[int]): Halo rows owned by each rank.
        send_rows (list[Tensor]): Local ids of the core rows each rank reads.
        adjacency (Tensor): ``[n, n + m]`` sparse CSR, columns core then halo.
        halo_x (Tensor): ``[m, F]`` feature rows of the halo.
        setup_bytes (int): Bytes this rank sent to set up (ids, degrees, features).
    """

    num_core: int
    halo_ids: np.ndarray
    recv_counts: list[int]
    send_rows: list[torch.Tensor]
    adjacency: torch.Tensor
    halo_x: torch.Tensor
    setup_bytes: int

    @property
    def send_counts(self) -> list[int]:
        return [len(r) for r in self.send_rows]


def _nbytes(parts: list[torch.Tensor]) -> int:
    return sum(p.numel() * p.element_size() for p in parts)


def build_halo_plan(data: RankData, features: torch.Tensor, group: Any = None) -> HaloPlan:
    """This rank's :class:`HaloPlan` (a collective: three exchanges).

    ``Â`` is PyG's ``gcn_norm``: self-loops already in the graph are dropped
    and one of weight 1 added per node, the degree is the in-degree plus one,
    and edge ``j -> i`` weighs ``d_j^{-1/2} d_i^{-1/2}``.
    """
    world = dist.get_world_size(group)
    lo, hi = data.core_range
    n = hi - lo
    indptr = np.asarray(data.indptr, dtype=np.int64)
    src = np.asarray(data.indices, dtype=np.int64)
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    keep = src != dst + lo
    src, dst = src[keep], dst[keep]
    degree = np.bincount(dst, minlength=n).astype(np.int64) + 1
    remote = (src < lo) | (src >= hi)
    halo_ids = np.unique(src[remote])
    recv_counts = np.bincount(data.owner(halo_ids), minlength=world).astype(np.int64).tolist()

    asked = list(torch.split(torch.from_numpy(halo_ids), recv_counts))
    requests = exchange(asked, group)
    send_rows = []
    for peer, ids in enumerate(requests):
        if len(ids) and (int(ids.min()) < lo or int(ids.max()) >= hi):
            raise RuntimeError(f"rank {peer} asked rank {data.rank} for rows it does not own")
        send_rows.append(ids - lo)
    degree_t = torch.from_numpy(degree)
    sent_degrees = [degree_t[rows] for rows in send_rows]
    halo_degree = torch.cat(exchange(sent_degrees, group)).numpy()
    sent_features = [features[rows] for rows in send_rows]
    halo_x = torch.cat(exchange(sent_features, group))

    inv_sqrt = np.concatenate([degree, halo_degree]).astype(np.float64) ** -0.5
    cols = np.where(remote, n + np.searchsorted(halo_ids, src), src - lo)
    core = np.arange(n, dtype=np.int64)
    rows_all = np.concatenate([dst, core])
    cols_all = np.concatenate([cols, core])
    values = (inv_sqrt[cols_all] * inv_sqrt[rows_all]).astype(np.float32)
    with warnings.catch_warnings():  # "sparse CSR support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        adjacency = (
            torch.sparse_coo_tensor(
                torch.from_numpy(np.stack([rows_all, cols_all])),
                torch.from_numpy(values),
                (n, n + len(halo_ids)),
                check_invariants=True,
            )
            .coalesce()
            .to_sparse_csr()
        )
    setup = _nbytes(asked) + _nbytes(sent_degrees) + _nbytes(sent_features)
    return HaloPlan(n, halo_ids, recv_counts, send_rows, adjacency, halo_x, setup)


# Exchanges ----------------------------------------------------------------------


@dataclass
class SancusCounters:
    """What one rank sent, summed over a span of epochs.

    ``sends`` and ``skips`` count (layer, peer) pairs whose rows were sent or
    left to the peer's cache; ``broadcast_bytes`` are the embedding rows sent
    in training forward passes and ``always_bytes`` what the ``always`` policy
    would have sent; ``grad_bytes`` the gradients sent back; ``eval_bytes``
    the rows of evaluation passes; ``control_bytes`` the row counts and
    request flags of the exchanges; ``exchange_s`` the seconds in them.
    """

    sends: int = 0
    skips: int = 0
    broadcast_rows: int = 0
    broadcast_bytes: int = 0
    always_bytes: int = 0
    grad_bytes: int = 0
    eval_bytes: int = 0
    control_bytes: int = 0
    exchange_s: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items()}


@dataclass
class _LayerCache:
    """One layer's cached halo rows and the epochs of the pairs' last exchange."""

    rows: torch.Tensor | None
    last_received: list[int]
    last_sent: list[int]
    #: ``variation``: the rows last sent to each peer (their reference ``H̃``).
    sent: list[torch.Tensor | None] = field(default_factory=list)


class HaloExchange:
    """The halo exchanges of one rank: training (staleness-bounded, cached),
    gradients (always) and evaluation (always fresh); see the module docstring.

    Args:
        plan (HaloPlan): What goes to and comes from each peer.
        staleness (Staleness): When training rows are sent again.
        device (torch.device): Where the rows live.
        group (ProcessGroup, optional): The group of the exchanges.
    """

    def __init__(
        self, plan: HaloPlan, staleness: Staleness, device: torch.device, group: Any = None
    ) -> None:
        self.plan = plan
        self.staleness = staleness
        self.device = device
        self.group = group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        #: The epoch being trained (1-based), set by the source.
        self.epoch = 1
        self.counters = SancusCounters()
        self._layers: dict[int, _LayerCache] = {}
        self._send_rows = [r.to(device) for r in plan.send_rows]
        self._offsets = np.concatenate([[0], np.cumsum(plan.recv_counts)]).tolist()

    def _exchange(self, parts: list[torch.Tensor]) -> list[torch.Tensor]:
        started = time.perf_counter()
        received = exchange(parts, self.group)
        self.counters.exchange_s += time.perf_counter() - started
        self.counters.control_bytes += 8 * (self.world - 1)
        return [r.to(self.device) for r in received]

    def _layer(self, layer: int) -> _LayerCache:
        if layer not in self._layers:
            w = self.world
            self._layers[layer] = _LayerCache(None, [NEVER] * w, [NEVER] * w, [None] * w)
        return self._layers[layer]

    def _decide(self, layer: int, own: torch.Tensor) -> list[bool]:
        """Whether this rank sends each peer its rows of ``layer`` this epoch."""
        cache = self._layer(layer)
        policy, epoch = self.staleness, self.epoch
        if policy.receiver_driven:
            asks = [
                self.plan.recv_counts[q] > 0 and policy.receiver_asks(epoch, cache.last_received[q])
                for q in range(self.world)
            ]
            flags = self._exchange([torch.tensor([int(a)], dtype=torch.int8) for a in asks])
            self.counters.control_bytes += self.world - 1
            return [bool(f.any()) and len(r) > 0 for f, r in zip(flags, self._send_rows)]
        decisions = []
        for peer, rows in enumerate(self._send_rows):
            if not len(rows):
                decisions.append(False)
                continue
            change = None
            reference = cache.sent[peer]
            if policy.needs_change and reference is not None:
                current = own[rows]
                change = relative_change(
                    float((current - reference).pow(2).sum()), float(reference.pow(2).sum())
                )
            decisions.append(policy.owner_sends(epoch, cache.last_sent[peer], change))
        return decisions

    def training_rows(self, layer: int, own: torch.Tensor) -> torch.Tensor:
        """The halo rows of ``layer`` for a training forward pass: fresh from the
        owners that send this epoch, cached from the others; their gradients
        go back to the owners in the backward pass."""
        values = own.detach()
        cache = self._layer(layer)
        sends = self._decide(layer, values)
        width = values.shape[1]
        empty = values.new_empty((0, width))
        parts = [values[rows] if send else empty for rows, send in zip(self._send_rows, sends)]
        received = self._exchange(parts)
        c = self.counters
        for peer, (rows, send) in enumerate(zip(self._send_rows, sends)):
            if not len(rows):
                continue
            c.always_bytes += len(rows) * width * values.element_size()
            if not send:
                c.skips += 1
                continue
            c.sends += 1
            c.broadcast_rows += len(rows)
            c.broadcast_bytes += len(rows) * width * values.element_size()
            cache.last_sent[peer] = self.epoch
            if self.staleness.needs_change:
                cache.sent[peer] = parts[peer].clone()
        if cache.rows is None:
            cache.rows = values.new_zeros((len(self.plan.halo_ids), width))
        for owner, got in enumerate(received):
            want = self.plan.recv_counts[owner]
            if len(got) == want and want > 0:
                cache.rows[self._offsets[owner] : self._offsets[owner + 1]] = got
                cache.last_received[owner] = self.epoch
            elif len(got):
                raise RuntimeError(f"rank {owner} sent {len(got)} halo rows, {want} expected")
            elif want and cache.last_received[owner] == NEVER:
                raise RuntimeError(f"rank {owner} skipped rows rank {self.rank} never received")
        return _HaloRows.apply(own, cache.rows.clone(), self)

    def fresh_rows(self, own: torch.Tensor) -> torch.Tensor:
        """Every halo row fresh from its owner (evaluation; no gradient)."""
        parts = [own[rows] for rows in self._send_rows]
        self.counters.eval_bytes += _nbytes(parts)
        return torch.cat(self._exchange(parts))

    def return_gradients(self, grad_halo: torch.Tensor, num_core: int) -> torch.Tensor:
        """Send each owner the gradient of its halo rows; return the gradient of
        this rank's rows that its peers read (a collective)."""
        parts = list(torch.split(grad_halo.contiguous(), self.plan.recv_counts))
        self.counters.grad_bytes += _nbytes(parts)
        received = self._exchange(parts)
        grad_own = grad_halo.new_zeros((num_core, grad_halo.shape[1]))
        for rows, grads in zip(self._send_rows, received):
            if len(rows):
                grad_own.index_add_(0, rows, grads)
        return grad_own


class _HaloRows(torch.autograd.Function):
    """Identity on the halo rows whose backward pass sends their gradients to
    the owners and returns the gradient of this rank's own rows."""

    @staticmethod
    def forward(ctx: Any, own: torch.Tensor, halo: torch.Tensor, halo_exchange: Any) -> Any:
        ctx.halo_exchange = halo_exchange
        ctx.num_core = own.shape[0]
        return halo

    @staticmethod
    def backward(ctx: Any, grad_halo: torch.Tensor) -> Any:
        grad_own = ctx.halo_exchange.return_gradients(grad_halo, ctx.num_core)
        return grad_own, None, None


class _ScaleGrad(torch.autograd.Function):
    """Identity whose backward pass scales the gradient by ``factor``."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, factor: float) -> Any:
        ctx.factor = factor
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        return grad * ctx.factor, None


# The model ----------------------------------------------------------------------


class SancusGCN(torch.nn.Module):
    """The layers of a PyG :class:`~torch_geometric.nn.models.GCN` applied to one
    rank's rows: ``H_r^{(l+1)} = act(Â_r [H_r; H_halo] W + b)``, the halo rows
    through ``halo_exchange`` (the parameters are the GCN's own: its state
    dict is unchanged).

    ``forward(x)`` takes the core's feature rows (``edge_index`` and the hop
    counts the loop passes are ignored: the graph is ``Â_r``) and returns the
    logits of :attr:`rows` (set by the source before each batch), their
    gradient scaled by :attr:`grad_scale` in training.
    """

    def __init__(
        self, gcn: torch.nn.Module, plan: HaloPlan, halo_exchange: HaloExchange, halo_x: Any
    ) -> None:
        super().__init__()
        # lazy: torch_geometric.nn takes seconds to import; only SANCUS runs need it
        from torch_geometric.nn import GCNConv
        from torch_geometric.nn.models import GCN

        if not isinstance(gcn, GCN) or not all(isinstance(c, GCNConv) for c in gcn.convs):
            raise ConfigError(f"mode 'sancus' trains a PyG GCN, got {type(gcn).__name__}")
        if getattr(gcn, "jk_mode", None) is not None or not all(
            isinstance(n, torch.nn.Identity) for n in gcn.norms
        ):
            raise ConfigError("mode 'sancus' trains a GCN without jumping knowledge or norms")
        self.gcn = gcn
        self.num_layers = gcn.num_layers
        self.halo_exchange = halo_exchange
        self.adjacency = plan.adjacency
        self.halo_x = halo_x
        self.rows = torch.arange(plan.num_core)
        self.grad_scale = 1.0

    def forward(self, x: torch.Tensor, edge_index: Any = None, **_: Any) -> torch.Tensor:
        gcn = self.gcn
        # The loop switches the GCN (not this wrapper) between train and eval.
        train = gcn.training and torch.is_grad_enabled()
        own, halo = x, self.halo_x
        for i, conv in enumerate(gcn.convs):
            if i > 0:
                halo = (
                    self.halo_exchange.training_rows(i, own)
                    if train
                    else self.halo_exchange.fresh_rows(own)
                )
            inputs = torch.cat([own, halo])
            if i > 0:
                inputs = torch.nn.functional.dropout(inputs, gcn.dropout.p, train)
            out = self.adjacency @ conv.lin(inputs)
            if conv.bias is not None:
                out = out + conv.bias
            if i < self.num_layers - 1 and gcn.act is not None:
                out = gcn.act(out)
            own = out
        logits = own[self.rows]
        return _ScaleGrad.apply(logits, self.grad_scale) if train else logits


# The batch source -----------------------------------------------------------------


__all__ = [
    "HaloExchange",
    "HaloPlan",
    "SancusCounters",
    "SancusGCN",
    "build_halo_plan",
]
