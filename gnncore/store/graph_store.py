r"""A read-only PyG :class:`~torch_geometric.data.GraphStore` over a graph directory.

Assumptions of this store:

* The graph is homogeneous: its single edge attribute has ``edge_type=None``.
* The adjacency is stored once, as CSC in PyG's terms: ``indptr`` is the
  ``colptr`` (one entry per destination node) and ``indices`` the ``row``
  (the source of each edge into that node, sorted within a node). An
  undirected graph stores every edge in both directions. Other layouts
  (``coo()``, ``csr()``) are converted on request by PyG's helpers; samplers
  should ask for :meth:`~torch_geometric.data.GraphStore.csc`, which costs
  nothing here.
* Tensors are zero-copy views of the memory-mapped files, so opening a graph
  larger than memory is cheap.
* Read-only: :meth:`put_edge_index` and :meth:`remove_edge_index` raise.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch_geometric.data import EdgeAttr, GraphStore
from torch_geometric.data.graph_store import EdgeLayout

from gnncore.store.feature_store import _as_graph_dir, mapped_tensor
from gnncore.store.graph_dir import GraphDir


class GraphDirGraphStore(GraphStore):
    r"""The adjacency of a graph directory as PyG CSC ``(row, colptr)``.

    Args:
        graph (GraphDir or str or PathLike): An opened graph directory or its path.
    """

    def __init__(self, graph: GraphDir | str | os.PathLike[str]) -> None:
        super().__init__()
        self.graph = _as_graph_dir(graph)
        self._csc: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def num_nodes(self) -> int:
        return self.graph.num_nodes

    @property
    def edge_attr(self) -> EdgeAttr:
        """The one stored edge attribute: homogeneous, CSC, with its size."""
        n = self.graph.num_nodes
        return self._edge_attr_cls(None, EdgeLayout.CSC, True, (n, n))

    def _tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._csc is None:
            self._csc = (mapped_tensor(self.graph, "indices"), mapped_tensor(self.graph, "indptr"))
        return self._csc

    # Core (CRUD) -------------------------------------------------------------

    def _put_edge_index(self, edge_index: Any, edge_attr: EdgeAttr) -> bool:
        raise NotImplementedError(
            f"{type(self).__name__} is read-only; write a new graph "
            "directory with gnncore.store.create_graph_dir"
        )

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        raise NotImplementedError(f"{type(self).__name__} is read-only")

    def _get_edge_index(self, edge_attr: EdgeAttr) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(row, colptr)`` for the homogeneous CSC attribute, else ``None``.

        ``None`` makes :meth:`get_edge_index` raise ``KeyError``; other layouts
        are reached through :meth:`coo` / :meth:`csr`, which convert from CSC.
        """
        n = self.graph.num_nodes
        if (
            edge_attr.edge_type is not None
            or edge_attr.layout != EdgeLayout.CSC
            or edge_attr.size not in (None, (n, n))
        ):
            return None
        return self._tensors()

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        return [self.edge_attr]

    # Pickling (DataLoader workers started with "spawn") -----------------------

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_csc"] = None  # re-mapped on first use instead of pickled in full
        return state

    def __repr__(self) -> str:
        m = self.graph.manifest
        return (
            f"{type(self).__name__}({str(self.graph.path)!r}, num_nodes={m.num_nodes}, "
            f"num_edges={m.num_edges})"
        )


class CSCGraphStore(GraphStore):
    r"""A homogeneous adjacency held in memory as CSC ``(row, colptr)``.

    For graphs derived at run time, e.g. the message-passing graph of link
    prediction (training edges only, both directions).

    Args:
        indptr (Tensor or array): int64 ``[N + 1]`` (PyG's ``colptr``).
        indices (Tensor or array): ``[E]`` sources of the edges into each
            node (PyG's ``row``).
    """

    def __init__(self, indptr: Any, indices: Any) -> None:
        super().__init__()
        self._colptr = torch.as_tensor(indptr, dtype=torch.int64)
        self._row = torch.as_tensor(indices)
        if self._colptr.dim() != 1 or self._colptr.numel() < 1:
            raise ValueError("indptr must be a 1-d array of length N + 1")
        if int(self._colptr[-1]) != self._row.numel():
            raise ValueError(
                f"indptr ends at {int(self._colptr[-1])} but indices has "
                f"{self._row.numel()} entries"
            )

    @property
    def num_nodes(self) -> int:
        return self._colptr.numel() - 1

    def _put_edge_index(self, edge_index: Any, edge_attr: EdgeAttr) -> bool:
        raise NotImplementedError(f"{type(self).__name__} is read-only")

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        raise NotImplementedError(f"{type(self).__name__} is read-only")

    def _get_edge_index(self, edge_attr: EdgeAttr) -> tuple[torch.Tensor, torch.Tensor] | None:
        n = self.num_nodes
        if (
            edge_attr.edge_type is not None
            or edge_attr.layout != EdgeLayout.CSC
            or edge_attr.size not in (None, (n, n))
        ):
            return None
        return self._row, self._colptr

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        n = self.num_nodes
        return [self._edge_attr_cls(None, EdgeLayout.CSC, True, (n, n))]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_nodes={self.num_nodes}, num_edges={self._row.numel()})"
