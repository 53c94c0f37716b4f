r"""Uniform multi-hop neighbour sampling for PyG loaders, over ``_C.sample_neighbors``.

The sampler returns indices only (``node``, ``row``, ``col``, ``edge``); the
loader (:class:`~torch_geometric.loader.NodeLoader`, or
:class:`~torch_geometric.loader.LinkLoader` for link prediction, with
negatives drawn here) joins features from a
:class:`~torch_geometric.data.FeatureStore`. The CSC adjacency is obtained
once, in the constructor; the per-batch path converts the seeds and makes one
call into native code, which releases the GIL.

Reproducibility: batch ``k`` sampled by one process uses a seed derived from
``(seed, k)``; inside a DataLoader worker the worker's own seed (drawn by the
loader from its generator, so different every epoch and reproducible when the
loader is given a seeded ``generator``) is mixed in as well. Batches prepared
in threads (:mod:`gnncore.train.core.prefetch`) keep the plain-iteration seeds: the
dispatching thread reserves counters in batch order
(:meth:`NeighborSampler.reserve_batch_seeds`) and the preparing thread draws
from its reservation (:meth:`NeighborSampler.use_batch_seeds`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch_geometric.data import GraphStore
from torch_geometric.sampler import (
    BaseSampler,
    EdgeSamplerInput,
    NegativeSampling,
    NodeSamplerInput,
    SamplerOutput,
)

from gnncore import _C
from gnncore.sampler.negative import NegativeDraw
from gnncore.sampler.orient import orient_adjacency
from gnncore.typing import require_csrc

ArrayLike = np.ndarray | torch.Tensor
#: Mixed into a batch's seed for its negative draws (independent of the neighbour draws).
_NEGATIVE_STREAM = 0x4E454753

#: Batch counters reserved for the batch the current thread prepares:
#: ``id(sampler) -> [next counter, end]`` (see :meth:`NeighborSampler.use_batch_seeds`).
_RESERVED = threading.local()
_COUNTER_LOCK = threading.Lock()


def _to_numpy(array: ArrayLike) -> np.ndarray:
    if isinstance(array, torch.Tensor):
        array = array.detach().cpu().numpy()
    return np.ascontiguousarray(array)  # no copy for C-ordered arrays and memory maps


def _sampler_output(sampled: tuple[Any, ...], metadata: Any) -> SamplerOutput:
    """Wrap a kernel's ``(node, row, col, edge, num_nodes, num_edges)``."""
    node, row, col, edge, num_nodes, num_edges = sampled
    return SamplerOutput(
        node=torch.from_numpy(node),
        row=torch.from_numpy(row),
        col=torch.from_numpy(col),
        edge=torch.from_numpy(edge),
        num_sampled_nodes=list(num_nodes),
        num_sampled_edges=list(num_edges),
        metadata=metadata,
    )


