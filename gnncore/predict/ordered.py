"""Predictions in a partitioned store's node order (``predict_graph_dir(store=...)``).

A partitioned store (:mod:`gnncore.outofcore.store`) numbers the nodes part by
part: part ``j`` is the new ids ``offsets[j] .. offsets[j + 1] - 1``, its
features one contiguous block of the store's ``features.npy`` and its in-edges
one contiguous range of ``edges.npy``. Layer-wise inference over those ids
runs part by part (:func:`~gnncore.train.core.nodebatches.part_batches`): a
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
:class:`StoreOrder` lives in :mod:`gnncore.outofcore.order`, where training's
exact evaluation of out-of-core runs takes it from too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch

from gnncore.outofcore.order import StoreOrder
from gnncore.predict.engine import layer_widths, model_outputs
from gnncore.store import GraphDir
from gnncore.train.core.layerstore import (
    ENTRY_BYTES,
    MIN_MEMORY_BUDGET,
    InferencePlan,
    LayerOutput,
    new_layer_output,
    plan_inference,
)
from gnncore.train.spec import ModelSpec

__all__ = ["StoreOrder", "in_graph_order", "store_outputs", "store_plan"]


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
            project_bytes=budget // 2 if budget is not None else 1 << 62,
            spill_dir=scratch,
            compare_rows=True,  # else part by part, cut edges' sources apart
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
