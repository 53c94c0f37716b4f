"""An evaluation order: another numbering of the graph's nodes that layer-wise
evaluation may run in, with the readers it needs.

A partitioned store (:mod:`gnncore.outofcore.store`) numbers the nodes part by
part, its features one contiguous block per part. Layer-wise inference in
that numbering (:func:`~gnncore.train.core.layerwise.layerwise_inference`
with ``bounds``) reads each part's input rows once, sequentially, and only the
sources of cut edges row by row, in sorted passes of coalesced reads
(:mod:`gnncore.train.core.partrows`): what ``gnncore predict --store`` does.
The graph's own order, random for a generated or ingested graph, makes every
batch read its in-neighbours from anywhere in the feature file.

:class:`EvaluationOrder` is what training's exact evaluation
(:mod:`gnncore.train.node.exact`) needs of such a numbering, without knowing
where it comes from: the floors above ``train`` build it
(:meth:`gnncore.outofcore.order.StoreOrder.evaluation_order`) and hand it to
the task. Node ids of the splits (and the labels) stay in the graph's order;
``node_map`` translates them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from gnncore.train.core.layerwise import Adjacency
from gnncore.train.core.partrows import RangeSource, RangesSource, RowSource
from gnncore.train.core.steps import normalize_rows


@dataclass(frozen=True)
class EvaluationOrder:
    """A numbering of the graph's nodes in parts (new ids), and its readers.

    Attributes:
        bounds: The parts' offsets in new ids (``parts + 1``, from 0 to ``N``).
        node_map: int64 ``[N]``, old id (the graph's) -> new id.
        adjacency: ``adjacency(scratch)``: the in-neighbour lists in new ids,
            each node's sources in the order of the graph's own lists, large
            arrays written under the existing directory ``scratch`` (it must
            outlive the adjacency).
        rows: ``rows(scattered)``: a reader of layer-0 rows by new id
            (``scattered``: without readahead, for rows read one by one).
        read_range: Layer-0 rows ``lo .. hi - 1`` (new ids) in one sequential read.
        read_ranges: ``read_ranges()``: a reader of several row ranges in one
            call of sorted reads (the sources of cut edges).
        name: What the order is, for logs and the run's record.
    """

    bounds: np.ndarray
    node_map: np.ndarray
    adjacency: Callable[[Path], Adjacency]
    rows: Callable[[bool], RowSource]
    read_range: RangeSource
    read_ranges: Callable[[], RangesSource]
    name: str = "partitioned store"

    @property
    def num_nodes(self) -> int:
        return len(self.node_map)

    def new_ids(self, nodes: torch.Tensor) -> torch.Tensor:
        """The new ids of the graph's nodes ``nodes`` (int64)."""
        return torch.from_numpy(np.asarray(self.node_map[nodes.numpy()], dtype=np.int64))

    def normalized(self) -> EvaluationOrder:
        """The same order whose readers return rows divided by their sums
        (:func:`~gnncore.train.core.steps.normalize_rows`, what
        ``normalize_features`` applies before the model)."""
        rows, read_range, read_ranges = self.rows, self.read_range, self.read_ranges

        def normalized_rows(scattered: bool) -> RowSource:
            read = rows(scattered)
            return lambda n_id: normalize_rows(read(n_id))

        def normalized_ranges() -> RangesSource:
            read = read_ranges()
            return lambda ranges: normalize_rows(read(ranges))

        return EvaluationOrder(
            self.bounds,
            self.node_map,
            self.adjacency,
            normalized_rows,
            lambda lo, hi: normalize_rows(read_range(lo, hi)),
            normalized_ranges,
            self.name,
        )
