r"""Link prediction models: an encoder of node representations and a decoder of scores.

The encoder turns a sampled subgraph into node representations: the node's
input (its features when the graph has them, otherwise a learnable embedding,
``torch.nn.Embedding`` with sparse gradients) optionally passed through a
message-passing GNN from :data:`gnncore.train.MODELS`. ``model="none"`` is the
embedding alone: with the DistMult decoder, plain DistMult.

Decoders score ``(head, relation, tail)``:

* ``distmult`` -- ``<z_h, w_r, z_t>`` with a learnable diagonal ``w_r`` per
  relation (Yang et al. 2015); with reciprocal relations (the default of
  :class:`~gnncore.train.LinkTrainConfig`) head queries use their own
  inverse relation, which breaks DistMult's symmetry.
* ``dot`` -- ``<z_h, z_t>``, relations ignored.

Both reduce a query ``(head, relation)`` to one vector so that a batch of
queries is scored against many candidates with one matrix product
(:meth:`LinkDecoder.query`), which is how training scores the shared
negatives and evaluation ranks all entities.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gnncore.train.core.models import build_model, supports_trimming
from gnncore.train.core.names import DECODERS as DECODERS
from gnncore.train.core.names import DecoderName as DecoderName


class LinkDecoder(nn.Module):
    """Scores ``(head, relation, tail)``; subclasses define :meth:`query`."""

    def query(self, heads: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        """``[B, D]`` query vectors such that ``score = query @ tail``."""
        raise NotImplementedError

    def score(
        self, heads: torch.Tensor, relations: torch.Tensor, tails: torch.Tensor
    ) -> torch.Tensor:
        """``[B]`` scores of matching rows of ``heads`` / ``relations`` / ``tails``."""
        return (self.query(heads, relations) * tails).sum(dim=-1)

    def score_against(
        self, heads: torch.Tensor, relations: torch.Tensor, candidates: torch.Tensor
    ) -> torch.Tensor:
        """``[B, C]`` scores of every query against every candidate tail."""
        return self.query(heads, relations) @ candidates.t()


class DistMult(LinkDecoder):
    r"""DistMult: ``score(h, r, t) = sum_k z_h[k] * w_r[k] * z_t[k]``.

    Args:
        num_relations (int): Relation ids ``[0, num_relations)`` (double the
            graph's relations when reciprocal relations are used).
        dim (int): Representation width.
    """

    def __init__(self, num_relations: int, dim: int) -> None:
        super().__init__()
        self.relations = nn.Embedding(max(num_relations, 1), dim)
        nn.init.xavier_normal_(self.relations.weight)

    def query(self, heads: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        return heads * self.relations(relations)


class DotProduct(LinkDecoder):
    """``score(h, r, t) = <z_h, z_t>`` (relations ignored; no parameters)."""

    def query(self, heads: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        return heads


def build_decoder(name: str, num_relations: int, dim: int) -> LinkDecoder:
    """A decoder by name (see :data:`DECODERS`)."""
    if name == "distmult":
        return DistMult(num_relations, dim)
    if name == "dot":
        return DotProduct()
    raise ValueError(f"unknown decoder {name!r}; choose one of {DECODERS}")


class LinkModel(nn.Module):
    r"""Node input (features or learnable embeddings) -> optional GNN -> decoder.

    :meth:`forward` maps a sampled subgraph (global node ids ``n_id`` and the
    local ``edge_index``; features ``x`` when the graph has them) to the
    representations of its nodes; the decoder scores pairs of them.

    Args:
        num_nodes (int): Nodes of the graph (rows of the embedding table).
        num_relations (int): Relation ids the decoder knows.
        dim (int): Representation width (embedding, hidden and output).
        encoder (str): ``"none"`` or a GNN of :data:`gnncore.train.MODELS`.
        decoder (str): ``"distmult"`` or ``"dot"``.
        num_layers (int): GNN layers (ignored for ``"none"``).
        in_channels (int, optional): Feature width; ``None`` (or ``0``)
            learns a ``[num_nodes, dim]`` embedding table instead.
        dropout (float): Dropout between GNN layers.
        heads (int): GAT attention heads.
    """

    def __init__(
        self,
        num_nodes: int,
        num_relations: int,
        dim: int,
        encoder: str = "none",
        decoder: str = "distmult",
        num_layers: int = 1,
        in_channels: int | None = None,
        dropout: float = 0.0,
        heads: int = 1,
    ) -> None:
        super().__init__()
        self.embedding: nn.Embedding | None = None
        if not in_channels:
            self.embedding = nn.Embedding(num_nodes, dim, sparse=True)
            nn.init.xavier_normal_(self.embedding.weight)
            in_channels = dim
        elif encoder == "none":
            raise ValueError("encoder 'none' learns node embeddings; it takes no features")
        self.gnn: nn.Module | None = None
        if encoder != "none":
            self.gnn = build_model(encoder, in_channels, dim, dim, num_layers, dropout, heads=heads)
        self.decoder = build_decoder(decoder, num_relations, dim)
        self.num_layers = num_layers if self.gnn is not None else 0

    def node_input(self, n_id: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
        """The GNN's input rows: features ``x`` or the embeddings of ``n_id``."""
        if self.embedding is not None:
            return self.embedding(n_id)
        if x is None:
            raise ValueError("this model reads node features, but the batch has no 'x'")
        return x.float()

    def forward(
        self,
        n_id: torch.Tensor,
        edge_index: torch.Tensor,
        x: torch.Tensor | None = None,
        num_sampled_nodes_per_hop: list[int] | None = None,
        num_sampled_edges_per_hop: list[int] | None = None,
    ) -> torch.Tensor:
        """Representations ``[len(n_id), dim]`` of the subgraph's nodes (only the
        seeds' rows are exact when the GNN trims layers by hop)."""
        h = self.node_input(n_id, x)
        if self.gnn is None:
            return h
        trim = (
            num_sampled_nodes_per_hop is not None
            and num_sampled_edges_per_hop is not None
            and len(num_sampled_edges_per_hop) == self.num_layers
            and supports_trimming(self.gnn)
        )
        if not trim:
            return self.gnn(h, edge_index)
        return self.gnn(
            h,
            edge_index,
            num_sampled_nodes_per_hop=num_sampled_nodes_per_hop,
            num_sampled_edges_per_hop=num_sampled_edges_per_hop,
        )

    def encode_batch(self, batch: Any) -> torch.Tensor:
        """Representations of a PyG loader batch's nodes (``n_id``, ``edge_index``,
        optional ``x`` and the per-hop counts)."""
        return self(
            batch.n_id,
            batch.edge_index,
            getattr(batch, "x", None),
            getattr(batch, "num_sampled_nodes", None),
            getattr(batch, "num_sampled_edges", None),
        )
