"""Synthetic graphs: the degree-corrected planted-partition model of :mod:`gnncore.synth.model`."""

from gnncore.synth.dataset import generate_graph, write_ogb_raw
from gnncore.synth.model import (
    SynthSpec,
    class_centroids,
    features,
    fill_features,
    iter_edge_chunks,
    labels,
    node_table,
    split,
)

__all__ = [
    "SynthSpec",
    "class_centroids",
    "features",
    "generate_graph",
    "fill_features",
    "iter_edge_chunks",
    "labels",
    "node_table",
    "split",
    "write_ogb_raw",
]
