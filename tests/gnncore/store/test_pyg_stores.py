"""PyG FeatureStore / GraphStore views of a graph directory (gnncore.store.*_store)."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import torch
from torch_geometric.data import EdgeAttr, FeatureStore, GraphStore, TensorAttr

from conftest import planted_graph
from gnncore.store import GraphDir, GraphDirFeatureStore, GraphDirGraphStore


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> GraphDir:
    return GraphDir.open(
        planted_graph(tmp_path_factory.mktemp("stores") / "g", num_nodes=120, features=6)
    )


def test_features_and_labels_for_an_index(graph: GraphDir) -> None:
    store = GraphDirFeatureStore(graph)
    assert isinstance(store, FeatureStore)
    x, y = np.asarray(graph.features()), np.asarray(graph.labels())
    idx = torch.tensor([5, 0, 119, 5, 42])
    got = store.get_tensor(group_name=None, attr_name="x", index=idx)
    assert got.dtype == torch.float32 and got.shape == (5, 6)
    np.testing.assert_array_equal(got.numpy(), x[idx.numpy()])
    labels = store[None, "y", idx]
    assert labels.dtype == torch.int64
    np.testing.assert_array_equal(labels.numpy(), y[idx.numpy()])
    # numpy, slice and int indices
    # (PyG's TensorAttr cannot hold a NumPy index through the public API: is_set
    # compares it with ==; the store itself accepts one.)
    np.testing.assert_array_equal(
        store._get_tensor(TensorAttr(None, "x", np.array([3, 1]))).numpy(), x[[3, 1]]
    )
    np.testing.assert_array_equal(store.get_tensor(None, "x", slice(10, 20, 3)).numpy(), x[10:20:3])
    np.testing.assert_array_equal(store.get_tensor(None, "y", 7).numpy(), y[7])


def test_whole_tensor_is_a_writable_zero_copy_map(graph: GraphDir) -> None:
    store = GraphDirFeatureStore(graph)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns on read-only numpy arrays
        full = store.get_tensor(None, "x", None)
    np.testing.assert_array_equal(full.numpy(), np.asarray(graph.features()))
    full[0, 0] = 123.0  # copy-on-write: never reaches the file
    assert float(np.load(graph.path / "features.npy")[0, 0]) != 123.0


def test_sizes_attrs_and_multi_get(graph: GraphDir) -> None:
    store = GraphDirFeatureStore(graph)
    assert store.get_tensor_size(None, "x") == (120, 6)
    assert store.get_tensor_size(None, "y") == (120,)
    assert store.get_tensor_size(None, "x", torch.arange(4)) == (4, 6)
    attrs = store.get_all_tensor_attrs()
    assert [(a.group_name, a.attr_name) for a in attrs] == [(None, "x"), (None, "y")]
    for attr in attrs:
        attr.index = torch.tensor([2, 3])
    x, y = store.multi_get_tensor(attrs)
    assert x.shape == (2, 6) and y.shape == (2,)


def test_feature_store_is_read_only_and_names_bad_keys(graph: GraphDir) -> None:
    store = GraphDirFeatureStore(graph)
    with pytest.raises(NotImplementedError, match="read-only"):
        store.put_tensor(torch.zeros(120, 6), group_name=None, attr_name="x", index=None)
    with pytest.raises(NotImplementedError, match="read-only"):
        store.remove_tensor(group_name=None, attr_name="x", index=None)
    with pytest.raises(KeyError, match="edge_attr"):
        store.get_tensor(None, "edge_attr", None)
    with pytest.raises(KeyError, match="homogeneous"):
        store.get_tensor(TensorAttr("paper", "x", None))


def test_graph_store_exposes_csc_without_copies(graph: GraphDir) -> None:
    store = GraphDirGraphStore(graph)
    assert isinstance(store, GraphStore)
    (attr,) = store.get_all_edge_attrs()
    assert attr.edge_type is None and attr.layout.value == "csc" and attr.size == (120, 120)
    row, colptr, perm = store.csc()
    assert perm is None
    np.testing.assert_array_equal(colptr.numpy(), graph.indptr)
    np.testing.assert_array_equal(row.numpy(), graph.indices)
    row2, colptr2 = store.get_edge_index(edge_type=None, layout="csc")
    assert row2.data_ptr() == row.data_ptr() and colptr2.data_ptr() == colptr.data_ptr()


def test_graph_store_converts_to_coo_and_is_read_only(graph: GraphDir) -> None:
    store = GraphDirGraphStore(graph)
    src, dst, _ = store.coo()
    indptr = np.asarray(graph.indptr)
    expected_dst = np.repeat(np.arange(120), np.diff(indptr))
    np.testing.assert_array_equal(dst.numpy(), expected_dst)
    np.testing.assert_array_equal(src.numpy(), graph.indices)
    with pytest.raises(KeyError):
        store.get_edge_index(edge_type=None, layout="csr")
    with pytest.raises(KeyError):
        store.get_edge_index(edge_type=("a", "to", "b"), layout="csc")
    with pytest.raises(NotImplementedError, match="read-only"):
        store.put_edge_index((src, dst), EdgeAttr(None, "coo"))


def test_stores_pickle_small_and_reopen(graph: GraphDir) -> None:
    features, topology = GraphDirFeatureStore(graph), GraphDirGraphStore(graph)
    features.get_tensor(None, "x", torch.tensor([1]))
    topology.csc()
    for store in (features, topology):
        blob = pickle.dumps(store)
        assert len(blob) < 20_000  # the memory maps are not pickled
    again = pickle.loads(pickle.dumps(features))
    np.testing.assert_array_equal(
        again.get_tensor(None, "x", torch.tensor([4])).numpy(), np.asarray(graph.features())[[4]]
    )
    row, colptr, _ = pickle.loads(pickle.dumps(topology)).csc()
    np.testing.assert_array_equal(colptr.numpy(), graph.indptr)


def test_opened_from_a_path(graph: GraphDir) -> None:
    assert GraphDirFeatureStore(graph.path).get_tensor_size(None, "x") == (120, 6)
    assert GraphDirGraphStore(str(graph.path)).num_nodes == 120


@pytest.mark.skipif(not hasattr(__import__("mmap"), "MADV_RANDOM"), reason="no madvise here")
def test_mapped_features_are_advised_random_access(graph: GraphDir) -> None:
    from gnncore.store.feature_store import advise_random

    store = GraphDirFeatureStore(graph)
    store.get_tensor(group_name=None, attr_name="x", index=torch.tensor([3, 1]))
    mapped = store._arrays["x"]
    assert isinstance(mapped, np.memmap) and advise_random(mapped)
    assert not advise_random(np.zeros(3))  # an in-memory array: nothing to advise


def test_tensor_feature_store_serves_rows(graph: GraphDir) -> None:
    from gnncore.store import TensorFeatureStore

    x = torch.arange(12.0).reshape(6, 2)
    store = TensorFeatureStore({"x": x, "y": torch.arange(6)})
    assert torch.equal(
        store.get_tensor(group_name=None, attr_name="x", index=torch.tensor([4, 0])), x[[4, 0]]
    )
    assert torch.equal(
        store.get_tensor(group_name=None, attr_name="y", index=np.array([5])), torch.tensor([5])
    )
    assert store.get_tensor_size(group_name=None, attr_name="x") == (6, 2)
    with pytest.raises(KeyError, match="no node attribute 'z'"):
        store.get_tensor(group_name=None, attr_name="z", index=None)
    with pytest.raises(NotImplementedError):
        store.put_tensor(x, group_name=None, attr_name="x", index=None)