class NeighborSampler(BaseSampler):
    r"""Samples up to ``fanouts[h]`` neighbours (in-neighbours by default) per node
    at hop ``h``.

    Seeds come first in :obj:`SamplerOutput.node`; ``row`` holds the local id of
    the sampled neighbour (message source), ``col`` the local id of the node it
    was sampled for (message target), and ``edge`` the position in the CSC
    ``row``/``indices`` array (map it through :attr:`edge_permutation` when set).
    Edges are emitted hop by hop, so ``num_sampled_nodes`` /
    ``num_sampled_edges`` can drive PyG's ``trim_to_layer``.

    Args:
        graph (GraphStore or tuple): A homogeneous
            :class:`~torch_geometric.data.GraphStore` (its CSC view is taken
            once), or ``(indptr, indices)`` arrays: ``indptr`` int64 ``[N+1]``
            and ``indices`` int32/int64 ``[E]``, row ``v`` listing the sources
            of the edges into ``v`` (PyG's ``colptr`` / ``row``).
        fanouts (Sequence[int]): Neighbours per node at each hop; ``-1`` takes
            all of them.
        seed (int, optional): Base seed of the random choices. (default: :obj:`0`)
        replace (bool, optional): Sample with replacement. (default: :obj:`False`)
        num_threads (int, optional): OpenMP threads of the kernel; ``0`` uses
            the OpenMP default. Results do not depend on it. (default: :obj:`0`)
        direction (str, optional): Neighbours from ``"in"``-edges (the
            adjacency as given), ``"out"``-edges or ``"both"`` (each neighbour
            once). (default: :obj:`"in"`)
        edge_type (array, optional): ``[E]`` type of each CSC entry, e.g. the
            relation of a knowledge-graph edge. (default: :obj:`None`)
        edge_types (Sequence[int], optional): Sample only edges of these types.
            (default: :obj:`None`, all edges)
        huge_pages (bool, optional): Copy the (oriented) CSR once into memory
            backed by 2 MiB transparent huge pages (``_C.huge_page_copy``), so
            the random reads of a large graph rarely miss the TLB; costs one
            copy of ``indptr`` and ``indices`` in memory. Memory-mapped arrays
            gain most: file mappings get no huge pages. Results do not depend
            on it. (default: :obj:`False`)

    With ``direction`` other than ``"in"`` or with ``edge_types``, the view's
    adjacency is built once here, and :attr:`edge_permutation` maps ``edge``
    back to the graph store's edge order (or to positions in the given
    ``indices``).
    """

    def __init__(
        self,
        graph: GraphStore | tuple[ArrayLike, ArrayLike],
        fanouts: Sequence[int],
        seed: int = 0,
        replace: bool = False,
        num_threads: int = 0,
        direction: str = "in",
        edge_type: ArrayLike | None = None,
        edge_types: Sequence[int] | None = None,
        huge_pages: bool = False,
    ) -> None:
        require_csrc()
        perm = None
        if isinstance(graph, GraphStore):
            attrs = graph.get_all_edge_attrs()
            if len(attrs) != 1 or attrs[0].edge_type is not None:
                raise ValueError(
                    "NeighborSampler needs a homogeneous GraphStore (one edge "
                    f"attribute with edge_type=None); got {attrs}"
                )
            row, colptr, perm = graph.csc()
            indptr, indices = _to_numpy(colptr), _to_numpy(row)
        else:
            indptr, indices = (_to_numpy(a) for a in graph)
        if indptr.dtype != np.int64:
            indptr = indptr.astype(np.int64)
        if indices.dtype not in (np.int32, np.int64):
            indices = indices.astype(np.int64)
        if indptr.ndim != 1 or indices.ndim != 1 or len(indptr) < 1:
            raise ValueError("indptr and indices must be 1-d arrays, indptr of length N + 1")
        if int(indptr[-1]) != len(indices):
            raise ValueError(
                f"indptr ends at {int(indptr[-1])} but indices has {len(indices)} entries"
            )
        indptr, indices, position = orient_adjacency(
            indptr,
            indices,
            direction,
            None if edge_type is None else _to_numpy(edge_type),
            edge_types,
        )
        if position is not None:
            view = torch.from_numpy(position)
            perm = view if perm is None else perm[view]
        if huge_pages:
            indptr, indices = _C.huge_page_copy(indptr), _C.huge_page_copy(indices)
        fanouts = [int(f) for f in fanouts]
        if not fanouts or any(f < -1 for f in fanouts):
            raise ValueError(
                f"fanouts must be a non-empty list of ints >= 0, or -1 for all "
                f"neighbours; got {fanouts}"
            )
        self.indptr = indptr
        self.indices = indices
        self.fanouts = fanouts
        self.seed = int(seed)
        self.replace = bool(replace)
        self.num_threads = int(num_threads)
        self._perm = perm
        self._num_batches = 0
        self._negative_draws: dict[int, tuple[torch.Tensor | None, NegativeDraw]] = {}

    @property
    def num_nodes(self) -> int:
        return len(self.indptr) - 1

    @property
    def num_batches(self) -> int:
        """Mini-batches this instance (in this process) has sampled so far."""
        return self._num_batches

    @property
    def edge_permutation(self) -> torch.Tensor | None:
        """Maps ``edge`` (a CSC position) to the GraphStore's own edge order, if
        the store needed converting to CSC; ``None`` otherwise."""
        return self._perm

    def _batch_seed(self) -> int:
        reserved = getattr(_RESERVED, "slots", {}).get(id(self))
        if reserved is not None:  # inside use_batch_seeds: take the next reserved counter
            if reserved[0] >= reserved[1]:
                raise RuntimeError(
                    f"{type(self).__name__} drew more batch seeds than were "
                    "reserved for this batch (reserve_batch_seeds(count))"
                )
            counter = reserved[0]
            reserved[0] += 1
        else:
            with _COUNTER_LOCK:
                counter = self._num_batches
                self._num_batches += 1
        entropy = [self.seed & 0xFFFFFFFFFFFFFFFF, counter]
        worker = torch.utils.data.get_worker_info()
        if worker is not None:
            entropy.append(worker.seed & 0xFFFFFFFFFFFFFFFF)
        return int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0])

    def reserve_batch_seeds(self, count: int = 1) -> range:
        """Take the next ``count`` batch counters now, as ``count`` plain calls would.

        For a prefetcher that prepares batches in threads: it reserves in batch
        order and hands each reservation to :meth:`use_batch_seeds` in the
        thread that prepares the batch, so every batch gets the seed of plain,
        sequential iteration whatever order the threads run in.
        :attr:`num_batches` counts reserved counters as drawn.
        """
        with _COUNTER_LOCK:
            start = self._num_batches
            self._num_batches += int(count)
        return range(start, start + int(count))

    def release_batch_seeds(self, counters: range) -> bool:
        """Give back ``counters`` (from :meth:`reserve_batch_seeds`) of a batch that
        was never delivered, if they are the newest reservation; ``True`` if so."""
        with _COUNTER_LOCK:
            if self._num_batches != counters.stop:
                return False
            self._num_batches = counters.start
            return True

    @contextmanager
    def use_batch_seeds(self, counters: range) -> Iterator[None]:
        """Within the block, this thread's batches take their seeds from ``counters``;
        drawing more than ``len(counters)`` raises :class:`RuntimeError`."""
        slots = _RESERVED.__dict__.setdefault("slots", {})
        previous = slots.get(id(self))
        slots[id(self)] = [counters.start, counters.stop]
        try:
            yield
        finally:
            if previous is None:
                del slots[id(self)]
            else:
                slots[id(self)] = previous

    # Node-based sampling -----------------------------------------------------

    def _check_homogeneous(self, index: Any, time_name: str) -> None:
        """Reject heterogeneous input and temporal input (its ``time_name``)."""
        name = type(self).__name__
        if index.input_type is not None:
            raise ValueError(
                f"{name} samples homogeneous graphs; got input type {index.input_type!r}"
            )
        if index.time is not None:
            raise ValueError(f"{name} does not do temporal sampling ({time_name})")

    def _seeds(self, index: NodeSamplerInput) -> np.ndarray:
        """The batch's seed ids; rejects heterogeneous and temporal input."""
        self._check_homogeneous(index, "input_time")
        return np.ascontiguousarray(index.node.detach().cpu().numpy(), dtype=np.int64)

    def _sample(self, seeds: np.ndarray, batch_seed: int) -> tuple[Any, ...]:
        """One call into the kernel: ``(node, row, col, edge, num_nodes, num_edges)``.

        Subclasses change the sampling scheme by overriding this hook only.
        """
        return _C.sample_neighbors(
            self.indptr,
            self.indices,
            seeds,
            self.fanouts,
            batch_seed,
            replace=self.replace,
            num_threads=self.num_threads,
        )

    def sample_from_nodes(self, index: NodeSamplerInput, **kwargs: Any) -> SamplerOutput:
        """Sample the multi-hop neighbourhood of ``index.node``.

        Raises:
            ValueError: For heterogeneous or temporal input, or a batch that
                repeats a seed node (seeds must be unique within a batch so
                that the first ``batch_size`` nodes are the seeds).
        """
        seeds = self._seeds(index)
        sampled = self._sample(seeds, self._batch_seed())
        if sampled[4][0] != len(seeds):
            raise ValueError(
                f"the batch repeats a seed node ({len(seeds)} seeds, "
                f"{sampled[4][0]} unique); pass unique input nodes"
            )
        return _sampler_output(sampled, (index.input_id, index.time))

    # Edge-based sampling -----------------------------------------------------

    def sample_from_edges(
        self,
        index: EdgeSamplerInput,
        neg_sampling: NegativeSampling | None = None,
    ) -> SamplerOutput:
        r"""Sample the multi-hop neighbourhood of a batch of edges' endpoints
        (for :class:`~torch_geometric.loader.LinkLoader`), drawing negatives.

        Follows PyG's non-disjoint ``edge_sample``: the seeds are the unique
        endpoints of the positive edges and the negatives (sorted), and
        :obj:`SamplerOutput.metadata` is what ``LinkLoader`` expects --
        ``(input_id, edge_label_index, edge_label, None)`` in ``"binary"``
        mode (negatives labelled 0), ``(input_id, src_index, dst_pos_index,
        dst_neg_index, None)`` in ``"triplet"`` mode, all indices local to
        :obj:`SamplerOutput.node`. Negatives are drawn uniformly, or in
        proportion to ``neg_sampling.src_weight`` / ``dst_weight`` (e.g.
        degrees), with replacement, from a generator seeded per batch like
        the neighbour draws (so a resumed run continues the same stream).

        Raises:
            ValueError: For heterogeneous or temporal input.
        """
        self._check_homogeneous(index, "edge_label_time")
        src = index.row.detach().cpu().to(torch.int64)
        dst = index.col.detach().cpu().to(torch.int64)
        label = index.label
        num_pos = src.numel()
        batch_seed = self._batch_seed()
        rng = np.random.default_rng([batch_seed, _NEGATIVE_STREAM])
        num_neg = 0
        if neg_sampling is not None:
            num_neg = math.ceil(num_pos * neg_sampling.amount)
            if neg_sampling.is_binary():
                src = torch.cat([src, self._negatives(rng, num_neg, neg_sampling.src_weight)])
                dst = torch.cat([dst, self._negatives(rng, num_neg, neg_sampling.dst_weight)])
                if label is None:
                    label = torch.ones(num_pos)
                label = torch.cat([label, label.new_zeros((num_neg, *label.shape[1:]))])
            else:
                if label is not None:
                    raise ValueError("'triplet' negative sampling takes no edge labels")
                dst = torch.cat([dst, self._negatives(rng, num_neg, neg_sampling.dst_weight)])
        endpoints = torch.cat([src, dst])
        seeds, inverse = torch.unique(endpoints, return_inverse=True)
        sampled = self._sample(np.ascontiguousarray(seeds.numpy()), batch_seed)
        if neg_sampling is None or neg_sampling.is_binary():
            metadata: tuple[Any, ...] = (index.input_id, inverse.view(2, -1), label, None)
        else:
            dst_neg = inverse[2 * num_pos :]
            if num_pos:
                dst_neg = dst_neg.view(num_pos, -1).squeeze(-1)
            metadata = (
                index.input_id,
                inverse[:num_pos],
                inverse[num_pos : 2 * num_pos],
                dst_neg,
                None,
            )
        return _sampler_output(sampled, metadata)

    def _negatives(
        self, rng: np.random.Generator, count: int, weight: torch.Tensor | None
    ) -> torch.Tensor:
        """``count`` negative node ids, uniform or weighted by ``weight``."""
        cached = self._negative_draws.get(id(weight))
        if cached is None or cached[0] is not weight:
            cached = (weight, NegativeDraw(self.num_nodes, weight))
            self._negative_draws[id(weight)] = cached
        return torch.from_numpy(cached[1](rng, count))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_nodes={self.num_nodes}, "
            f"num_edges={len(self.indices)}, fanouts={self.fanouts}, seed={self.seed}, "
            f"replace={self.replace})"
        )
