r"""Biased DENSE sampling for the planning features, over ``_C.sample_biased_pyg``.

Two samplers on top of :class:`~gnncore.sampler.DenseSampler` (each node's
neighbours sampled once per batch, hop ``h`` expanding the nodes new at hop
``h - 1``):

* :class:`LocalityAwareSampler` -- locality-aware sampling (LAS, Song & Jiang
  2022 §4, ALGORITHMS.md §4). At hop ``h`` the neighbours in a boost set
  ``Q_h`` weigh ``s`` (``scale``), the others ``1``, and ``k = min(fanout,
  d)`` distinct entries of a row (or its pruning window) of length ``d`` are
  drawn with inclusion probabilities ``π_j`` proportional to the weights,
  capped at 1 (below). Each sampled edge gets the Horvitz--Thompson weight
  ``c_j = q_j / π_j``, ``q_j = k/d``. :func:`boost_sets` computes the sets
  ``Q'_l`` from the cached nodes, :class:`ScaleController` adapts ``s`` per
  epoch (Algorithm 2).
* :class:`PrunedSampler` -- HDR threshold pruning (HyDRA, ALGORITHMS.md §3):
  the neighbour list of a node neither owned by the training partition nor
  replicated is *remote*; expanding it reads only a window of ``θ_h``
  entries at a uniformly random offset (wrapping around) and samples from
  that window. It counts the remote lists read and the ids transferred.

:class:`BiasedDenseSampler` takes both sets of options at once.

**The weighted draw.** With weights ``w_j`` (``s`` boosted, ``1`` otherwise)
the exact inclusion probabilities are ``π_j = min(1, k·w_j / W)``, capped
iteratively: entries whose ``π`` reaches 1 are taken with certainty and the
``k'`` slots left are spread over the others in proportion to their weights,
until no entry is newly capped, so ``Σ_j π_j = k``. The draw is systematic
PPS sampling (Madow): the other entries are shuffled with the node's
generator (so the joint distribution does not depend on the storage order),
their ``π`` laid end to end on ``[0, k')``, and one ``u ~ U[0, 1)`` selects
the entry under each of ``u, u + 1, ..., u + k' - 1``. Each interval is
shorter than 1, so the ``k`` entries are distinct and entry ``j`` is drawn
with probability exactly ``π_j``.

**Edge weights.** ``c_j = q_j / π_j`` with ``q_j = k/d``, the plain sampler's
inclusion probability, so the weighted mean over the ``k`` sampled neighbours
is exactly unbiased for the neighbour mean at every ``s``::

    E[(1/k) Σ_{j∈S} c_j x_j] = (1/k) Σ_j π_j (k/d) / π_j · x_j = (1/d) Σ_j x_j.

The paper's formula (8) (``M`` the right way up: ``M = Σq / Σ w·q``,
``q_new_j = w_j·q_j·M = k·w_j / W``) is the uncapped ``π``: the capped ``π``
equals ``q_new`` until some ``q_new`` would exceed 1, where it takes that
entry with certainty and gives its excess to the others. (The first kernel
drew by Efraimidis--Spirakis keys with the weights ``q / q_new``; its
inclusion probabilities are not ``q_new``, and the weighted mean was off by
0.04 and 0.32 of the features' spread at ``s = 2`` and ``8`` on the test
suite's case.) ``Σ_{j∈S} c_j`` varies from batch to batch; its expectation is
``k``. Weights are ``1`` whenever a node's draw is unweighted: ``s = 1`` (the
draws are then exactly the DENSE sampler's), no boosted or only boosted
entries, or the whole row taken (``d <= fanout`` or ``fanout = -1``).

:class:`LocalityAwareSampler` and :class:`BiasedDenseSampler` append the
``float32[num_edges]`` weights, aligned with ``row``/``col``/``edge``, as
the **last entry of** :obj:`SamplerOutput.metadata` (PyG's loaders read
only the leading entries); :func:`edge_weight_of` fetches them. To attach
them to the batches of a :class:`~torch_geometric.loader.NodeLoader`::

    class WeightedLoader(NodeLoader):
        def filter_fn(self, out):
            data = super().filter_fn(out)
            data.edge_weight = edge_weight_of(out)  # aligned with data.edge_index
            return data

The weights travel with each output, so concurrent batches (threads,
DataLoader workers) never mix them up.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch_geometric.data import GraphStore
from torch_geometric.sampler import EdgeSamplerInput, NegativeSampling, SamplerOutput

from gnncore import _C
from gnncore.sampler.dense import DenseSampler
from gnncore.sampler.neighbor import ArrayLike
from gnncore.sampler.prune import prune_thresholds

#: The current thread's last kernel weights per sampler: ``id(sampler) -> weight``
#: (handed from :meth:`BiasedDenseSampler._sample` to the SamplerOutput it builds).
_LAST_WEIGHT = threading.local()
_COUNTER_LOCK = threading.Lock()


def edge_weight_of(out: SamplerOutput) -> torch.Tensor | None:
    """The ``float32`` edge weights ``c_j`` a biased sampler put in ``out.metadata``
    (its last entry), or ``None`` when ``out`` carries none."""
    meta = out.metadata
    if isinstance(meta, tuple) and meta:
        last = meta[-1]
        if isinstance(last, torch.Tensor) and last.dtype == torch.float32:
            if last.dim() == 1 and last.numel() == out.row.numel():
                return last
    return None


def _node_mask(value: Any, num_nodes: int, name: str) -> np.ndarray:
    """``uint8[N]`` (non-zero = member) from a ``bool``/integer mask of length N."""
    array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
    if array.shape != (num_nodes,):
        raise ValueError(f"{name} must be a mask of shape [{num_nodes}], got {list(array.shape)}")
    if array.dtype != np.bool_ and not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name} must be a bool or integer mask, got dtype {array.dtype}")
    return np.ascontiguousarray(array != 0, dtype=np.uint8)


def _id_or_mask(value: Any, num_nodes: int, name: str) -> np.ndarray:
    """``bool[N]`` from a ``bool[N]`` mask or an array of node ids."""
    array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
    if array.dtype == np.bool_:
        if array.shape != (num_nodes,):
            raise ValueError(f"{name} mask must have shape [{num_nodes}], got {list(array.shape)}")
        return array.copy()
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name} must be a bool mask or integer node ids, got {array.dtype}")
    ids = array.astype(np.int64).ravel()
    if len(ids) and (ids.min() < 0 or ids.max() >= num_nodes):
        raise ValueError(f"{name} ids must be in [0, {num_nodes})")
    mask = np.zeros(num_nodes, dtype=bool)
    mask[ids] = True
    return mask


def _check_scale(scale: float) -> float:
    value = float(scale)
    if not math.isfinite(value) or value < 1.0:
        raise ValueError(f"scale must be finite and >= 1, got {scale!r}")
    return value


class BiasedDenseSampler(DenseSampler):
    r"""DENSE sampling with locality-aware boosting and/or threshold pruning.

    See the module docstring for both schemes and the edge weights.

    Args:
        graph, fanouts, seed, num_threads, **view: As
            :class:`~gnncore.sampler.DenseSampler`.
        boost (Sequence, optional): One entry per hop (hop 0 expands the
            seeds): ``None`` or a ``bool``/integer mask ``[N]`` of the
            neighbours boosted when expanding a node at that hop. ``None``:
            no boosting. (default: :obj:`None`)
        scale (float, optional): The factor ``s >= 1``; settable later
            (:attr:`scale`, :meth:`set_scale`). (default: :obj:`1.0`)
        remote (array, optional): ``bool``/integer mask ``[N]`` of the nodes
            whose neighbour lists are remote. (default: :obj:`None`, none)
        theta (Sequence[int | None], optional): Per hop, the window of a
            remote list (``None`` or ``-1``: the whole list).
            (default: :obj:`None`, no pruning)

    Raises:
        ValueError: Naming the bad argument (``boost``, ``scale``, ``remote``,
            ``theta``, or those of :class:`~gnncore.sampler.DenseSampler`).
    """

    #: Whether outputs carry the edge weights as their metadata's last entry.
    carries_edge_weight = True

    def __init__(
        self,
        graph: GraphStore | tuple[ArrayLike, ArrayLike],
        fanouts: Sequence[int],
        seed: int = 0,
        *,
        boost: Sequence[Any | None] | None = None,
        scale: float = 1.0,
        remote: Any | None = None,
        theta: Sequence[int | None] | None = None,
        num_threads: int = 0,
        **view: Any,
    ) -> None:
        super().__init__(graph, fanouts, seed=seed, num_threads=num_threads, **view)
        self._set_options(boost, scale, remote, theta)

    def _set_options(
        self,
        boost: Sequence[Any | None] | None,
        scale: float,
        remote: Any | None,
        theta: Sequence[int | None] | None,
    ) -> None:
        hops = len(self.fanouts)
        n = self.num_nodes
        self._boost: list[np.ndarray | None] = []
        if boost is not None:
            masks = list(boost)
            if len(masks) != hops:
                raise ValueError(f"boost must have one entry per hop ({hops}), got {len(masks)}")
            self._boost = [
                None if m is None else _node_mask(m, n, f"boost[{h}]") for h, m in enumerate(masks)
            ]
        self._scale = _check_scale(scale)
        self._remote = None if remote is None else _node_mask(remote, n, "remote")
        self._theta: list[int] = []
        if theta is not None:
            given = list(theta)
            if len(given) != hops:
                raise ValueError(f"theta must have one entry per hop ({hops}), got {len(given)}")
            for h, t in enumerate(given):
                value = -1 if t is None else int(t)
                if value < -1:
                    raise ValueError(f"theta[{h}] must be >= 0 (or None / -1), got {t!r}")
                self._theta.append(value)
        self.remote_lists = 0
        self.remote_ids = 0
        self.remote_ids_per_hop = np.zeros(hops, dtype=np.int64)

    # Options ------------------------------------------------------------------

    @property
    def scale(self) -> float:
        """The boost factor ``s >= 1``; may be changed between batches."""
        return self._scale

    @scale.setter
    def scale(self, value: float) -> None:
        self._scale = _check_scale(value)

    def set_scale(self, value: float) -> float:
        """Set :attr:`scale` (e.g. from :meth:`ScaleController.update`); returns it."""
        self.scale = value
        return self._scale

    @property
    def boost(self) -> list[np.ndarray | None]:
        """Per hop, the ``uint8[N]`` boost mask or ``None`` (empty list: no boosting)."""
        return list(self._boost)

    @property
    def thetas(self) -> tuple[int | None, ...]:
        """Per hop, the window of remote lists (``None``: whole list)."""
        if not self._theta:
            return (None,) * len(self.fanouts)
        return tuple(None if t < 0 else t for t in self._theta)

    def reset_counters(self) -> None:
        """Zero :attr:`remote_lists`, :attr:`remote_ids` and :attr:`remote_ids_per_hop`."""
        with _COUNTER_LOCK:
            self.remote_lists = 0
            self.remote_ids = 0
            self.remote_ids_per_hop = np.zeros(len(self.fanouts), dtype=np.int64)

    # Sampling -----------------------------------------------------------------

    def _sample_biased(self, seeds: np.ndarray, batch_seed: int) -> tuple[Any, ...]:
        """The kernel's ``(node, row, col, edge, num_nodes, num_edges, weight,
        remote_lists, remote_ids)``; updates the remote-read counters."""
        out = _C.sample_biased_pyg(
            self.indptr,
            self.indices,
            seeds,
            self.fanouts,
            batch_seed,
            boost=self._boost,
            scale=self._scale,
            remote=self._remote,
            theta=self._theta,
            num_threads=self.num_threads,
        )
        if self._remote is not None:
            per_hop = np.asarray(out[8], dtype=np.int64)
            with _COUNTER_LOCK:
                self.remote_lists += int(sum(out[7]))
                self.remote_ids += int(per_hop.sum())
                self.remote_ids_per_hop = self.remote_ids_per_hop + per_hop
        return tuple(out)

    def _sample(self, seeds: np.ndarray, batch_seed: int) -> tuple[Any, ...]:
        """``(node, row, col, edge, num_nodes, num_edges)`` as every sampler's hook;
        the edge weights wait (per thread) for the SamplerOutput being built."""
        out = self._sample_biased(seeds, batch_seed)
        if self.carries_edge_weight:
            _LAST_WEIGHT.__dict__.setdefault("weights", {})[id(self)] = out[6]
        return out[:6]

    def _with_weight(self, out: SamplerOutput) -> SamplerOutput:
        weight = _LAST_WEIGHT.__dict__.get("weights", {}).pop(id(self), None)
        if not self.carries_edge_weight or weight is None:
            return out
        metadata = out.metadata if isinstance(out.metadata, tuple) else (out.metadata,)
        return dataclasses.replace(out, metadata=(*metadata, torch.from_numpy(weight)))

    def sample_from_nodes(self, index: Any, **kwargs: Any) -> SamplerOutput:
        """As :meth:`NeighborSampler.sample_from_nodes
        <gnncore.sampler.NeighborSampler.sample_from_nodes>`; metadata
        ``(input_id, time, edge_weight)`` when the sampler carries weights."""
        return self._with_weight(super().sample_from_nodes(index, **kwargs))

    def sample_from_edges(
        self, index: EdgeSamplerInput, neg_sampling: NegativeSampling | None = None
    ) -> SamplerOutput:
        """As :meth:`NeighborSampler.sample_from_edges
        <gnncore.sampler.NeighborSampler.sample_from_edges>`, the edge weights
        appended to the metadata when the sampler carries weights."""
        return self._with_weight(super().sample_from_edges(index, neg_sampling))

    def sample_dense(self, index: Any) -> dict[str, np.ndarray]:
        """Not available: the biased kernel builds the PyG layout only."""
        raise NotImplementedError(
            f"{type(self).__name__} samples to the PyG layout only (sample_from_nodes)"
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_nodes={self.num_nodes}, "
            f"num_edges={len(self.indices)}, fanouts={self.fanouts}, seed={self.seed}, "
            f"scale={self._scale}, thetas={self.thetas})"
        )


class LocalityAwareSampler(BiasedDenseSampler):
    r"""Locality-aware DENSE sampling (Song & Jiang 2022 §4).

    When expanding a node at hop ``h``, neighbours in ``boost[h]`` weigh
    ``scale``, the others 1, and are drawn with inclusion probabilities
    proportional to the weights (capped at 1; systematic PPS sampling, see
    the module docstring); ``scale = 1`` or no boost sets draw exactly as
    :class:`~gnncore.sampler.DenseSampler` for the same seed. Outputs carry
    the edge weights ``c_j`` as the last metadata entry (see the module
    docstring, :func:`edge_weight_of`). Build ``boost`` with
    :func:`boost_sets`; adapt ``scale`` per epoch with
    :class:`ScaleController` and :meth:`set_scale`.

    Args:
        graph, fanouts, seed, num_threads, **view: As
            :class:`~gnncore.sampler.DenseSampler`.
        boost (Sequence, optional): Per hop, ``None`` or a mask ``[N]``.
        scale (float, optional): ``s >= 1``. (default: :obj:`1.0`)
    """

    def __init__(
        self,
        graph: GraphStore | tuple[ArrayLike, ArrayLike],
        fanouts: Sequence[int],
        seed: int = 0,
        *,
        boost: Sequence[Any | None] | None = None,
        scale: float = 1.0,
        num_threads: int = 0,
        **view: Any,
    ) -> None:
        super().__init__(
            graph, fanouts, seed=seed, boost=boost, scale=scale, num_threads=num_threads, **view
        )


class PrunedSampler(BiasedDenseSampler):
    r"""DENSE sampling with HDR threshold pruning (HyDRA), for partition ``part``.

    A node's neighbour list is local when ``owner[v] == part`` or ``v`` is
    replicated, remote otherwise. Expanding a remote node at hop ``h`` reads
    a window of ``θ_h`` consecutive entries of its row at a uniformly random
    offset (wrapping around; the whole row when it is not longer) and samples
    ``min(fanout, θ_h)`` of them uniformly; local rows are sampled whole, as
    :class:`~gnncore.sampler.DenseSampler` does. Every entry keeps the plain
    sampler's marginal inclusion probability ``min(1, f/d)`` (the offset is
    uniform); only joint draws change. ``θ_h`` defaults to ``ceil(α·avg_degree
    + β·fanout_h)`` (``avg_degree = E / N`` of the sampled adjacency); a hop
    with fanout ``-1`` is not pruned. No edge weights are added to the outputs.

    Counters (cumulative over this instance's batches in this process, updated
    under a lock; :meth:`reset_counters`): :attr:`remote_lists` (remote
    lists expanded), :attr:`remote_ids` (neighbour ids read from them,
    ``min(deg, θ_h)`` each) and :attr:`remote_ids_per_hop`.

    Args:
        graph, fanouts, seed, num_threads, **view: As
            :class:`~gnncore.sampler.DenseSampler`.
        owner (array): ``int[N]``: the partition storing each node's list.
        part (int): The partition being trained.
        replicated (array, optional): The replicated nodes ``V_r``, a
            ``bool[N]`` mask or node ids. (default: :obj:`None`)
        theta (int or Sequence[int], optional): θ for every hop or per hop.
            (default: :obj:`None`, from ``prune_alpha`` / ``prune_beta``)
        prune_alpha, prune_beta (float, optional): α and β. (default: 1, 1)
    """

    carries_edge_weight = False

    def __init__(
        self,
        graph: GraphStore | tuple[ArrayLike, ArrayLike],
        fanouts: Sequence[int],
        seed: int = 0,
        *,
        owner: Any,
        part: int,
        replicated: Any | None = None,
        theta: int | Sequence[int] | None = None,
        prune_alpha: float = 1.0,
        prune_beta: float = 1.0,
        num_threads: int = 0,
        **view: Any,
    ) -> None:
        super().__init__(graph, fanouts, seed=seed, num_threads=num_threads, **view)
        n = self.num_nodes
        labels = owner.detach().cpu().numpy() if isinstance(owner, torch.Tensor) else owner
        labels = np.asarray(labels)
        if labels.shape != (n,) or (labels.size and not np.issubdtype(labels.dtype, np.integer)):
            raise ValueError(
                f"owner must be an integer array of shape [{n}], got "
                f"{labels.dtype} {list(labels.shape)}"
            )
        if isinstance(part, bool) or not isinstance(part, int | np.integer) or part < 0:
            raise ValueError(f"part must be a partition id >= 0, got {part!r}")
        for name, value in (("prune_alpha", prune_alpha), ("prune_beta", prune_beta)):
            if not math.isfinite(float(value)) or float(value) < 0:
                raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
        if theta is not None and not isinstance(theta, int | np.integer):
            theta = [int(t) for t in theta]
            if len(theta) != len(self.fanouts):
                raise ValueError(
                    f"theta must be an int or one per hop ({len(self.fanouts)}), got {len(theta)}"
                )
        avg_degree = len(self.indices) / n if n else 0.0
        try:
            thetas = prune_thresholds(
                self.fanouts,
                avg_degree,
                theta,
                prune_alpha=float(prune_alpha),
                prune_beta=float(prune_beta),
            )
        except ValueError as err:
            raise ValueError(f"theta: {err}") from None
        self.owner = labels.astype(np.int64, copy=False)
        self.part = int(part)
        self.replicated = _id_or_mask(
            np.zeros(0, dtype=np.int64) if replicated is None else replicated, n, "replicated"
        )
        self._set_options(None, 1.0, (self.owner != self.part) & ~self.replicated, thetas)

    @property
    def remote_mask(self) -> np.ndarray:
        """``bool[N]``: the nodes whose lists are read remotely (windowed)."""
        assert self._remote is not None
        return self._remote.astype(bool)


def boost_path_counts(
    indptr: np.ndarray,
    indices: np.ndarray,
    cached: np.ndarray,
    layers: int,
    *,
    self_loops: bool = True,
) -> list[np.ndarray]:
    r"""``[v_1, ..., v_layers]`` (``float64[N]``): path counts into the cached set ``B``.

    ``v_1`` is the indicator of ``B``; ``v_{l+1}[i] = Σ_{j ∈ row(i)} v_l[j]``
    (``+ v_l[i]`` with ``self_loops``), i.e. ``v_{l+1} = (A + I) v_l`` with
    ``A[i, j] = 1`` when ``j`` is in ``i``'s row -- the direction the sampler
    reads: a node whose row holds many ``B`` nodes (more paths *into* ``B``)
    scores high. The paper writes ``v_{l+1} = v_l A`` for its symmetric ``A``.
    Its example (ALGORITHMS.md §4: undirected edges {0–1, 1–2, 1–3, 2–3, 2–4,
    2–5}, ``B = {1, 2, 3, 4}``) gives ``v_2 = [1, 3, 4, 3, 2, 1]`` only with
    the self-loops (without them ``[1, 2, 3, 2, 1, 1]``), as the same fixture's
    access frequencies do.

    ``cached``: a ``bool[N]`` mask or integer node ids.
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices)
    n = len(indptr) - 1
    if int(layers) != layers or layers < 1:
        raise ValueError(f"layers must be an int >= 1, got {layers!r}")
    member = _id_or_mask(cached, n, "cached")
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    v = member.astype(np.float64)
    out = [v]
    for _ in range(int(layers) - 1):
        nxt = np.zeros(n, dtype=np.float64)
        if len(indices):
            nxt += np.bincount(rows, weights=v[indices], minlength=n)
        if self_loops:
            nxt = nxt + v
        v = nxt
        out.append(v)
    return out


