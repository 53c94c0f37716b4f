"""Synthetic graphs: the degree-corrected planted-partition model of
:mod:`gnncore.synth.model` and the heavy-tailed models of :mod:`gnncore.synth.heavy_tail`."""

from gnncore.synth.dataset import (
    GeneratedDataset,
    generate_graph,
    write_ogb_raw,
    write_ogb_raw_versioned,
)
from gnncore.synth.edge_csv import write_edge_csv
from gnncore.synth.model import (
    MODELS,
    SynthSpec,
    class_centroids,
    features,
    fill_features,
    iter_edge_chunks,
    labels,
    node_labels,
    node_table,
    split,
)

__all__ = [
    "GeneratedDataset",
    "MODELS",
    "SynthSpec",
    "class_centroids",
    "features",
    "generate_graph",
    "fill_features",
    "iter_edge_chunks",
    "labels",
    "node_labels",
    "node_table",
    "split",
    "write_edge_csv",
    "write_ogb_raw",
    "write_ogb_raw_versioned",
]
