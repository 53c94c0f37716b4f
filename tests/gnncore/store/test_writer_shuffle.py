"""The writer's shuffled edge stream (numpy's permutation, whichever way it is
drawn) and its background checksums."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gnncore.store.writer import GraphDirWriter


@pytest.mark.parametrize("num_nodes", [1000, 1 << 33])  # C++ draws on packed keys / numpy
def test_shuffled_pairs_follow_numpys_permutation(tmp_path, num_nodes: int) -> None:
    rng = np.random.default_rng(3)
    u = rng.integers(0, 999, 5000)
    v = u + 1 + rng.integers(0, 5, 5000)
    writer = GraphDirWriter(tmp_path, "g")
    writer._write_shuffled(u, v, num_nodes, seed=11)
    perm = np.random.default_rng(11).permutation(len(u))
    shuffled = np.load(tmp_path / "edges_shuffled.npy")
    assert shuffled.dtype == (np.int32 if num_nodes < 1 << 31 else np.int64)
    np.testing.assert_array_equal(shuffled, np.stack([u[perm], v[perm]], axis=1))


def test_background_checksums_are_the_files_sha256(tmp_path) -> None:
    from gnncore.store.manifest import sha256_of
    from gnncore.store.writer import create_graph_dir

    with create_graph_dir(tmp_path / "g", "g") as writer:
        writer.write_topology(4, np.array([0, 1, 2]), np.array([1, 2, 3]), directed=False)
        writer.save_array("train_idx", np.arange(2))
        writer.hash_in_background("train_idx.npy")
        with pytest.raises(ValueError, match="not a registered file"):
            writer.hash_in_background("features.npy")
    manifest = json.loads((tmp_path / "g" / "manifest.json").read_text())
    for name, entry in manifest["files"].items():
        assert entry["sha256"] == sha256_of(tmp_path / "g" / name), name