def boost_sets(
    indptr: np.ndarray,
    indices: np.ndarray,
    cached: np.ndarray,
    layers: int,
    size: int,
    *,
    self_loops: bool = True,
) -> list[np.ndarray]:
    r"""The boost sets ``Q'_l`` as ``bool[N]`` masks, one per hop in the sampler's order.

    ``Q'_1 = B`` (the ``cached`` nodes, mask or ids, whole); for ``l > 1``
    ``Q'_l`` holds the ``size`` nodes with the largest ``v_l`` of
    :func:`boost_path_counts` (ties: smaller id; nodes with ``v_l = 0``, no
    path into ``B``, are left out). Hop ``h`` of an ``L = layers``-hop sampler
    boosts with ``Q'_{L-h}``: the last hop (``L - 1``), whose neighbours feed
    the input layer, uses ``B``; hop ``L - 2`` uses ``Q'_2``; and so on. The
    result is ``[Q'_L, ..., Q'_2, Q'_1]``, ready for
    :class:`LocalityAwareSampler`'s ``boost``.
    """
    if int(size) != size or size < 0:
        raise ValueError(f"size must be an int >= 0, got {size!r}")
    counts = boost_path_counts(indptr, indices, cached, layers, self_loops=self_loops)
    masks = [counts[0] > 0]
    for v in counts[1:]:
        order = np.argsort(-v, kind="stable")[: int(size)]
        order = order[v[order] > 0]
        mask = np.zeros(len(v), dtype=bool)
        mask[order] = True
        masks.append(mask)
    return masks[::-1]


