"""The partitioned store against a plain reference built from the graph directory."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import planted_graph
from gnncore.errors import InputError
from gnncore.outofcore.store import PartitionedStore, write_partitioned_store
from gnncore.partition import partition_graph
from gnncore.store import GraphDir


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("ooc")
    graph = GraphDir.open(planted_graph(root / "g", num_nodes=500, degree=10))
    partition_graph(graph.path, root / "part", method="metis", parts=4, seed=0)
    store = write_partitioned_store(graph.path, root / "part", root / "store", static_fraction=0.02)
    return graph, np.load(root / "part" / "assignment.npy"), store


def test_nodes_are_contiguous_per_partition_in_id_order(built):
    graph, assignment, store = built
    order = np.asarray(store.array("node_order"))
    assert sorted(order.tolist()) == list(range(graph.num_nodes))
    for part in range(store.parts):
        lo, hi = store.offsets[part], store.offsets[part + 1]
        assert order[lo:hi].tolist() == np.flatnonzero(assignment == part).tolist()
    node_map = np.asarray(store.array("node_map"))
    assert (node_map[order] == np.arange(graph.num_nodes)).all()


def test_features_labels_splits_follow_the_new_ids(built):
    graph, _, store = built
    order = np.asarray(store.array("node_order"))
    x = np.asarray(graph.features())
    for part in range(store.parts):
        lo, hi = store.offsets[part], store.offsets[part + 1]
        assert np.array_equal(store.partition_features(part), x[order[lo:hi]])
    assert np.array_equal(store.array("labels"), np.asarray(graph.labels())[order])
    node_map = np.asarray(store.array("node_map"))
    assert sorted(node_map[graph.split("train")].tolist()) == store.array("train_idx").tolist()


def test_every_edge_lies_once_in_its_bucket(built):
    graph, assignment, store = built
    node_map = np.asarray(store.array("node_map"))
    indptr, indices = np.asarray(graph.indptr), np.asarray(graph.indices)
    expected: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for v in range(graph.num_nodes):  # the slow way: edge u -> v for u in row v
        for u in indices[indptr[v] : indptr[v + 1]]:
            key = (int(assignment[u]), int(assignment[v]))
            expected.setdefault(key, []).append((int(node_map[u]), int(node_map[v])))
    total = 0
    for i in range(store.parts):
        for j in range(store.parts):
            bucket = store.bucket(i, j)
            pairs = [tuple(e) for e in bucket.tolist()]
            assert sorted(pairs) == sorted(expected.get((i, j), []))
            assert pairs == sorted(pairs, key=lambda e: (e[1], e[0]))  # sorted by dst, src
            total += len(pairs)
    assert total == len(indices)
    for j in range(store.parts):  # a partition's in-edges: its column of buckets, in one range
        column = np.concatenate([store.bucket(i, j) for i in range(store.parts)])
        assert np.array_equal(store.in_edges(j), column)


def test_static_set_is_the_highest_degree_nodes_with_their_lists(built):
    graph, _, store = built
    degree = np.diff(np.asarray(graph.indptr))
    node_map = np.asarray(store.array("node_map"))
    static = np.asarray(store.array("static_nodes"))
    assert len(static) == round(0.02 * graph.num_nodes)
    threshold = np.sort(degree)[::-1][len(static) - 1]
    order = np.asarray(store.array("node_order"))
    assert (degree[order[static]] >= threshold).all()
    sp, si = np.asarray(store.array("static_indptr")), np.asarray(store.array("static_indices"))
    indptr, indices = np.asarray(graph.indptr), np.asarray(graph.indices)
    for k, new in enumerate(static):
        old = order[new]
        assert (
            si[sp[k] : sp[k + 1]].tolist()
            == node_map[indices[indptr[old] : indptr[old + 1]]].tolist()
        )
    x = np.asarray(graph.features())
    assert np.array_equal(store.array("static_features"), x[order[static]])


def test_truncated_and_corrupted_files_are_named(built, tmp_path):
    graph, _, store = built
    import shutil

    copy = tmp_path / "store"
    shutil.copytree(store.path, copy)
    store_copy = PartitionedStore.open(copy)
    store_copy.verify()
    edges = copy / "edges.npy"
    data = bytearray(edges.read_bytes())
    data[-1] ^= 0xFF
    edges.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"edges.npy: sha256 does not match"):
        PartitionedStore.open(copy).verify()
    with edges.open("r+b") as f:
        f.truncate(len(data) - 16)
    with pytest.raises(InputError, match=r"edges.npy: missing, or its size differs"):
        PartitionedStore.open(copy)


def test_bad_arguments_and_outputs_are_refused(built, tmp_path):
    graph, _, store = built
    part = store.info["partition"]
    with pytest.raises(InputError, match="static_fraction"):
        write_partitioned_store(graph.path, part, tmp_path / "s", static_fraction=1.5)
    with pytest.raises(InputError, match="is \\(or holds\\) the input"):
        write_partitioned_store(graph.path, part, graph.path)
    other = GraphDir.open(planted_graph(tmp_path / "other", num_nodes=300))
    with pytest.raises(InputError):
        write_partitioned_store(other.path, part, tmp_path / "s2")
    again = write_partitioned_store(graph.path, part, store.path, static_fraction=0.02)
    assert again.info["files"] == store.info["files"]  # re-running rewrites the same bytes


def test_cli_writes_and_verifies_a_store(built, tmp_path):
    import json

    from gnncore.cli.main import main

    graph, _, store = built
    out = tmp_path / "cli-store"
    assert main(["store", str(graph.path), store.info["partition"], str(out),
                 "--static-fraction", "0.05", "--json", str(tmp_path / "s.json")]) == 0  # fmt: skip
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["num_static"] == 25 and summary["parts"] == 4
    assert main(["store", "-", "-", str(out), "--verify"]) == 0
