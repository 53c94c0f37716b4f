"""The on-disk graph format (see docs/FORMAT.md) and PyG storage views of it."""

from gnncore.store.atomic import atomic_directory
from gnncore.store.graph_dir import GraphDir, open_graph
from gnncore.store.manifest import FORMAT_VERSION, Manifest
from gnncore.store.writer import GraphDirWriter, create_graph_dir, index_dtype

__all__ = [
    "FORMAT_VERSION",
    "GraphDir",
    "GraphDirWriter",
    "Manifest",
    "atomic_directory",
    "create_graph_dir",
    "index_dtype",
    "open_graph",
]
