"""Model builders: architecture name -> :mod:`torch_geometric.nn` model.

Every builder returns a :class:`~torch_geometric.nn.models.basic_gnn.BasicGNN`
(``forward(x, edge_index, num_sampled_nodes_per_hop=...,
num_sampled_edges_per_hop=...)``), so the training loop can trim each layer to
the hops it needs. To add an architecture (GCN, GAT, GIN), write a builder
with the same signature and register it in :data:`MODELS`.
"""

from __future__ import annotations

from collections.abc import Callable

from torch_geometric.nn.models import GraphSAGE
from torch_geometric.nn.models.basic_gnn import BasicGNN

ModelBuilder = Callable[[int, int, int, int, float], BasicGNN]


def build_sage(in_channels: int, hidden: int, out_channels: int, num_layers: int,
               dropout: float) -> BasicGNN:
    """GraphSAGE with mean aggregation and ReLU (Hamilton et al., 2017)."""
    return GraphSAGE(in_channels, hidden, num_layers, out_channels=out_channels,
                     dropout=dropout, aggr="mean")


#: Architecture name -> builder ``(in_channels, hidden, out_channels, num_layers, dropout)``.
MODELS: dict[str, ModelBuilder] = {
    "sage": build_sage,
}


def build_model(name: str, in_channels: int, hidden: int, out_channels: int,
                num_layers: int, dropout: float) -> BasicGNN:
    """Build the model ``name``; raises ``KeyError`` listing the known names."""
    try:
        builder = MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; choose one of {sorted(MODELS)}") from None
    return builder(in_channels, hidden, out_channels, num_layers, dropout)
