"""Predictions in a partitioned store's node order (``predict_graph_dir(store=...)``).

A partitioned store (:mod:`gnncore.outofcore.store`) numbers the nodes part by
part: part ``j`` is the new ids ``offsets[j] .. offsets[j + 1] - 1``, its
features one contiguous block of the store's ``features.npy`` and its in-edges
one contiguous range of ``edges.npy``. Layer-wise inference over those ids
runs part by part (:func:`~gnncore.train.core.layerwise.part_batches`): a
part's input rows are read once, sequentially
(:class:`~gnncore.train.core.layerwise.PartRows`), and the sources of cut
edges in sorted passes of coalesced reads, several in flight
(:mod:`gnncore.train.core.partrows`). The graph's own order is random for a
generated or ingested graph, so there every batch reads its in-neighbours
from anywhere in the feature and layer files.

:class:`StoreOrder` builds what that needs: the in-neighbour lists in new ids
(read part by part from ``edges.npy``, each node's sources in the graph's own
order, written to a scratch ``.npy`` and read mapped) and the feature readers.
The last layer's rows, computed in store order, are put back in the graph's
node order through ``node_map`` (old id -> new id) before they are written.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnncore.errors import InputError
from gnncore.outofcore.store import PartitionedStore
from gnncore.predict.engine import layer_widths, model_outputs
from gnncore.store import GraphDir
from gnncore.store.manifest import MANIFEST_FILE, sha256_of
from gnncore.train.core.layerstore import (
    ENTRY_BYTES,
    MIN_MEMORY_BUDGET,
    InferencePlan,
    LayerOutput,
    new_layer_output,
    plan_inference,
    random_access_rows,
)
from gnncore.train.core.layerwise import Adjacency, RangesSource, RowSource
from gnncore.train.core.partrows import npy_ranges
from gnncore.train.spec import ModelSpec

#: The scratch file of the in-neighbour lists in store order.
INDICES_FILE = "store-indices.npy"


@dataclass(frozen=True)
class StoreOrder:
    """A partitioned store of the graph being predicted on, opened and checked."""

    store: PartitionedStore
    node_order: np.ndarray  # new -> old
    node_map: np.ndarray  # old -> new

    @classmethod
    def open(cls, path: str | os.PathLike[str], graph: GraphDir) -> StoreOrder:
        """Open the store at ``path`` and check it was written from ``graph``
        (the sha256 of its manifest) and holds its features.

        Raises:
            InputError: Not a store, of another graph, or without features.
        """
        store = PartitionedStore.open(path)
        recorded = store.info.get("graph_manifest_sha256")
        if recorded != sha256_of(Path(graph.path) / MANIFEST_FILE):
            raise InputError(
                f"the partitioned store was written from {store.info.get('graph')}, not from "
                f"this graph ({graph.path}; its manifest differs)",
                store.path,
            )
        if not store.has("features"):
            raise InputError("the partitioned store holds no features.npy", store.path)
        order = np.asarray(store.array("node_order"), dtype=np.int64)
        node_map = np.asarray(store.array("node_map"), dtype=np.int64)
        return cls(store, order, node_map)

    @property
    def bounds(self) -> np.ndarray:
        """The partition offsets (``parts + 1`` new ids)."""
        return self.store.offsets

    def adjacency(self, graph: GraphDir, scratch: Path) -> Adjacency:
        """The graph's in-neighbour lists in new ids: ``indptr`` in memory
        (``N + 1``), ``indices`` written to ``scratch/`` :data:`INDICES_FILE`
        part by part (one sequential read of the part's in-edges, sorted by
        destination and then by the source's old id: each node's sources in
        the order of the graph's own lists, which the format keeps sorted)
        and read mapped."""
        degree = np.diff(np.asarray(graph.indptr, dtype=np.int64))[self.node_order]
        indptr = np.zeros(len(degree) + 1, dtype=np.int64)
        np.cumsum(degree, out=indptr[1:])
        path = scratch / INDICES_FILE
        with open(path, "wb") as f:
            header = {"descr": "<i8", "fortran_order": False, "shape": (int(indptr[-1]),)}
            np.lib.format.write_array_header_1_0(f, header)
            for part in range(self.store.parts):
                edges = self.store.in_edges(part)
                src, dst = edges[:, 0], edges[:, 1]
                ordered = src[np.lexsort((self.node_order[src], dst))]
                f.write(np.ascontiguousarray(ordered, dtype="<i8").data)
                del edges, src, dst, ordered
        return Adjacency(indptr, np.load(path, mmap_mode="c"))  # "c": writable, never written

    def feature_rows(self, scattered: bool) -> RowSource:
        """The store's feature rows by new id (mapped; ``scattered``: without
        readahead, :func:`~gnncore.train.core.layerstore.random_access_rows`)."""
        path = self.store.path / "features.npy"
        features = random_access_rows(path) if scattered else np.load(path, mmap_mode="r")

        def rows(n_id: torch.Tensor) -> torch.Tensor:
            return torch.from_numpy(np.ascontiguousarray(features[n_id.numpy()], dtype=np.float32))

        return rows

    def feature_range(self, lo: int, hi: int) -> torch.Tensor:
        """Feature rows ``lo .. hi - 1`` (new ids) in one sequential read,
        past the page cache where the file system allows
        (:meth:`~gnncore.outofcore.store.PartitionedStore.read_rows`)."""
        rows = self.store.read_rows("features", [(lo, hi)])
        return torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float32))

    def feature_ranges(self) -> RangesSource:
        """Feature rows of several ranges (new ids) in one call of sorted reads,
        past the page cache where the file system allows
        (:func:`~gnncore.train.core.partrows.npy_ranges`): the sources of cut
        edges."""
        return npy_ranges(self.store.path / "features.npy", direct=self.store.direct_reads)

    def describe(self, cache_bytes: int) -> dict[str, Any]:
        """What the prediction manifest records of the order."""
        sizes = np.diff(self.bounds)
        return {
            "path": str(self.store.path.absolute()),
            "parts": self.store.parts,
            "largest_part_nodes": int(sizes.max(initial=0)),
            "part_cache_bytes": int(cache_bytes),
        }


def in_graph_order(
    final: LayerOutput, node_map: np.ndarray, rows: int
) -> Iterator[tuple[int, int, torch.Tensor]]:
    """``(a, b, out)`` for the graph's nodes ``a .. b-1`` in its own order, ``rows``
    at a time: the rows of their new ids (``node_map[a:b]``) in ``final`` (the
    last layer's output in store order)."""
    n = len(node_map)
    for a in range(0, n, rows):
        b = min(a + rows, n)
        yield a, b, final.read(torch.from_numpy(np.asarray(node_map[a:b], dtype=np.int64)))


def store_plan(
    plan: InferencePlan,
    num_nodes: int,
    widths: tuple[int, ...],
    batch_size: int,
    budget: int | None,
    num_edges: int,
    order: StoreOrder | None,
) -> tuple[InferencePlan, int]:
    """The plan and part cache in store order (``order``; without one,
    ``plan`` and no cache): without a budget, parts of any size are held;
    with one that the layers exceed (``plan.spill``), a quarter of it holds
    one part's input rows and the batches are sized from half."""
    if order is None:
        return plan, 0
    if budget is None:
        return plan, 1 << 62
    if not plan.spill:
        return plan, budget // 4
    half = max(budget // 2, MIN_MEMORY_BUDGET)
    smaller = plan_inference(num_nodes, widths, len(widths) - 1, batch_size, half, num_edges)
    return InferencePlan(smaller.batch_size, smaller.max_edges, True, plan.layer_bytes), budget // 4


def store_outputs(
    spec: ModelSpec,
    module: torch.nn.Module,
    graph: GraphDir,
    order: StoreOrder,
    plan: InferencePlan,
    cache_bytes: int,
    budget: int | None,
    scratch: Path,
    device: torch.device,
    on_batch: Callable[[], None] | None,
    rows: int,
) -> Iterator[tuple[int, int, torch.Tensor]]:
    """:func:`model_outputs` in the store's order, part by part, the last layer
    kept (in memory, or beside the layers in ``scratch`` when it exceeds a
    quarter of the budget under a spilling plan) and yielded in the graph's
    order, ``rows`` at a time (:func:`in_graph_order`)."""
    n = graph.num_nodes
    final: LayerOutput | None = None
    try:
        for a, _, out in model_outputs(
            spec,
            module,
            order.adjacency(graph, scratch),
            order.feature_rows(scattered=plan.spill),
            n,
            batch_size=plan.batch_size,
            max_edges=plan.max_edges,
            device=device,
            on_batch=on_batch,
            layer_dir=scratch if plan.spill else None,
            bounds=order.bounds,
            cache_bytes=cache_bytes,
            row_range=order.feature_range,
            row_ranges=order.feature_ranges(),
        ):
            if final is None:
                width = out.size(1)
                on_disk = (
                    plan.spill and budget is not None and n * width * ENTRY_BYTES > budget // 4
                )
                layer = len(layer_widths(spec, module)) - 2
                final = new_layer_output(scratch if on_disk else None, n, layer, width)
            final.write(a, out)
        if final is not None:
            final = final.finish()
            yield from in_graph_order(final, order.node_map, rows)
    finally:
        if final is not None:
            final.release()
