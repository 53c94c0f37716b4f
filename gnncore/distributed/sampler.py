r"""Cross-partition multi-hop neighbour sampling (DistDGL; ALGORITHMS.md §8).

Every rank holds the in-edges of its core nodes only
(:class:`~gnncore.distributed.rank_data.RankData`). A mini-batch is sampled
hop by hop: the frontier's nodes are sent to their owners, each owner draws
up to ``fanouts[h]`` in-neighbours of each with the project's C++ kernel
(``_C.sample_neighbors``, one hop, uniform without replacement unless
``replace``) and sends back ``(target, source, edge id)`` triples: one
request/response exchange per hop (:func:`~gnncore.distributed.exchange.exchange`,
four collectives), whatever the frontier, so **every rank must sample the same
number of batches** (a rank with nothing to ask still serves its peers).
A node's neighbours are drawn by its owner just as a single process would draw
them, so the sampled subgraphs have the distribution of
:class:`~gnncore.sampler.neighbor.NeighborSampler` on the whole graph.

The owner samples from a partition-local CSC: core nodes are ``0 .. n_r - 1``
and halo nodes ``n_r .. n_r + H_r - 1`` (rows without entries), so the kernel
never sees an id of the whole graph; results are mapped back to global ids.
A single rank holds every node, so it draws the whole neighbourhood in one
call of the kernel, with no collective.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch_geometric.data import Data
from torch_geometric.sampler import BaseSampler, NodeSamplerInput, SamplerOutput

from gnncore.distributed.collectives import comm_device, exchange
from gnncore.distributed.rank_data import RankData
from gnncore.typing import require_csrc


def sampled_data(out: SamplerOutput, **fields: Any) -> Data:
    """The mini-batch of a sampled subgraph ``out``: ``edge_index`` (local
    ids), ``n_id``, ``e_id`` and the per-hop counts, with ``fields`` (``x``,
    ``y``, ``batch_size``, ...) beside them."""
    return Data(
        edge_index=torch.stack([out.row, out.col]),
        n_id=out.node,
        e_id=out.edge,
        num_sampled_nodes=list(out.num_sampled_nodes),
        num_sampled_edges=list(out.num_sampled_edges),
        **fields,
    )


class DistNeighborSampler(BaseSampler):
    r"""Samples up to ``fanouts[h]`` in-neighbours per node at hop ``h`` across ranks.

    :obj:`SamplerOutput.node` holds *global* (relabelled) ids, seeds first,
    then the nodes new at each hop in first-seen order; ``row`` / ``col`` are
    local indices into it (message source / target); ``edge`` holds each
    sampled edge's id in the graph's canonical edge table (``edges.parquet``
    row; both directions of an undirected edge share it).

    Args:
        data (RankData): This rank's data (rank and size must match the group).
        fanouts (Sequence[int]): Neighbours per node at each hop; ``-1``: all.
        seed (int): Base seed; batch ``k`` of every rank derives its draws from
            ``(seed, k, hop, requesting rank)``. (default: 0)
        replace (bool): Sample with replacement. (default: ``False``)
        group (ProcessGroup, optional): The group (default: the default group).
    """

    def __init__(
        self,
        data: RankData,
        fanouts: Sequence[int],
        seed: int = 0,
        replace: bool = False,
        group: Any = None,
    ) -> None:
        require_csrc()
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        if world != data.parts or rank != data.rank:
            raise ValueError(
                f"rank data of rank {data.rank} of {data.parts} opened by rank {rank} "
                f"of a group of {world}"
            )
        self.fanouts = [int(f) for f in fanouts]
        if not self.fanouts or any(f < -1 for f in self.fanouts):
            raise ValueError(f"fanouts must be ints >= 0 or -1, got {list(fanouts)}")
        self.data = data
        self.seed = int(seed)
        self.replace = bool(replace)
        self.group = group
        self._device = comm_device(group)
        lo, hi = data.core_range
        halo = np.asarray(data.halo, dtype=np.int64)
        indices = np.asarray(data.indices, dtype=np.int64)
        core = (indices >= lo) & (indices < hi)
        local = indices - lo
        local[~core] = (hi - lo) + np.searchsorted(halo, indices[~core])
        self._indptr = np.concatenate(
            [np.asarray(data.indptr), np.full(len(halo), data.indptr[-1], dtype=np.int64)]
        )
        self._indices = local
        self._global = np.concatenate([np.arange(lo, hi, dtype=np.int64), halo])
        self._edge_ids = np.asarray(data.array("edge_ids"), dtype=np.int64)
        self._num_batches = 0
        self._lock = threading.Lock()
        #: Whose counter :meth:`reserve` advances (views share their origin's).
        self._counter_of = self
        #: Frontier nodes sent to other ranks / served for them, summed over batches.
        self.remote_requests = 0
        self.served_requests = 0

    @property
    def num_batches(self) -> int:
        return self._num_batches

    def on_group(self, group: Any) -> DistNeighborSampler:
        """This sampler exchanging over ``group`` (same ranks): a view sharing its
        arrays, batch counter and lock, for the collectives of another thread
        (:class:`~gnncore.distributed.source.ahead.AheadBatches`)."""
        view = copy.copy(self)
        view.group = group
        view._device = comm_device(group)
        view._counter_of = self
        return view

    def reserve(self, count: int) -> int:
        """Take ``count`` batch counters at once and return the first: batches
        sampled with ``counter=first + i`` draw what the ``i``-th of ``count``
        calls without a counter would have drawn."""
        owner = self._counter_of
        with owner._lock:
            first = owner._num_batches
            owner._num_batches += int(count)
        return first

    # Serving ---------------------------------------------------------------------

    def _serve(self, asked: torch.Tensor, fanout: int, seed: int) -> torch.Tensor:
        """``int64[m, 3]`` (target, source, edge id) sampled for the distinct
        global ids ``asked`` (all owned here)."""
        # lazy: the compiled extension may be absent; __init__ refused that (require_csrc)
        from gnncore import _C

        if not len(asked):
            return torch.zeros((0, 3), dtype=torch.int64)
        seeds = np.ascontiguousarray(self.data.to_local(asked.numpy()))
        node, row, col, edge, _, _ = _C.sample_neighbors(
            self._indptr, self._indices, seeds, [fanout], seed, replace=self.replace
        )
        triples = np.stack(
            [self._global[node[col]], self._global[node[row]], self._edge_ids[edge]], axis=1
        )
        return torch.from_numpy(triples)

    # Node-based sampling ---------------------------------------------------------

    def _seed_of(self, counter: int, hop: int, requester: int) -> int:
        entropy = [self.seed & 0xFFFFFFFFFFFFFFFF, counter, hop, requester]
        return int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0])

    def sample_from_nodes(self, index: NodeSamplerInput, **kwargs: Any) -> SamplerOutput:
        """Sample the multi-hop neighbourhood of ``index.node`` (global ids,
        distinct); a collective call (see the module docstring). ``counter``
        (keyword, optional): the batch counter to draw with, one taken by
        :meth:`reserve` (default: the next one)."""
        if index.input_type is not None or index.time is not None:
            raise ValueError(f"{type(self).__name__} samples homogeneous, non-temporal graphs")
        seeds = index.node.detach().cpu().to(torch.int64).numpy()
        if len(np.unique(seeds)) != len(seeds):
            raise ValueError("the batch repeats a seed node; pass distinct input nodes")
        counter = kwargs.get("counter")
        if counter is None:
            counter = self.reserve(1)
        if self.data.parts == 1:
            return self._sample_alone(seeds, counter, index)
        world, me = self.data.parts, self.data.rank
        nodes = [seeds]
        known = np.sort(seeds)
        frontier = seeds
        rows, cols, edges = [], [], []
        num_nodes, num_edges = [len(seeds)], []
        remote = served = 0
        for hop, fanout in enumerate(self.fanouts):
            owner = self.data.owner(frontier)
            order = np.argsort(owner, kind="stable")
            counts = np.bincount(owner, minlength=world)
            remote += int(len(frontier) - counts[me])
            asked = exchange(
                list(torch.split(torch.from_numpy(frontier[order]), counts.tolist())),
                self.group,
                self._device,
            )
            served += int(sum(len(a) for i, a in enumerate(asked) if i != me))
            answers = [
                self._serve(asked[q], fanout, self._seed_of(counter, hop, q)) for q in range(world)
            ]
            got = torch.cat(exchange(answers, self.group, self._device)).numpy()
            target, source = got[:, 0], got[:, 1]
            fresh = np.setdiff1d(source, known)  # sorted; keep first-seen order below
            first = np.unique(source, return_index=True)
            seen_at = first[1][np.searchsorted(first[0], fresh)]
            fresh = fresh[np.argsort(seen_at)] if len(fresh) else fresh
            nodes.append(fresh)
            known = np.union1d(known, fresh)
            all_nodes = np.concatenate(nodes)
            by_id = np.argsort(all_nodes)
            rows.append(by_id[np.searchsorted(all_nodes, source, sorter=by_id)])
            cols.append(by_id[np.searchsorted(all_nodes, target, sorter=by_id)])
            edges.append(got[:, 2])
            num_nodes.append(len(fresh))
            num_edges.append(len(got))
            frontier = fresh
        owner = self._counter_of
        with owner._lock:
            owner.remote_requests += remote
            owner.served_requests += served
        return SamplerOutput(
            node=torch.from_numpy(np.concatenate(nodes)),
            row=torch.from_numpy(np.concatenate(rows)),
            col=torch.from_numpy(np.concatenate(cols)),
            edge=torch.from_numpy(np.concatenate(edges)),
            num_sampled_nodes=num_nodes,
            num_sampled_edges=num_edges,
            metadata=(index.input_id, index.time),
        )

    def _sample_alone(
        self, seeds: np.ndarray, counter: int, index: NodeSamplerInput
    ) -> SamplerOutput:
        """One rank holds every node: the whole multi-hop draw in one call of the
        C++ kernel (seeds first, new nodes in first-seen order, as above), with
        no collective; drawn from ``(seed, counter)``."""
        # lazy: the compiled extension may be absent; __init__ refused that (require_csrc)
        from gnncore import _C

        node, row, col, edge, num_nodes, num_edges = _C.sample_neighbors(
            self._indptr,
            self._indices,
            np.ascontiguousarray(self.data.to_local(seeds)),
            self.fanouts,
            self._seed_of(counter, 0, 0),
            replace=self.replace,
        )
        return SamplerOutput(
            node=torch.from_numpy(self._global[node]),
            row=torch.from_numpy(row),
            col=torch.from_numpy(col),
            edge=torch.from_numpy(self._edge_ids[edge]),
            num_sampled_nodes=list(num_nodes),
            num_sampled_edges=list(num_edges),
            metadata=(index.input_id, index.time),
        )

    def sample_from_edges(self, index: Any, neg_sampling: Any = None) -> SamplerOutput:
        """Not a PyG edge sampler: link prediction across ranks builds its
        triplet batches in :meth:`~gnncore.distributed.source.link.DistLinkSource.link_batch`
        (heads, tails and global negatives sampled as seed nodes with
        :meth:`sample_from_nodes`); raises :class:`NotImplementedError`."""
        raise NotImplementedError(
            f"{type(self).__name__} samples from nodes only; distributed link prediction "
            "samples its edge batches in DistLinkSource.link_batch"
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(rank={self.data.rank}/{self.data.parts}, "
            f"fanouts={self.fanouts}, seed={self.seed}, replace={self.replace})"
        )
