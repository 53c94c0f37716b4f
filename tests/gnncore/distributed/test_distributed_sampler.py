"""Cross-partition sampling on 2 gloo ranks against single-process sampling."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from conftest import planted_graph
from gnncore.distributed.launch import spawn_local
from gnncore.distributed.rank_write import write_rank_data
from gnncore.partition.run import partition_graph
from gnncore.partition.store import PartitionDir
from gnncore.sampler.neighbor import NeighborSampler
from gnncore.store import GraphDir
from gnncore.testing.graphs import node_input

FANOUTS = [3, 2]
BATCHES = 200


def _batch_seeds(rank: int, num_nodes: int) -> np.ndarray:
    """Each rank's fixed seed set: 12 distinct nodes of the whole graph."""
    return np.random.default_rng([11, rank]).choice(num_nodes, 12, replace=False)


def _arrays(out) -> dict:
    return {
        "node": out.node.numpy(),
        "row": out.row.numpy(),
        "col": out.col.numpy(),
        "edge": out.edge.numpy(),
        "num_nodes": list(out.num_sampled_nodes),
        "num_edges": list(out.num_sampled_edges),
    }


def _worker(rank: int, world: int, out: str) -> dict:
    from gnncore.distributed.rank_data import RankData
    from gnncore.distributed.sampler import DistNeighborSampler

    data = RankData.open(out, rank)
    seeds = node_input(_batch_seeds(rank, data.num_nodes))
    full = DistNeighborSampler(data, [-1, -1]).sample_from_nodes(seeds)
    sampler = DistNeighborSampler(data, FANOUTS, seed=3)
    batches = [_arrays(sampler.sample_from_nodes(seeds)) for _ in range(BATCHES)]
    return {
        "full": _arrays(full),
        "batches": batches,
        "remote": sampler.remote_requests,
        "served": sampler.served_requests,
    }


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("dist-sampler")
    graph = planted_graph(root / "g", num_nodes=300, degree=6)
    partition_graph(graph, root / "p", method="random", parts=2)
    write_rank_data(graph, root / "p", root / "r")
    g = GraphDir.open(graph)
    old = np.asarray(PartitionDir.open(root / "p", g).array("relabel_old_of_new"))
    ranks = spawn_local(_worker, 2, (str(root / "r"),), timeout=60, run_timeout=120)
    return {"graph": g, "old": old, "ranks": ranks}


def _triples(batch: dict, old: np.ndarray) -> set[tuple[int, int, int]]:
    """(target, source, canonical edge id) in original ids."""
    node = old[batch["node"]]
    return set(zip(node[batch["col"]], node[batch["row"]], batch["edge"]))


def _single_triples(out, eid: np.ndarray) -> set[tuple[int, int, int]]:
    node = out.node.numpy()
    return set(zip(node[out.col.numpy()], node[out.row.numpy()], eid[out.edge.numpy()]))


def test_full_neighbourhood_equals_single_process(sampled) -> None:
    g, old = sampled["graph"], sampled["old"]
    whole = NeighborSampler((np.asarray(g.indptr), np.asarray(g.indices)), [-1, -1])
    eid = np.asarray(g.array("eid"))
    for rank, result in enumerate(sampled["ranks"]):
        seeds = _batch_seeds(rank, g.num_nodes)
        single = whole.sample_from_nodes(node_input(old[seeds]))
        full = result["full"]
        assert full["num_nodes"] == list(single.num_sampled_nodes)
        assert full["num_edges"] == list(single.num_sampled_edges)
        np.testing.assert_array_equal(full["node"][:12], seeds)
        assert set(old[full["node"]]) == set(single.node.numpy())
        assert _triples(full, old) == _single_triples(single, eid)


def test_sampled_edges_are_real_and_fanouts_kept(sampled) -> None:
    g, old = sampled["graph"], sampled["old"]
    indptr, indices = np.asarray(g.indptr), np.asarray(g.indices)
    for result in sampled["ranks"]:
        for batch in result["batches"][:20]:
            node = old[batch["node"]]
            assert len(set(node)) == len(node)
            start = 0
            frontier_end = batch["num_nodes"][0]
            frontier = set(range(frontier_end))
            for hop, fanout in enumerate(FANOUTS):
                count = batch["num_edges"][hop]
                col = batch["col"][start : start + count]
                row = batch["row"][start : start + count]
                assert set(col) <= frontier
                for target in frontier:
                    v = node[target]
                    picked = node[row[col == target]]
                    neighbours = indices[indptr[v] : indptr[v + 1]]
                    assert len(picked) == min(fanout, len(neighbours))
                    assert len(set(picked)) == len(picked)
                    assert set(picked) <= set(neighbours)
                start += count
                new = batch["num_nodes"][hop + 1]
                frontier = set(range(frontier_end, frontier_end + new))
                frontier_end += new
    ranks = sampled["ranks"]
    assert ranks[0]["remote"] == ranks[1]["served"] > 0
    assert ranks[1]["remote"] == ranks[0]["served"] > 0


