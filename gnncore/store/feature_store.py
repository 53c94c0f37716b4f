r"""A read-only PyG :class:`~torch_geometric.data.FeatureStore` over a graph directory.

Assumptions of this store:

* The graph is homogeneous: every tensor has ``group_name=None``.
* Node attributes only: ``"x"`` is ``features.npy`` (float32 ``[N, F]``) and
  ``"y"`` is ``labels.npy`` (int64 ``[N]``, ``-1`` = unlabelled); an attribute
  is present when its file is.
* The arrays stay on disk. A request for rows (a tensor, NumPy array, slice or
  int index) gathers just those rows from the memory map into a fresh tensor,
  so a graph larger than memory can feed a loader; a request without an index
  returns a zero-copy tensor over the whole (copy-on-write) mapping.
* Read-only: :meth:`put_tensor` and :meth:`remove_tensor` raise. Write a new
  graph directory with :func:`gnncore.store.create_graph_dir` instead.

:class:`~torch_geometric.loader.NodeLoader` joins features onto a sampled
subgraph through :meth:`~torch_geometric.data.FeatureStore.multi_get_tensor`,
which calls :meth:`_get_tensor` once per attribute here; a cached or placed
backend would override :meth:`_multi_get_tensor` instead.
"""

from __future__ import annotations

import mmap
import os
from typing import Any

import numpy as np
import torch
from torch_geometric.data import FeatureStore, TensorAttr

from gnncore.store.graph_dir import GraphDir
from gnncore.store.npy import load_npy

#: Attribute name -> array name in the graph directory.
NODE_ATTRS = {"x": "features", "y": "labels"}


def mapped_tensor(graph: GraphDir, name: str) -> torch.Tensor:
    """A zero-copy tensor over ``name.npy`` of ``graph``.

    The file is mapped copy-on-write (``mmap_mode="c"``): pages are shared with
    the page cache, the tensor is writable as far as torch is concerned, and a
    write would only touch a private copy, never the file.
    """
    file = f"{name}.npy"
    if file not in graph.manifest.files:
        raise KeyError(f"{graph.path} has no {file}")
    return torch.from_numpy(load_npy(graph.path / file, mmap_mode="c"))


def advise_random(array: np.ndarray) -> bool:
    """Tell the kernel a memory-mapped array is read at random
    (``madvise(MADV_RANDOM)``): a sampled mini-batch touches scattered rows, and
    the default read-ahead (up to megabytes per fault on some disks) would read
    far more than those rows and evict them again under memory pressure.
    Returns whether the advice was given (not on every platform)."""
    mapping = getattr(array, "_mmap", None)
    advice = getattr(mmap, "MADV_RANDOM", None)
    if mapping is None or advice is None:
        return False
    mapping.madvise(advice)
    return True


def _as_graph_dir(graph: GraphDir | str | os.PathLike[str]) -> GraphDir:
    return graph if isinstance(graph, GraphDir) else GraphDir.open(graph)


