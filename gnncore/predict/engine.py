"""A trained model's outputs for every node, batch by batch (both tasks).

One code path serves ``gnncore predict`` over a graph directory and the
pyfunc's subgraph requests: the input rows (features, normalised exactly as
training normalised them, or a link model's embedding rows), then
:func:`~gnncore.train.core.layerwise.layerwise_inference` through the model's
GNN, or :func:`~gnncore.train.core.nodebatches.rowwise_inference` for models
without message passing (the ``none`` MLP; plain DistMult's embedding table).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import numpy as np
import torch
from torch_geometric.nn.models.basic_gnn import BasicGNN

from gnncore.train.core.layerstore import EDGES_PER_TARGET
from gnncore.train.core.layerwise import (
    Adjacency,
    RangeSource,
    RangesSource,
    RowSource,
    layerwise_inference,
)
from gnncore.train.core.models import EdgeFreeMLP
from gnncore.train.core.nodebatches import count_batches, rowwise_inference
from gnncore.train.core.projected import projection_hook
from gnncore.train.core.steps import normalize_rows
from gnncore.train.spec import ModelSpec

#: Seed nodes per batch unless told otherwise.
DEFAULT_BATCH_SIZE = 4096


def amp_dtype_of(spec: ModelSpec, device: torch.device) -> torch.dtype | None:
    """The autocast dtype training evaluated with (``amp`` on CUDA), else ``None``."""
    if device.type != "cuda" or spec.amp == "none":
        return None
    return torch.bfloat16 if spec.amp == "bf16" else torch.float16


def normalized_rows(spec: ModelSpec, rows: RowSource) -> RowSource:
    """``rows`` as float32, each divided by its sum (clamped at 1) when training
    did so (``normalize_features``; :func:`gnncore.train.node.loop._forward`)."""

    def read(n_id: torch.Tensor) -> torch.Tensor:
        x = rows(n_id).float()
        if spec.normalize_features:
            x = normalize_rows(x)
        return x

    return read


def _normalized_in_place(spec: ModelSpec, x: torch.Tensor) -> torch.Tensor:
    """``x`` divided by its row sums in place (:func:`normalize_rows` without a
    second copy: a part's rows are held once) when training did so."""
    if spec.normalize_features:
        x = x.div_(x.sum(dim=-1, keepdim=True).clamp(min=1.0))
    return x


def normalized_range(spec: ModelSpec, rows: RangeSource | None) -> RangeSource | None:
    """:func:`normalized_rows` of a row range reader (the rows it returns are
    normalised in place: the same values, no second copy)."""
    if rows is None:
        return None

    def read(lo: int, hi: int) -> torch.Tensor:
        return _normalized_in_place(spec, rows(lo, hi).float())

    return read


def normalized_ranges(spec: ModelSpec, rows: RangesSource | None) -> RangesSource | None:
    """:func:`normalized_range` of a ranges reader (each row normalised alone,
    so the rows of a range are those of any other read of them)."""
    if rows is None:
        return None

    def read(ranges: np.ndarray) -> torch.Tensor:
        return _normalized_in_place(spec, rows(ranges).float())

    return read


def _link_rows(module: torch.nn.Module, rows: RowSource | None) -> RowSource:
    embedding = getattr(module, "embedding", None)
    if embedding is not None:
        weight = embedding.weight.detach()
        return lambda n_id: weight[n_id.to(weight.device)]
    if rows is None:
        raise ValueError("this link model reads node features; none were given")
    return lambda n_id: rows(n_id).float()


def uses_graph(spec: ModelSpec, module: torch.nn.Module) -> bool:
    """Whether the model passes messages (and so needs the adjacency)."""
    if spec.task == "node":
        return not isinstance(module, EdgeFreeMLP)
    return getattr(module, "gnn", None) is not None


def message_passing(spec: ModelSpec, module: torch.nn.Module) -> torch.nn.Module | None:
    """The model's GNN (the whole module of a node model; a link model's
    encoder), or ``None`` for a model without message passing."""
    if not uses_graph(spec, module):
        return None
    return module if spec.task == "node" else module.gnn  # type: ignore[return-value]


def layer_widths(spec: ModelSpec, module: torch.nn.Module) -> tuple[int, ...]:
    """Channels of the GNN's input, each hidden layer and output (empty for a
    model without message passing: it keeps no layer for all nodes)."""
    gnn = message_passing(spec, module)
    if not isinstance(gnn, BasicGNN):
        return ()
    hidden = (int(gnn.hidden_channels),) * (gnn.num_layers - 1)
    return (int(gnn.in_channels), *hidden, int(gnn.out_channels or gnn.hidden_channels))


def passes(
    spec: ModelSpec,
    module: torch.nn.Module,
    adjacency: Adjacency | None,
    num_nodes: int,
    batch_size: int,
    max_edges: int | None = None,
    bounds: np.ndarray | None = None,
) -> int:
    """Batches :func:`model_outputs` runs (for a progress bar's total)."""
    gnn = message_passing(spec, module)
    if gnn is None or adjacency is None:
        return -(-num_nodes // batch_size)
    layers = int(getattr(gnn, "num_layers", 1))
    edges = max_edges if max_edges is not None else EDGES_PER_TARGET * batch_size
    return layers * count_batches(adjacency.indptr, batch_size, edges, bounds)


def model_outputs(
    spec: ModelSpec,
    module: torch.nn.Module,
    adjacency: Adjacency | None,
    rows: RowSource | None,
    num_nodes: int,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_edges: int | None = None,
    device: torch.device | str = "cpu",
    on_batch: Callable[[], None] | None = None,
    layer_dir: str | os.PathLike[str] | None = None,
    bounds: np.ndarray | None = None,
    cache_bytes: int = 0,
    row_range: RangeSource | None = None,
    row_ranges: RangesSource | None = None,
    project_bytes: int = 0,
    spill_dir: str | os.PathLike[str] | None = None,
    compare_rows: bool = False,
) -> Iterator[tuple[int, int, torch.Tensor]]:
    """Yield ``(a, b, out)`` for nodes ``a .. b-1`` in order: class logits (node
    task) or representations (link task), float32 on ``device``.

    Args:
        spec, module: The trained model (``module`` already on ``device``, eval).
        adjacency (Adjacency, optional): In-neighbour lists; needed when the
            model passes messages.
        rows (callable, optional): Raw feature rows of a batch's node ids
            (not needed by a link model over learned embeddings).
        num_nodes (int): Nodes to cover.
        max_edges, layer_dir, bounds, cache_bytes: Of
            :func:`~gnncore.train.core.layerwise.layerwise_inference` (batch
            limits; layer outputs on disk instead of in memory; batches inside
            parts, each part's rows read once).
        row_range (callable, optional): Raw feature rows ``lo .. hi - 1`` in
            one read (node task, with ``bounds``).
        project_bytes (int): With ``row_range`` on the CPU, the layers that
            narrow project before aggregating
            (:func:`~gnncore.train.core.projected.projection_hook`), their
            products in at most this many bytes, else on disk in
            ``spill_dir`` (none: not projected); 0: never.
        compare_rows (bool): Spilled products whose passes cost more than
            reading the cut edges' source rows apart: the layer is not
            projected (``bounds``' part-by-part reads instead;
            :func:`~gnncore.train.core.projected.projected_layer`).
        row_ranges (callable, optional): Raw feature rows of several ranges
            in one call (node task, with ``bounds``: the sources of cut edges).
    """
    device = torch.device(device)
    amp = amp_dtype_of(spec, device)
    if spec.task == "node":
        if rows is None:
            raise ValueError("node classification reads node features; none were given")
        inputs = normalized_rows(spec, rows)
        if not uses_graph(spec, module):
            yield from rowwise_inference(
                module,
                num_nodes,
                inputs,
                batch_size=batch_size,
                device=device,
                amp_dtype=amp,
                on_batch=on_batch,
            )
            return
        gnn: torch.nn.Module = module
    else:
        inputs = _link_rows(module, rows)
        if not uses_graph(spec, module):
            yield from rowwise_inference(
                lambda h: h,
                num_nodes,
                inputs,
                batch_size=batch_size,
                device=device,
                amp_dtype=amp,
                on_batch=on_batch,
            )
            return
        gnn = module.gnn  # type: ignore[assignment]  # LinkModel.gnn
    if adjacency is None:
        raise ValueError("this model passes messages; it needs the graph's adjacency")
    if not isinstance(gnn, BasicGNN):
        raise NotImplementedError(f"layer-wise inference of {type(gnn).__name__}")
    project = None
    feature_range = normalized_range(spec, row_range) if spec.task == "node" else None
    if project_bytes > 0 and feature_range is not None and device.type == "cpu":
        project = projection_hook(
            gnn,
            adjacency,
            feature_range,
            max_bytes=project_bytes,
            batch_size=batch_size,
            layer_dir=layer_dir,
            spill_dir=spill_dir,
            compare_rows=compare_rows,
        )
    yield from layerwise_inference(
        gnn,
        adjacency,
        inputs,
        batch_size=batch_size,
        max_edges=max_edges,
        device=device,
        amp_dtype=amp,
        on_batch=on_batch,
        layer_dir=layer_dir,
        bounds=bounds,
        cache_bytes=cache_bytes,
        input_range=feature_range,
        input_ranges=normalized_ranges(spec, row_ranges) if spec.task == "node" else None,
        project=project,
    )