def test_distribution_matches_single_process(sampled) -> None:
    """Per-edge inclusion rates at hop 0 and the subgraph sizes per hop agree with
    single-process sampling of the same seeds (all draws seeded: deterministic)."""
    g, old = sampled["graph"], sampled["old"]
    indptr, indices = np.asarray(g.indptr), np.asarray(g.indices)
    whole = NeighborSampler((indptr, indices), FANOUTS, seed=5)
    for rank, result in enumerate(sampled["ranks"]):
        seeds = old[_batch_seeds(rank, g.num_nodes)]
        single = [whole.sample_from_nodes(node_input(seeds)) for _ in range(BATCHES)]
        dist_pairs: Counter = Counter()
        one_pairs: Counter = Counter()
        for batch in result["batches"]:
            node, k = old[batch["node"]], batch["num_edges"][0]
            dist_pairs.update(zip(node[batch["col"][:k]], node[batch["row"][:k]]))
        for out in single:
            node, k = out.node.numpy(), out.num_sampled_edges[0]
            one_pairs.update(zip(node[out.col.numpy()[:k]], node[out.row.numpy()[:k]]))
        for v in seeds:  # every in-neighbour of every seed, picked or not
            neighbours = indices[indptr[v] : indptr[v + 1]]
            p = min(FANOUTS[0], len(neighbours)) / len(neighbours)
            bound = 4.5 * np.sqrt(p * (1 - p) / BATCHES) + 1e-9
            for u in neighbours:
                assert abs(dist_pairs[(v, u)] / BATCHES - p) <= bound, (v, u, "distributed")
                assert abs(one_pairs[(v, u)] / BATCHES - p) <= bound, (v, u, "single")
        assert sum(dist_pairs.values()) == sum(one_pairs.values())
        for hop in (1, 2):
            a = np.array([b["num_nodes"][hop] for b in result["batches"]], dtype=float)
            b = np.array([o.num_sampled_nodes[hop] for o in single], dtype=float)
            se = np.sqrt(a.var() / len(a) + b.var() / len(b))
            assert abs(a.mean() - b.mean()) <= 4 * se + 1e-9, (hop, a.mean(), b.mean())
        # The batches differ from one another (the draws are not frozen).
        assert len({tuple(b["node"]) for b in result["batches"]}) > BATCHES // 2


def _alone_worker(rank: int, world: int, out: str) -> dict:
    import torch
    from torch_geometric.data import TensorAttr

    from gnncore.distributed.feature_store import DistFeatureStore
    from gnncore.distributed.rank_data import RankData
    from gnncore.distributed.sampler import DistNeighborSampler

    data = RankData.open(out, rank)
    seeds = node_input(_batch_seeds(rank, data.num_nodes))
    full = DistNeighborSampler(data, [-1, -1]).sample_from_nodes(seeds)
    sampler = DistNeighborSampler(data, FANOUTS, seed=3)
    batches = [_arrays(sampler.sample_from_nodes(seeds)) for _ in range(20)]
    again = DistNeighborSampler(data, FANOUTS, seed=3)
    replay = _arrays(again.sample_from_nodes(seeds, counter=7))
    store = DistFeatureStore(data)
    node = torch.from_numpy(batches[0]["node"])
    x, y = store.multi_get_tensor([TensorAttr(None, "x", node), TensorAttr(None, "y", node)])
    return {
        "full": _arrays(full),
        "batches": batches,
        "replay": replay,
        "x": x.numpy(),
        "y": y.numpy(),
        "stats": store.stats.as_dict(),
    }


def test_one_rank_draws_alone_what_the_ranks_draw(tmp_path: Path) -> None:
    """One rank holds every node: it samples in one kernel call and reads its rows
    with no collective, and the batches keep the ranks' layout and distribution."""
    graph = planted_graph(tmp_path / "g", num_nodes=300, degree=6)
    partition_graph(graph, tmp_path / "p", method="random", parts=1)
    write_rank_data(graph, tmp_path / "p", tmp_path / "r")
    g = GraphDir.open(graph)
    old = np.asarray(PartitionDir.open(tmp_path / "p", g).array("relabel_old_of_new"))
    (result,) = spawn_local(_alone_worker, 1, (str(tmp_path / "r"),), timeout=60, run_timeout=120)
    indptr, indices = np.asarray(g.indptr), np.asarray(g.indices)
    whole = NeighborSampler((indptr, indices), [-1, -1])
    seeds = _batch_seeds(0, g.num_nodes)
    single = whole.sample_from_nodes(node_input(old[seeds]))
    full = result["full"]
    assert full["num_nodes"] == list(single.num_sampled_nodes)
    assert full["num_edges"] == list(single.num_sampled_edges)
    np.testing.assert_array_equal(full["node"][:12], seeds)
    assert _triples(full, old) == _single_triples(single, np.asarray(g.array("eid")))
    for batch in result["batches"]:
        node = old[batch["node"]]
        assert len(set(node)) == len(node) and batch["num_nodes"][0] == 12
        k = batch["num_edges"][0]
        for target in range(12):  # hop 0: min(fanout, degree) distinct real neighbours
            v = node[target]
            picked = node[batch["row"][:k][batch["col"][:k] == target]]
            neighbours = indices[indptr[v] : indptr[v + 1]]
            assert len(picked) == min(FANOUTS[0], len(neighbours)) == len(set(picked))
            assert set(picked) <= set(neighbours)
    assert len({tuple(b["node"]) for b in result["batches"]}) > 10  # draws differ
    # Batch 7 drawn again by its counter is batch 7.
    for key in ("node", "row", "col", "edge"):
        np.testing.assert_array_equal(result["replay"][key], result["batches"][7][key])
    # The rows are the graph's rows of the batch's nodes, each read once.
    first = old[result["batches"][0]["node"]]
    np.testing.assert_array_equal(result["x"], np.asarray(g.features())[first])
    np.testing.assert_array_equal(result["y"], np.asarray(g.labels())[first])
    assert result["stats"]["local_rows"] == len(first) and result["stats"]["remote_rows"] == 0
