"""gnncore.sampler.DenseSampler and _C.sample_dense: DENSE sampling (thesis §3.3)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.loader import NodeLoader
from torch_geometric.nn import GraphSAGE

from conftest import assert_batch_matches_graph, planted_graph
from gnncore import _C
from gnncore.sampler import DenseSampler
from gnncore.store import GraphDir, GraphDirFeatureStore, GraphDirGraphStore
from gnncore.testing.dense_reference import dense_to_pyg_reference, sample_dense_reference
from gnncore.testing.graphs import node_input, random_csr


def check_pyg(
    indptr: np.ndarray, indices: np.ndarray, seeds: np.ndarray, fanouts: list[int], out
) -> None:
    node, row, col, edge = (t.numpy() for t in (out.node, out.row, out.col, out.edge))
    np.testing.assert_array_equal(node[: len(seeds)], seeds)  # targets first
    assert len(np.unique(node)) == len(node)
    assert sum(out.num_sampled_nodes) == len(node)
    assert sum(out.num_sampled_edges) == len(row) == len(col) == len(edge)
    np.testing.assert_array_equal(indices[edge], node[row])  # every edge is real
    targets = node[col]
    assert np.all((indptr[targets] <= edge) & (edge < indptr[targets + 1]))
    assert len(np.unique(edge)) == len(edge)  # without replacement
    # each node is sampled at most once per batch: its edges sit in one hop
    hop_of_edge = np.repeat(np.arange(len(out.num_sampled_edges)), out.num_sampled_edges)
    node_hop = np.unique(np.stack([col, hop_of_edge]), axis=1)
    assert len(np.unique(node_hop[0])) == node_hop.shape[1]
    degree = np.diff(indptr)
    start, begin = 0, 0
    for hop, (count, fanout) in enumerate(zip(out.num_sampled_edges, fanouts)):
        cols = col[start : start + count]
        end = begin + out.num_sampled_nodes[hop]
        assert np.all((begin <= cols) & (cols < end))  # only the previous delta
        assert np.all(np.diff(cols) >= 0)  # grouped per node in node order
        per_node = np.bincount(cols - begin, minlength=end - begin)
        want = degree[node[begin:end]]
        if fanout >= 0:
            want = np.minimum(want, fanout)
        np.testing.assert_array_equal(per_node, want)  # min(degree, fanout) each
        begin, start = end, start + count


def check_dense(layout, out) -> None:
    """The DENSE layout is consistent and converts to the PyG output."""
    node_ids, starts, nbrs, nbr_offsets, repr_, nbr_edges = layout
    np.testing.assert_array_equal(node_ids[repr_], nbrs)
    assert len(nbr_offsets) == len(node_ids) - (starts[1] if len(starts) > 1 else len(node_ids)) + 1
    for got, want in zip(_C.dense_to_pyg(*layout), dense_to_pyg_reference(layout)):
        np.testing.assert_array_equal(got, want)
    pyg = _C.dense_to_pyg(*layout)
    for got, want in zip((out.node, out.row, out.col, out.edge), pyg[:4]):
        np.testing.assert_array_equal(got.numpy(), want)
    assert out.num_sampled_nodes == pyg[4] and out.num_sampled_edges == pyg[5]


def test_full_fanout_equals_the_reference_exactly() -> None:
    indptr, indices = random_csr(60, 300, seed=1)
    seeds = np.array([3, 17, 0, 42])
    max_degree = int(np.diff(indptr).max())
    for fanouts in ([-1, -1], [max_degree, max_degree, -1], [max_degree] * 4):
        ref = sample_dense_reference(indptr, indices, seeds, fanouts, np.random.default_rng(0))
        got = _C.sample_dense(indptr, indices, seeds, fanouts, 5)
        for a, b in zip(got, ref):
            np.testing.assert_array_equal(a, b)
        out = DenseSampler((indptr, indices), fanouts, seed=5).sample_from_nodes(node_input(seeds))
        check_pyg(indptr, indices, seeds, fanouts, out)
        for a, b in zip((out.node, out.row, out.col, out.edge), dense_to_pyg_reference(ref)):
            np.testing.assert_array_equal(a.numpy(), b)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_small_fanout_invariants(index_dtype: type) -> None:
    indptr, indices = random_csr(300, 4000, seed=2)
    indices = indices.astype(index_dtype)
    seeds = np.array([5, 150, 7, 99, 0, 201])
    fanouts = [4, 3, 2]
    for batch_seed in range(4):
        layout = _C.sample_dense(indptr, indices, seeds, fanouts, batch_seed)
        out = DenseSampler((indptr, indices), fanouts, seed=batch_seed).sample_from_nodes(
            node_input(seeds)
        )
        check_pyg(indptr, indices, seeds, fanouts, out)
        # the DENSE layout of the same draws converts to the same PyG output
        sampler = DenseSampler((indptr, indices), fanouts, seed=batch_seed)
        dense = sampler.sample_dense(node_input(seeds))
        again = DenseSampler((indptr, indices), fanouts, seed=batch_seed).sample_from_nodes(
            node_input(seeds)
        )
        check_dense(tuple(dense.values()), again)
        for a, b in zip(
            _C.dense_to_pyg(*layout),
            _C.sample_dense_pyg(indptr, indices, seeds, fanouts, batch_seed),
        ):
            np.testing.assert_array_equal(a, b)


def test_reference_layout_converts_like_the_kernel() -> None:
    indptr, indices = random_csr(120, 900, seed=3)
    ref = sample_dense_reference(
        indptr, indices, np.array([1, 2, 3]), [3, 2], np.random.default_rng(7)
    )
    for got, want in zip(_C.dense_to_pyg(*ref), dense_to_pyg_reference(ref)):
        np.testing.assert_array_equal(got, want)


def test_nodes_reached_again_are_not_resampled() -> None:
    # a triangle 0-1-2 plus a tail 2-3: every node has its row sampled once
    src = np.array([1, 2, 0, 2, 0, 1, 3, 2])
    dst = np.array([0, 0, 1, 1, 2, 2, 2, 3])
    order = np.lexsort((src, dst))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=4))])
    indices = src[order]
    out = DenseSampler((indptr, indices), [-1, -1, -1]).sample_from_nodes(node_input([0]))
    assert out.num_sampled_nodes == [1, 2, 1, 0]
    assert out.num_sampled_edges == [2, 5, 1]  # rows of 0; of 1 and 2; of 3
    assert sorted(np.bincount(out.col.numpy()).tolist()) == [1, 2, 2, 3]


def test_determinism_and_thread_count_independence() -> None:
    indptr, indices = random_csr(5000, 60000, seed=4)
    seeds = np.random.default_rng(0).choice(5000, 800, replace=False)
    runs = [
        _C.sample_dense(indptr, indices, seeds, [10, 5, 3], 11, num_threads=t) for t in (1, 2, 3)
    ]
    for run in runs[1:]:
        for a, b in zip(run, runs[0]):
            np.testing.assert_array_equal(a, b)
    other = _C.sample_dense(indptr, indices, seeds, [10, 5, 3], 12)
    assert not np.array_equal(other[2], runs[0][2])
    a = DenseSampler((indptr, indices), [10, 5], seed=3, num_threads=1)
    b = DenseSampler((indptr, indices), [10, 5], seed=3, num_threads=2)
    for _ in range(2):
        x, y = a.sample_from_nodes(node_input(seeds)), b.sample_from_nodes(node_input(seeds))
        assert torch.equal(x.row, y.row) and torch.equal(x.node, y.node)
    assert not torch.equal(a.sample_from_nodes(node_input(seeds)).row, x.row)


def test_matches_the_hop_wise_kernel_for_the_same_seed() -> None:
    # _C.sample_neighbors (replace=False) also expands only each hop's new
    # nodes and draws from the same per-(seed, hop, position) generators.
    indptr, indices = random_csr(2000, 20000, seed=5)
    seeds = np.arange(0, 2000, 7)
    dense = _C.sample_dense_pyg(indptr, indices, seeds, [6, 4, 2], 9)
    hop = _C.sample_neighbors(indptr, indices, seeds, [6, 4, 2], 9)
    for a, b in zip(dense, hop):
        np.testing.assert_array_equal(a, b)


def test_rejects_bad_input() -> None:
    indptr, indices = random_csr(20, 60, seed=6)
    with pytest.raises(IndexError):
        _C.sample_dense(indptr, indices, np.array([20]), [2], 0)
    with pytest.raises(ValueError):
        _C.sample_dense(indptr, indices, np.array([0]), [-2], 0)
    with pytest.raises(ValueError):
        _C.sample_dense(indptr[:-1], indices, np.array([0]), [2], 0)
    bad = list(_C.sample_dense(indptr, indices, np.array([0, 1]), [2, 2], 0))
    assert len(bad[4]) > 0
    bad[4] = bad[4] + len(bad[0])  # repr outside node_ids
    with pytest.raises(ValueError):
        _C.dense_to_pyg(*bad)
    with pytest.raises(ValueError):
        DenseSampler((indptr, indices), [2]).sample_from_nodes(node_input([1, 1]))


@pytest.mark.parametrize("threads", [1, 2])
def test_a_neighbour_outside_the_graph_raises_from_the_pipelined_hop(threads: int) -> None:
    # With several threads a hop's draws and its id mapping run pipelined on
    # different threads; the error of the mapping thread must still surface.
    indptr, indices = random_csr(3000, 30000, seed=8)
    indices = indices.copy()
    indices[len(indices) // 2] = 3000  # one entry past the last node
    seeds = np.arange(3000)  # every row is expanded, in many chunks
    with pytest.raises(IndexError, match="outside"):
        _C.sample_dense_pyg(indptr, indices, seeds, [-1], 0, num_threads=threads)


def test_pipelined_hops_agree_across_id_maps_and_thread_counts() -> None:
    # 1,000 targets: every hop is pipelined (draws on one thread, id mapping on
    # another) with 2 threads, through the direct array and the hash map alike.
    indptr, indices = random_csr(4000, 48000, seed=10)
    seeds = np.random.default_rng(1).choice(4000, 1000, replace=False)
    runs = [_C.sample_dense_pyg(indptr, indices, seeds, [8, 4], 5, num_threads=1)]
    previous = _C.set_sampler_direct_map_limit(0)  # the hash map
    try:
        runs.append(_C.sample_dense_pyg(indptr, indices, seeds, [8, 4], 5, num_threads=2))
    finally:
        _C.set_sampler_direct_map_limit(previous)
    runs.append(_C.sample_dense_pyg(indptr, indices, seeds, [8, 4], 5, num_threads=2))
    for run in runs[1:]:
        for got, want in zip(run, runs[0]):
            np.testing.assert_array_equal(got, want)
    assert sum(runs[0][5]) > 8000  # the hops drew many chunks' worth of edges


@pytest.mark.parametrize("num_layers", [2, 3])
def test_graphsage_trimmed_forward_matches_untrimmed(tmp_path, num_layers: int) -> None:
    graph = GraphDir.open(planted_graph(tmp_path / "g", num_nodes=300, features=6))
    features, topology = GraphDirFeatureStore(graph), GraphDirGraphStore(graph)
    train = torch.from_numpy(graph.split("train").copy())
    fanouts = [5, 4, 3][:num_layers]
    loader = NodeLoader(
        data=(features, topology),
        node_sampler=DenseSampler(topology, fanouts, seed=0),
        input_nodes=train,
        batch_size=16,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
    )
    torch.manual_seed(0)
    model = GraphSAGE(6, 8, num_layers, out_channels=4).eval()
    batches = 0
    for batch in loader:
        assert_batch_matches_graph(batch, graph, train)
        with torch.no_grad():
            full = model(batch.x, batch.edge_index)[: batch.batch_size]
            trimmed = model(
                batch.x,
                batch.edge_index,
                num_sampled_nodes_per_hop=batch.num_sampled_nodes,
                num_sampled_edges_per_hop=batch.num_sampled_edges,
            )
        assert trimmed.shape[0] >= batch.batch_size
        torch.testing.assert_close(trimmed[: batch.batch_size], full)
        batches += 1
    assert batches == (len(train) + 15) // 16


def test_bench_sampling_writes_a_table(tmp_path) -> None:
    from gnncore.cli.main import main
    from gnncore_bench.sampler import bench_sampling

    graph_dir = planted_graph(tmp_path / "g", num_nodes=300, features=4)
    result = bench_sampling(
        graph_dir,
        [[4, 3], [-1]],
        batch_size=20,
        batches=3,
        out_dir=tmp_path / "out",
        seed=1,
        num_threads=2,
    )
    rows = {(tuple(r["fanouts"]), r["sampler"]): r for r in result["rows"]}
    assert len(rows) == 6 and result["threads"] == 2
    assert result["huge_pages"]  # the default: one huge-page copy of the CSR
    assert "CSR in huge pages" in (tmp_path / "out" / "sampling.md").read_text()
    # the file mapping draws the same samples
    mapped = bench_sampling(
        graph_dir, [[4, 3]], 20, 3, tmp_path / "mapped", seed=1, num_threads=2, huge_pages=False
    )
    assert not mapped["huge_pages"]
    for r in mapped["rows"]:
        twin = rows[tuple(r["fanouts"]), r["sampler"]]
        assert (r["nodes_per_batch"], r["edges_per_batch"]) == (
            twin["nodes_per_batch"],
            twin["edges_per_batch"],
        )
    for fanouts in ((4, 3), (-1,)):
        dense, per_layer = rows[fanouts, "dense"], rows[fanouts, "per-layer"]
        layout = rows[fanouts, "dense, Alg. 1 layout"]  # same draws as dense
        assert (layout["nodes_per_batch"], layout["edges_per_batch"]) == (
            dense["nodes_per_batch"],
            dense["edges_per_batch"],
        )
        # hop 0 draws alike; later hops of per-layer also re-sample the seeds
        assert per_layer["edges_per_batch"] >= dense["edges_per_batch"]
        assert dense["ms_q1"] <= dense["ms_per_batch"] <= dense["ms_q3"]
        assert dense["edges_per_s"] == pytest.approx(
            dense["edges_per_batch"] / dense["ms_per_batch"] * 1000.0
        )
        assert dense["cpu_ms_per_batch"] > 0
        assert per_layer["time_vs_per_layer"] == 1.0 and dense["time_vs_per_layer"] > 0
    assert rows[(4, 3), "per-layer"]["edges_per_batch"] > rows[(4, 3), "dense"]["edges_per_batch"]
    assert [x["fanouts"] for x in result["load_average_1min"]] == [[4, 3], [-1]]
    assert "| 4,3 | dense |" in (tmp_path / "out" / "sampling.md").read_text()
    assert (tmp_path / "out" / "sampling.json").exists()
    assert (
        main(
            [
                "bench",
                "sampling",
                str(graph_dir),
                "--fanouts",
                "3,2",
                "--batch-size",
                "10",
                "--batches",
                "2",
                "--out",
                str(tmp_path / "cli"),
                "--json",
                str(tmp_path / "cli.json"),
            ]
        )
        == 0
    )
    assert (tmp_path / "cli" / "sampling.md").exists() and (tmp_path / "cli.json").exists()
