"""symmetric_degree against a whole-array count of the distinct undirected pairs."""

import numpy as np
import pytest

from gnncore.io import ingest
from gnncore.partition.base import symmetric_degree, undirected_edges
from gnncore.store import GraphDir


@pytest.mark.parametrize("directed", [False, True])
def test_symmetric_degree_matches_the_pair_count(tmp_path, directed):
    rng = np.random.default_rng(4)
    pairs = rng.integers(0, 300, (3000, 2))  # repeats, both directions and self-loops
    source = tmp_path / "g.csv"
    source.write_text("".join(f"{a},{b}\n" for a, b in pairs))
    ingest(source, tmp_path / "g", directed=directed)
    graph = GraphDir.open(tmp_path / "g")
    u, v = undirected_edges(graph)
    expected = np.bincount(u, minlength=graph.num_nodes) + np.bincount(v, minlength=graph.num_nodes)
    for chunk_rows in (7, 1 << 22):  # many chunks, one chunk
        got = symmetric_degree(graph, chunk_rows=chunk_rows)
        assert got.dtype == np.int64 and np.array_equal(got, expected)