class ScaleController:
    r"""Adapts the LAS scale ``s`` once per epoch (Song & Jiang, Algorithm 2).

    Starts at ``s = 1``, ``pre = 1``, not fixed. :meth:`update` with ``r``,
    the share of data loading in the previous epoch's time::

        if not fixed:
            if s >= maxs:                 fixed = True
            elif r > ut:                  pre = s; s = 2 s
            elif r < lt and s != 1:       s = (s + pre) / 2
            else:                         fixed = True

    Args:
        lt, ut (float): Lower and upper thresholds. (default: 0.15, 0.2)
        maxs (float): The largest ``s`` (MAXS). (default: 8)
    """

    def __init__(self, lt: float = 0.15, ut: float = 0.2, maxs: float = 8.0) -> None:
        lt, ut, maxs = float(lt), float(ut), float(maxs)
        if not (math.isfinite(lt) and math.isfinite(ut) and 0.0 <= lt <= ut):
            raise ValueError(f"lt and ut must satisfy 0 <= lt <= ut, got lt={lt}, ut={ut}")
        if not math.isfinite(maxs) or maxs < 1.0:
            raise ValueError(f"maxs must be finite and >= 1, got {maxs}")
        self.lt, self.ut, self.maxs = lt, ut, maxs
        self.s = 1.0
        self.pre = 1.0
        self.fixed = False

    @property
    def scale(self) -> float:
        return self.s

    def update(self, r: float) -> float:
        """One step of Algorithm 2 with the loading ratio ``r``; returns the new ``s``."""
        r = float(r)
        if not math.isfinite(r):
            raise ValueError(f"r must be a finite ratio, got {r}")
        if not self.fixed:
            if self.s >= self.maxs:
                self.fixed = True
            elif r > self.ut:
                self.pre = self.s
                self.s = self.s * 2
            elif r < self.lt and self.s != 1:
                self.s = (self.s + self.pre) / 2
            else:
                self.fixed = True
        return self.s

    def state_dict(self) -> dict[str, Any]:
        return {
            "s": self.s,
            "pre": self.pre,
            "fixed": self.fixed,
            "lt": self.lt,
            "ut": self.ut,
            "maxs": self.maxs,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        restored = ScaleController(state["lt"], state["ut"], state["maxs"])
        self.lt, self.ut, self.maxs = restored.lt, restored.ut, restored.maxs
        self.s = float(state["s"])
        self.pre = float(state["pre"])
        self.fixed = bool(state["fixed"])

    def __repr__(self) -> str:
        return (
            f"ScaleController(s={self.s}, pre={self.pre}, fixed={self.fixed}, "
            f"lt={self.lt}, ut={self.ut}, maxs={self.maxs})"
        )
