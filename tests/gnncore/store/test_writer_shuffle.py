"""The shuffled edge stream: numpy's permutation, whichever way it is drawn."""

from __future__ import annotations

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
