"""The on-disk graph format (see docs/FORMAT.md) and PyG storage views of it."""

from typing import TYPE_CHECKING

from gnncore.lazy import lazy_attributes
from gnncore.store.atomic import atomic_directory
from gnncore.store.graph_dir import GraphDir, open_graph
from gnncore.store.manifest import FORMAT_VERSION, Manifest
from gnncore.store.npy import index_dtype

__all__ = [
    "FORMAT_VERSION",
    "GraphDir",
    "GraphDirWriter",
    "Manifest",
    "atomic_directory",
    "create_graph_dir",
    "index_dtype",
    "open_graph",
    "CSCGraphStore",
    "EmptyFeatureStore",
    "GraphDirFeatureStore",
    "GraphDirGraphStore",
    "TensorFeatureStore",
]

if TYPE_CHECKING:  # what the lazy names below are, for type checkers
    from gnncore.store.feature_store import (
        EmptyFeatureStore,
        GraphDirFeatureStore,
        TensorFeatureStore,
    )
    from gnncore.store.graph_store import CSCGraphStore, GraphDirGraphStore
    from gnncore.store.writer import GraphDirWriter, create_graph_dir

# The PyG storage views import torch and torch_geometric (seconds), the writer
# Polars and PyArrow (60 MiB of RSS); load them on first use so `gnncore validate`,
# `gnncore partition` and other readers stay fast and small.
_LAZY = {
    "GraphDirWriter": "gnncore.store.writer",
    "create_graph_dir": "gnncore.store.writer",
    "CSCGraphStore": "gnncore.store.graph_store",
    "EmptyFeatureStore": "gnncore.store.feature_store",
    "GraphDirFeatureStore": "gnncore.store.feature_store",
    "GraphDirGraphStore": "gnncore.store.graph_store",
    "TensorFeatureStore": "gnncore.store.feature_store",
}


__getattr__ = lazy_attributes(__name__, _LAZY)
