"""Versioned partitioned stores: a stage key over the inputs and settings, reuse."""

from __future__ import annotations

import json

import pytest

from conftest import planted_graph
from gnncore.outofcore.store import (
    PartitionedStore,
    reusable_store,
    store_dir,
    store_stage_key,
    write_partitioned_store,
)
from gnncore.partition import PartitionDir, partition_graph
from gnncore.progress import reporting
from gnncore.store import GraphDir


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ooc-versions")
    graph = GraphDir.open(planted_graph(root / "g", num_nodes=300, degree=8))
    partition_graph(graph.path, root / "p3", method="metis", parts=3, seed=0)
    partition_graph(graph.path, root / "p4", method="metis", parts=4, seed=0)
    return root, graph, PartitionDir.open(root / "p3", graph), PartitionDir.open(root / "p4", graph)


def mtimes(store: PartitionedStore) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in store.path.iterdir()}


def test_same_settings_reuse_the_store_without_rewriting(inputs):
    root, graph, p3, _ = inputs
    out = store_dir(root / "stores", graph, p3, 0.02)
    key = store_stage_key(graph, p3, 0.02)
    assert out.name == f"p3-store-s0.02-{key}" and out.parent == (root / "stores").absolute()
    assert reusable_store(out, key) is None  # nothing there yet
    first = write_partitioned_store(graph.path, p3.path, out, 0.02, reuse=True)
    assert first.info["stage_key"] == key and first.path == out
    written = mtimes(first)
    stages: list[str] = []
    with reporting(stages.append):
        again = write_partitioned_store(graph.path, p3.path, out, 0.02, reuse=True)
    assert again.path == out and again.info == first.info
    assert mtimes(again) == written
    assert stages == [f"reused {out} (stage key {key})"]
    # Without reuse the store is written again (same key recorded).
    stages.clear()
    with reporting(stages.append):
        rewritten = write_partitioned_store(graph.path, p3.path, out, 0.02)
    assert rewritten.info["stage_key"] == key
    assert "edge buckets" in stages and not any(s.startswith("reused") for s in stages)


def test_a_store_recording_another_key_or_a_damaged_one_is_rewritten(inputs):
    root, graph, p3, _ = inputs
    out = root / "plain"
    write_partitioned_store(graph.path, p3.path, out, 0.05)
    manifest = out / "manifest.json"
    info = json.loads(manifest.read_text())
    info["stage_key"] = "000000000000"
    manifest.write_text(json.dumps(info))
    key = store_stage_key(graph, p3, 0.05)
    assert reusable_store(out, key) is None
    assert (
        write_partitioned_store(graph.path, p3.path, out, 0.05, reuse=True).info["stage_key"] == key
    )
    (out / "edges.npy").write_bytes(b"truncated")
    assert reusable_store(out, key) is None
    store = write_partitioned_store(graph.path, p3.path, out, 0.05, reuse=True)
    store.verify()


def test_another_static_fraction_gets_another_dir(inputs):
    root, graph, p3, _ = inputs
    a = store_dir(root / "stores", graph, p3, 0.01)
    b = store_dir(root / "stores", graph, p3, 0.1)
    assert a != b and b.name.startswith("p3-store-s0.1-")
    assert store_stage_key(graph, p3, 0.01) != store_stage_key(graph, p3, 0.1)
    # An int and the equal float are the same setting.
    assert store_stage_key(graph, p3, 0) == store_stage_key(graph, p3, 0.0)


def test_another_partition_gets_another_key(inputs):
    _, graph, p3, p4 = inputs
    assert store_stage_key(graph, p3, 0.01) != store_stage_key(graph, p4, 0.01)
    # The key is a function of the inputs' manifests, not of where it is computed.
    assert store_stage_key(graph, p3, 0.01) == store_stage_key(graph, p3, 0.01)
