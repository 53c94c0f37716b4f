"""Model builders: architecture name -> :mod:`torch_geometric.nn` model.

Every model has the forward signature of
:class:`~torch_geometric.nn.models.basic_gnn.BasicGNN`
(``forward(x, edge_index, num_sampled_nodes_per_hop=...,
num_sampled_edges_per_hop=...)``) and a ``num_layers`` attribute, so the
training loop treats them alike. :func:`supports_trimming` tells the loop
whether a model may drop the hops a layer no longer needs
(``trim_to_layer``) without changing the seed nodes' outputs.

To add an architecture, write a builder with the signature of
:data:`ModelBuilder`, register it in :data:`MODELS`, name it in
:data:`ModelName` (the choices of the CLI and Dagster) and give its defaults in
:data:`gnncore.train.node.config.MODEL_DEFAULTS`.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import Tensor
from torch_geometric.nn import MLP, MessagePassing, SAGEConv
from torch_geometric.nn.models import GAT, GCN, GIN, GraphSAGE
from torch_geometric.nn.models.basic_gnn import BasicGNN

from gnncore.train.core.names import ModelName as ModelName


class ModelBuilder(Protocol):
    """``(in_channels, hidden, out_channels, num_layers, dropout, *, heads=1)``."""

    def __call__(
        self,
        in_channels: int,
        hidden: int,
        out_channels: int,
        num_layers: int,
        dropout: float,
        *,
        heads: int = 1,
    ) -> torch.nn.Module: ...


class EdgeFreeMLP(torch.nn.Module):
    r"""A ``num_layers``-layer MLP on the node features alone (no message passing).

    The baseline of ``--model none``: it takes (and ignores) the graph
    arguments of :class:`BasicGNN` so the loop and model export treat it like
    the GNNs.
    """

    def __init__(
        self, in_channels: int, hidden: int, out_channels: int, num_layers: int, dropout: float
    ) -> None:
        super().__init__()
        self.num_layers = num_layers
        self.mlp = MLP(
            in_channels=in_channels,
            hidden_channels=hidden,
            out_channels=out_channels,
            num_layers=num_layers,
            dropout=dropout,
            norm=None,
        )

    def forward(
        self, x: torch.Tensor, edge_index: torch.Tensor | None = None, **kwargs: Any
    ) -> torch.Tensor:
        return self.mlp(x)


class WeightedSAGEConv(SAGEConv):
    """:class:`~torch_geometric.nn.SAGEConv` whose messages may carry a weight
    per edge: it aggregates ``c_j · x_j`` (mean: ``(1/k) Σ c_j x_j`` over the
    ``k`` sampled neighbours). Without ``edge_weight`` it is ``SAGEConv``.

    Locality-aware sampling (:class:`~gnncore.sampler.LocalityAwareSampler`)
    weights each sampled edge by ``c_j = q_j / π_j`` (``π`` its exact inclusion
    probability, the paper's ``q_new`` capped at 1) so the mean stays an unbiased
    estimate of the plain sampler's (Song & Jiang, §4).
    """

    # PyG compiles ``propagate`` per class from the message signature; start from
    # the generic one, not SAGEConv's compiled copy (which knows no edge_weight).
    propagate = MessagePassing.propagate

    def forward(
        self,
        x: Tensor | tuple[Tensor, Tensor | None],
        edge_index: Tensor,
        edge_weight: Tensor | None = None,
        size: tuple[int, int] | None = None,
    ) -> Tensor:
        pair = (x, x) if isinstance(x, Tensor) else x
        if self.project and hasattr(self, "lin"):
            pair = (self.lin(pair[0]).relu(), pair[1])
        # propagate_type: (x: OptPairTensor, edge_weight: OptTensor)
        out = self.lin_l(self.propagate(edge_index, x=pair, edge_weight=edge_weight, size=size))
        if self.root_weight and pair[1] is not None:
            out = out + self.lin_r(pair[1])
        if self.normalize:
            out = torch.nn.functional.normalize(out, p=2.0, dim=-1)
        return out

    def message(self, x_j: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        return x_j if edge_weight is None else edge_weight.view(-1, 1).to(x_j.dtype) * x_j


class WeightedGraphSAGE(GraphSAGE):
    """:class:`~torch_geometric.nn.models.GraphSAGE` over :class:`WeightedSAGEConv`:
    ``forward(..., edge_weight=...)`` weights the messages; without weights it
    computes exactly what GraphSAGE does (same parameters, same order)."""

    supports_edge_weight = True

    def init_conv(self, in_channels: Any, out_channels: int, **kwargs: Any) -> SAGEConv:
        return WeightedSAGEConv(in_channels, out_channels, **kwargs)


def _no_heads(name: str, heads: int) -> None:
    if heads != 1:
        raise ValueError(f"{name} has no attention heads; got heads={heads}")


def build_sage(
    in_channels: int,
    hidden: int,
    out_channels: int,
    num_layers: int,
    dropout: float,
    *,
    heads: int = 1,
) -> BasicGNN:
    """GraphSAGE with mean aggregation and ReLU (Hamilton et al., 2017); takes
    optional per-edge message weights (:class:`WeightedGraphSAGE`)."""
    _no_heads("GraphSAGE", heads)
    return WeightedGraphSAGE(
        in_channels, hidden, num_layers, out_channels=out_channels, dropout=dropout, aggr="mean"
    )


def build_gcn(
    in_channels: int,
    hidden: int,
    out_channels: int,
    num_layers: int,
    dropout: float,
    *,
    heads: int = 1,
) -> BasicGNN:
    """GCN with self-loops and symmetric normalisation (Kipf and Welling, 2017).

    The normalisation is computed on the sampled subgraph, from the degrees
    the sampled edges give each node.
    """
    _no_heads("GCN", heads)
    return GCN(in_channels, hidden, num_layers, out_channels=out_channels, dropout=dropout)


def build_gat(
    in_channels: int,
    hidden: int,
    out_channels: int,
    num_layers: int,
    dropout: float,
    *,
    heads: int = 8,
) -> BasicGNN:
    """GAT (Velickovic et al., 2018): ``heads`` heads of ``hidden // heads`` channels
    concatenated in hidden layers, averaged in the output layer; ``dropout`` also
    drops attention coefficients."""
    return GAT(
        in_channels, hidden, num_layers, out_channels=out_channels, dropout=dropout, heads=heads
    )


def build_gin(
    in_channels: int,
    hidden: int,
    out_channels: int,
    num_layers: int,
    dropout: float,
    *,
    heads: int = 1,
) -> BasicGNN:
    """GIN (Xu et al., 2019): sum aggregation and a 2-layer MLP per layer."""
    _no_heads("GIN", heads)
    return GIN(in_channels, hidden, num_layers, out_channels=out_channels, dropout=dropout)


def build_mlp(
    in_channels: int,
    hidden: int,
    out_channels: int,
    num_layers: int,
    dropout: float,
    *,
    heads: int = 1,
) -> EdgeFreeMLP:
    """:class:`EdgeFreeMLP`: the no-graph baseline."""
    _no_heads("the MLP", heads)
    return EdgeFreeMLP(in_channels, hidden, out_channels, num_layers, dropout)


#: Architecture name -> builder (one entry per :data:`ModelName`).
MODELS: dict[str, ModelBuilder] = {
    "sage": build_sage,
    "gcn": build_gcn,
    "gat": build_gat,
    "gin": build_gin,
    "none": build_mlp,
}


def build_model(
    name: str,
    in_channels: int,
    hidden: int,
    out_channels: int,
    num_layers: int,
    dropout: float,
    heads: int | None = None,
) -> torch.nn.Module:
    """Build the model ``name`` (``heads``: the builder's default when ``None``);
    raises ``KeyError`` listing the known names."""
    try:
        builder = MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; choose one of {sorted(MODELS)}") from None
    if heads is None:
        return builder(in_channels, hidden, out_channels, num_layers, dropout)
    return builder(in_channels, hidden, out_channels, num_layers, dropout, heads=heads)


def supports_trimming(model: torch.nn.Module) -> bool:
    """Whether layer ``i`` may drop the sampled hops it no longer needs.

    True for message passing that only reads the edges *into* the nodes it
    updates (SAGE, GAT, GIN). False for GCN, whose symmetric normalisation
    also reads the degree of each *source* node: trimming removes the edges
    into the outermost kept hop and so changes those degrees. False for
    models without message passing.
    """
    return isinstance(model, BasicGNN) and not isinstance(model, GCN)


def takes_edge_weight(model: torch.nn.Module) -> bool:
    """Whether ``model`` uses per-edge weights (``forward(..., edge_weight=...)``):
    GraphSAGE (weighted messages) and GCN (weighted normalisation)."""
    return isinstance(model, BasicGNN) and bool(model.supports_edge_weight)


def uses_edges(model: torch.nn.Module) -> bool:
    """Whether the model reads ``edge_index`` at all (False for the MLP)."""
    return not isinstance(model, EdgeFreeMLP)