class GraphDirFeatureStore(FeatureStore):
    r"""Node features (``"x"``) and labels (``"y"``) of a graph directory.

    Args:
        graph (GraphDir or str or PathLike): An opened graph directory or its path.
    """

    def __init__(self, graph: GraphDir | str | os.PathLike[str]) -> None:
        super().__init__()
        self.graph = _as_graph_dir(graph)
        self._arrays: dict[str, np.ndarray] = {}

    @property
    def attr_names(self) -> list[str]:
        """The attributes this directory provides, in a fixed order."""
        return [attr for attr, name in NODE_ATTRS.items() if self.graph.has(name)]

    def _array(self, attr_name: str) -> np.ndarray:
        array = self._arrays.get(attr_name)
        if array is None:
            array = self.graph.array(NODE_ATTRS[attr_name])
            advise_random(array)
            self._arrays[attr_name] = array
        return array

    def _check(self, attr: TensorAttr) -> str:
        if attr.group_name is not None:
            raise KeyError(
                f"{type(self).__name__} holds a homogeneous graph; got group "
                f"{attr.group_name!r} (use group_name=None)"
            )
        if attr.attr_name not in self.attr_names:
            raise KeyError(
                f"{self.graph.path} has no node attribute {attr.attr_name!r} "
                f"(has {self.attr_names})"
            )
        return str(attr.attr_name)

    # Core (CRUD) -------------------------------------------------------------

    def _put_tensor(self, tensor: Any, attr: TensorAttr) -> bool:
        raise NotImplementedError(
            f"{type(self).__name__} is read-only; write a new graph "
            "directory with gnncore.store.create_graph_dir"
        )

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        raise NotImplementedError(f"{type(self).__name__} is read-only")

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor:
        name = self._check(attr)
        index = attr.index
        if index is None or (isinstance(index, slice) and index == slice(None)):
            return mapped_tensor(self.graph, NODE_ATTRS[name])
        array = self._array(name)
        if isinstance(index, torch.Tensor):
            index = index.detach().to("cpu", torch.long).numpy()
        if isinstance(index, np.ndarray):
            # Fancy indexing gathers the rows into a new, writable in-memory array.
            return torch.from_numpy(np.take(array, index.astype(np.int64, copy=False), axis=0))
        if isinstance(index, slice):
            return torch.from_numpy(np.array(array[index]))
        return torch.from_numpy(np.array(array[int(index)]))

    # Additional methods ------------------------------------------------------

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...]:
        name = self._check(attr)
        shape = self.graph.manifest.files[f"{NODE_ATTRS[name]}.npy"].shape
        assert shape is not None  # GraphDir.open checked every .npy entry
        index = attr.index
        if index is None or isinstance(index, slice):
            rows = len(range(*(index or slice(None)).indices(shape[0])))
        elif isinstance(index, (torch.Tensor, np.ndarray)):
            rows = len(index)
        else:
            return tuple(shape[1:])
        return (rows, *shape[1:])

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        return [self._tensor_attr_cls(None, name, None) for name in self.attr_names]

    # Pickling (DataLoader workers started with "spawn") -----------------------

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_arrays"] = {}  # memory maps would be pickled as full copies
        return state

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.graph.path)!r}, attrs={self.attr_names})"


class EmptyFeatureStore(FeatureStore):
    """A feature store without attributes, for graphs whose nodes have no features
    (the model learns node embeddings instead); loaders then join nothing."""

    def _put_tensor(self, tensor: Any, attr: TensorAttr) -> bool:
        raise NotImplementedError(f"{type(self).__name__} holds no tensors")

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        raise NotImplementedError(f"{type(self).__name__} holds no tensors")

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor:
        raise KeyError(f"no node attribute {attr.attr_name!r}: this store holds no features")

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...]:
        raise KeyError(f"no node attribute {attr.attr_name!r}: this store holds no features")

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        return []


class TensorFeatureStore(FeatureStore):
    """Node attributes held in memory as tensors (``{"x": ..., "y": ...}``),
    read-only: the store of a mega-batch's cached subgraph and of in-memory
    training.

    Args:
        tensors (dict[str, Tensor or array]): Attribute name -> rows by node id.
    """

    def __init__(self, tensors: dict[str, Any]) -> None:
        super().__init__()
        self._tensors = {name: torch.as_tensor(t) for name, t in tensors.items()}

    def _put_tensor(self, tensor: Any, attr: TensorAttr) -> bool:
        raise NotImplementedError(f"{type(self).__name__} is read-only")

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        raise NotImplementedError(f"{type(self).__name__} is read-only")

    def _tensor(self, attr: TensorAttr) -> torch.Tensor:
        if attr.group_name is not None or attr.attr_name not in self._tensors:
            raise KeyError(f"no node attribute {attr.attr_name!r} (have {sorted(self._tensors)})")
        return self._tensors[attr.attr_name]

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor:
        tensor = self._tensor(attr)
        index = attr.index
        if index is None or (isinstance(index, slice) and index == slice(None)):
            return tensor
        if isinstance(index, np.ndarray):
            index = torch.from_numpy(index.astype(np.int64, copy=False))
        return tensor[index]

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...]:
        return tuple(self._tensor(attr).shape)

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        return [self._tensor_attr_cls(None, name, None) for name in self._tensors]
