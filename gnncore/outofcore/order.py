"""A partitioned store's node order (:class:`StoreOrder`), for layer-wise
inference part by part: ``gnncore predict --store`` (:mod:`gnncore.predict.ordered`)
and the exact evaluation of out-of-core training runs
(:meth:`StoreOrder.evaluation_order`, :mod:`gnncore.train.core.evalorder`).

A partitioned store (:mod:`gnncore.outofcore.store`) numbers the nodes part by
part: part ``j`` is the new ids ``offsets[j] .. offsets[j + 1] - 1``, its
features one contiguous block of the store's ``features.npy`` and its in-edges
one contiguous range of ``edges.npy``. :class:`StoreOrder` builds what
layer-wise inference over those ids needs: the in-neighbour lists in new ids
(read part by part from ``edges.npy``, each node's sources in the graph's own
order, written to a scratch ``.npy`` and read mapped) and the feature readers
(a part's rows in one sequential read, the sources of cut edges in sorted
passes of coalesced reads).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnncore.errors import InputError
from gnncore.outofcore.store import PartitionedStore
from gnncore.store import GraphDir
from gnncore.store.manifest import MANIFEST_FILE, sha256_of
from gnncore.train.core.evalorder import EvaluationOrder
from gnncore.train.core.layerstore import random_access_rows
from gnncore.train.core.layerwise import Adjacency, RangesSource, RowSource
from gnncore.train.core.partrows import npy_ranges

#: The scratch file of the in-neighbour lists in store order.
INDICES_FILE = "store-indices.npy"


@dataclass(frozen=True)
class StoreOrder:
    """A partitioned store of the graph being predicted on or evaluated, opened
    and checked."""

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
        return cls.of_store(PartitionedStore.open(path), graph)

    @classmethod
    def of_store(cls, store: PartitionedStore, graph: GraphDir) -> StoreOrder:
        """:meth:`open` of a store opened already (its ``direct_reads`` kept).

        Raises:
            InputError: A store of another graph, or without features.
        """
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

    def evaluation_order(self, graph: GraphDir) -> EvaluationOrder:
        """This order as training's exact evaluation takes it
        (:class:`~gnncore.train.core.evalorder.EvaluationOrder`): the same
        adjacency and readers ``gnncore predict --store`` uses."""
        return EvaluationOrder(
            bounds=np.asarray(self.bounds, dtype=np.int64),
            node_map=self.node_map,
            adjacency=lambda scratch: self.adjacency(graph, scratch),
            rows=self.feature_rows,
            read_range=self.feature_range,
            read_ranges=self.feature_ranges,
            name=f"partitioned store ({self.store.parts} parts)",
        )
