"""gnncore.plan.simulate: feature reads over virtual devices and neighbour-id traffic
over virtual partitions, replayed with the project's samplers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gnncore.plan.estimators import presample_access
from gnncore.plan.simulate import (
    dev_num_from_caches,
    frontier_kind,
    memory_increase,
    simulate_feature_reads,
    simulate_neighbor_traffic,
)
from gnncore.sampler import DenseSampler, NeighborSampler, PerLayerSampler
from gnncore.sampler.prune import prune_thresholds
from gnncore.testing.graphs import node_input, random_csr

pytest.importorskip("gnncore._C")


def undirected_csr(num_nodes: int, edges: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Rows list each node's neighbours (both directions of every edge), sorted."""
    src = np.array([u for u, v in edges] + [v for u, v in edges], dtype=np.int64)
    dst = np.array([v for u, v in edges] + [u for u, v in edges], dtype=np.int64)
    order = np.lexsort((src, dst))
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_nodes), out=indptr[1:])
    return indptr, src[order]


def star(leaves: int) -> tuple[np.ndarray, np.ndarray]:
    """Centre 0 joined to leaves 1..leaves."""
    return undirected_csr(leaves + 1, [(0, leaf) for leaf in range(1, leaves + 1)])


@pytest.fixture(scope="module")
def graph() -> tuple[np.ndarray, np.ndarray]:
    return random_csr(300, 2400, seed=3)


def epoch_batches(train: np.ndarray, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """The documented batching: unique ids permuted by default_rng([seed, epoch])."""
    order = np.random.default_rng([seed, epoch]).permutation(np.unique(train))
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def batch_seed(*entropy: int) -> int:
    return int(np.random.SeedSequence(list(entropy)).generate_state(1, np.uint64)[0])


# dev_num_from_caches ---------------------------------------------------------


def test_dev_num_from_caches_by_hand() -> None:
    caches = [np.array([0, 1]), np.array([1, 2]), np.array([3]), np.array([1, 4])]
    pairs = dev_num_from_caches(caches, 6, [[0, 1], [2, 3]])
    np.testing.assert_array_equal(
        pairs,
        [
            [0, 0, 1, -1, -1, -1],  # 1 is its own even though device 1 caches it too
            [0, 1, 1, -1, -1, -1],
            [-1, 3, -1, 2, 3, -1],
            [-1, 3, -1, 2, 3, -1],
        ],
    )
    everyone = dev_num_from_caches(caches, 6)
    np.testing.assert_array_equal(
        everyone,
        [
            [0, 0, 1, 2, 3, -1],
            [0, 1, 1, 2, 3, -1],
            [0, 0, 1, 2, 3, -1],  # node 1 from the lowest holder, device 0
            [0, 3, 1, 2, 3, -1],  # ... unless it holds 1 itself
        ],
    )
    alone = dev_num_from_caches(caches, 6, [[0, 1]])  # devices 2, 3 in no group
    np.testing.assert_array_equal(alone[2], [-1, -1, -1, 2, -1, -1])
    np.testing.assert_array_equal(alone[3], [-1, 3, -1, -1, 3, -1])


def test_dev_num_from_caches_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="outside"):
        dev_num_from_caches([np.array([5])], 5)
    with pytest.raises(ValueError, match="more than one peer group"):
        dev_num_from_caches([np.array([0]), np.array([1])], 2, [[0, 1], [1]])
    with pytest.raises(ValueError, match="not in"):
        dev_num_from_caches([np.array([0])], 2, [[0, 1]])


# simulate_feature_reads --------------------------------------------------------


def test_feature_reads_by_hand_on_a_star() -> None:
    # fanout -1: the centre's batch samples nodes {0..4}, leaf 1's batch {1, 0}
    sampler = DenseSampler(star(4), [-1], seed=0)
    dev_num = dev_num_from_caches([np.array([0]), np.array([2, 3])], 5)
    counts = simulate_feature_reads(sampler, np.array([1, 0]), dev_num, batch_size=1)
    first = int(epoch_batches(np.array([0, 1]), 1, 0, 0)[0][0])  # batch 0 -> device 0
    # (local, peer, host) of the centre's batch / the leaf's batch on device 0 / device 1
    centre = {0: (1, 2, 2), 1: (2, 1, 2)}
    leaf = {0: (1, 0, 1), 1: (0, 1, 1)}
    want = [centre[0], leaf[1]] if first == 0 else [leaf[0], centre[1]]
    got = list(zip(counts.local.tolist(), counts.peer.tolist(), counts.host.tolist()))
    assert got == want
    assert counts.batches.tolist() == [1, 1]
    assert counts.totals["reads"] == 7
    alpha = 0.5
    np.testing.assert_allclose(counts.device_costs(alpha), [alpha * p + h for _, p, h in want])
    assert counts.cost(alpha) == max(alpha * p + h for _, p, h in want)
    rows = counts.to_rows(alpha)
    assert [r["reads"] for r in rows] == [sum(w) for w in want]
    assert counts.as_dict(alpha)["cost"] == counts.cost(alpha)


def test_feature_reads_all_cached_or_none(graph) -> None:
    sampler = DenseSampler(graph, [4, 3], seed=0)
    num_nodes = sampler.num_nodes
    train = np.arange(0, num_nodes, 3)
    devices = 3
    own = np.repeat(np.arange(devices)[:, None], num_nodes, axis=1)
    cached = simulate_feature_reads(sampler, train, own, batch_size=16, epochs=2)
    host = simulate_feature_reads(
        sampler, train, np.full((devices, num_nodes), -1), batch_size=16, epochs=2
    )
    assert cached.totals["reads"] > 0
    assert cached.peer.sum() == cached.host.sum() == 0
    assert cached.shares == {"local": 1.0, "peer": 0.0, "host": 0.0}
    assert host.local.sum() == host.peer.sum() == 0
    np.testing.assert_array_equal(host.host, cached.local)  # same batches either way
    assert cached.cost(0.3) == 0.0
    assert host.cost(0.3) == host.host.max()
    # everything on one peer device: every other device reads only from peers
    peer = simulate_feature_reads(
        sampler, train, np.zeros((devices, num_nodes), dtype=np.int16), batch_size=16, epochs=2
    )
    np.testing.assert_array_equal(peer.local[1:], 0)
    np.testing.assert_array_equal(peer.peer[1:], cached.local[1:])
    assert peer.peer[0] == 0 and peer.local[0] == cached.local[0]


def test_feature_reads_total_matches_independent_replay(graph) -> None:
    sampler = DenseSampler(graph, [5, 2], seed=0)
    train = np.random.default_rng(1).choice(sampler.num_nodes, 90, replace=False)
    devices, batch_size, epochs, seed = 4, 8, 2, 11
    counts = simulate_feature_reads(
        sampler,
        train,
        np.full((devices, sampler.num_nodes), -1),
        batch_size=batch_size,
        epochs=epochs,
        seed=seed,
    )
    per_device = np.zeros(devices, dtype=np.int64)
    batches = np.zeros(devices, dtype=np.int64)
    for epoch in range(epochs):
        for i, seeds in enumerate(epoch_batches(train, batch_size, seed, epoch)):
            node = sampler._sample(np.ascontiguousarray(seeds), batch_seed(seed, epoch, i))[0]
            per_device[i % devices] += len(node)
            batches[i % devices] += 1
    np.testing.assert_array_equal(counts.host, per_device)
    np.testing.assert_array_equal(counts.batches, batches)
    assert counts.batches.sum() == epochs * math.ceil(len(train) / batch_size)
    # the same batches as the presample estimator counts
    access = presample_access(
        sampler.indptr,
        sampler.indices,
        train,
        [5, 2],
        epochs=epochs,
        batch_size=batch_size,
        sampler="dense",
        seed=seed,
    )
    assert access.sum() * epochs == counts.totals["reads"]


def test_feature_reads_reproducible_and_seeded(graph) -> None:
    train = np.arange(0, 300, 2)
    dev_num = dev_num_from_caches([np.arange(0, 100), np.arange(50, 150)], 300, [[0, 1]])

    def run(sampler_seed: int, seed: int) -> dict:
        sampler = DenseSampler(graph, [3, 3], seed=sampler_seed)
        sampler.sample_from_nodes(node_input([1, 2, 3]))  # moves its own counter
        return simulate_feature_reads(sampler, train, dev_num, batch_size=10, seed=seed).as_dict()

    first = run(0, 5)
    assert first == run(0, 5)
    assert first == run(99, 5)  # neither the sampler's counter nor its base seed matters
    assert first != run(0, 6)
    assert first["totals"]["peer"] > 0 and first["totals"]["host"] > 0


def test_feature_reads_rejects_bad_dev_num(graph) -> None:
    sampler = DenseSampler(graph, [2], seed=0)
    train = np.arange(10)
    with pytest.raises(ValueError, match="shape"):
        simulate_feature_reads(sampler, train, np.zeros((2, 10), int), batch_size=4)
    with pytest.raises(ValueError, match=r"\[-1, 2\)"):
        simulate_feature_reads(sampler, train, np.full((2, 300), 2), batch_size=4)
    with pytest.raises(ValueError, match="batch_size"):
        simulate_feature_reads(sampler, train, np.zeros((2, 300), int), batch_size=0)
    with pytest.raises(ValueError, match="train_nodes"):
        simulate_feature_reads(sampler, np.array([300]), np.zeros((2, 300), int), batch_size=4)


# simulate_neighbor_traffic ---------------------------------------------------------


def test_neighbor_traffic_by_hand_on_a_star() -> None:
    # leaves 1..5 on partition 0, the centre on partition 1; train on leaf 1.
    # hop 0 samples leaf 1 (local) -> the centre; hop 1 samples 2 of the centre's 5
    # neighbours remotely: DSP 1 + 2, whole list 5, theta = ceil(10/6 + 2) = 4.
    indptr, indices = star(5)
    owner = np.array([1, 0, 0, 0, 0, 0])
    for cls, frontier in ((DenseSampler, [1, 1]), (PerLayerSampler, [1, 2])):
        sampler = cls((indptr, indices), [1, 2], seed=0)
        traffic = simulate_neighbor_traffic(sampler, np.array([1]), owner, batch_size=4)
        assert traffic.thetas == (3, 4)
        assert traffic.batches.tolist() == [1, 0]
        assert traffic.frontier_nodes.tolist() == [frontier, [0, 0]]
        assert traffic.remote_nodes.tolist() == [[0, 1], [0, 0]]
        assert traffic.dsp.tolist() == [[0, 3], [0, 0]]
        assert traffic.whole_list.tolist() == [[0, 5], [0, 0]]
        assert traffic.hdr.tolist() == [[0, 5], [0, 0]]
        assert traffic.hdr_pruned.tolist() == [[0, 4], [0, 0]]
        assert traffic.normalised() == {
            "dsp": 1.0,
            "whole_list": 5 / 3,
            "hdr": 5 / 3,
            "hdr_pruned": 4 / 3,
        }
        assert traffic.memory_increase == 0.0
    # the centre replicated: its list is local everywhere, DSP and whole list unchanged
    sampler = DenseSampler((indptr, indices), [1, 2], seed=0)
    replicated = simulate_neighbor_traffic(
        sampler, np.array([1]), owner, replicated=np.array([0]), batch_size=4, theta=2
    )
    assert replicated.totals == {
        "batches": 1,
        "frontier_nodes": 2,
        "remote_nodes": 1,
        "dsp": 3,
        "whole_list": 5,
        "hdr": 0,
        "hdr_pruned": 0,
    }
    assert replicated.memory_increase == 0.5  # (2 - 1) * deg(0) / E = 5 / 10
    # a fixed theta below the degree caps the pruned read
    pruned = simulate_neighbor_traffic(sampler, np.array([1]), owner, batch_size=4, theta=2)
    assert pruned.thetas == (2, 2) and pruned.totals["hdr_pruned"] == 2


def test_neighbor_traffic_by_hand_on_a_path() -> None:
    # path 0-1-2-3, partitions {0, 1} and {2, 3}; fanout -1 takes whole lists (no pruning)
    indptr, indices = undirected_csr(4, [(0, 1), (1, 2), (2, 3)])
    sampler = DenseSampler((indptr, indices), [-1, -1], seed=0)
    owner = np.array([0, 0, 1, 1])
    traffic = simulate_neighbor_traffic(sampler, np.array([1, 2]), owner, batch_size=1)
    # partition 0 trains on 1: hop 1 samples {0, 2}, 2 is remote with degree 2;
    # partition 1 trains on 2: hop 1 samples {1, 3}, 1 is remote with degree 2
    assert traffic.thetas == (None, None)
    assert traffic.frontier_nodes.tolist() == [[1, 2], [1, 2]]
    assert traffic.remote_nodes.tolist() == [[0, 1], [0, 1]]
    assert traffic.dsp.tolist() == [[0, 3], [0, 3]]
    for counts in (traffic.whole_list, traffic.hdr, traffic.hdr_pruned):
        assert counts.tolist() == [[0, 2], [0, 2]]
    rows = traffic.to_rows()
    assert [r["partition"] for r in rows] == [0, 1, "all"]
    assert rows[-1]["dsp"] == 6 and rows[0]["whole_list"] == 2
    half = simulate_neighbor_traffic(
        sampler,
        np.array([1, 2]),
        owner,
        replicated=np.array([False, False, True, False]),
        batch_size=1,
    )
    assert half.hdr.tolist() == [[0, 0], [0, 2]]
    assert half.memory_increase == pytest.approx(2 / 6)


def test_neighbor_traffic_matches_per_node_reference(graph) -> None:
    """The vectorised counts against a per-node loop over the sampler's output."""
    indptr, _ = graph
    num_nodes = len(indptr) - 1
    rng = np.random.default_rng(4)
    owner = rng.integers(0, 3, num_nodes)
    replicated = rng.random(num_nodes) < 0.2
    train = rng.choice(num_nodes, 60, replace=False)
    degree = np.diff(indptr)
    batch_size, seed, epochs = 7, 2, 2
    for cls in (DenseSampler, PerLayerSampler, NeighborSampler):
        sampler = cls(graph, [4, 3], seed=0)
        traffic = simulate_neighbor_traffic(
            sampler,
            train,
            owner,
            replicated=replicated,
            batch_size=batch_size,
            epochs=epochs,
            seed=seed,
        )
        thetas = traffic.thetas
        want = {k: np.zeros((3, 2), dtype=np.int64) for k in ("dsp", "whole", "hdr", "pruned")}
        frontier_total = np.zeros((3, 2), dtype=np.int64)
        for epoch in range(epochs):
            for m in range(3):
                mine = np.unique(train)[owner[np.unique(train)] == m]
                order = np.random.default_rng([seed, epoch, m]).permutation(mine)
                for i, start in enumerate(range(0, len(order), batch_size)):
                    seeds = np.ascontiguousarray(order[start : start + batch_size])
                    out = sampler._sample(seeds, batch_seed(seed, epoch, m, i))
                    node, col, nn, ne = out[0], out[2], list(out[4]), list(out[5])
                    edge_start = 0
                    for h in range(2):
                        if cls is PerLayerSampler:
                            frontier = range(0, sum(nn[: h + 1]))
                        else:
                            frontier = range(sum(nn[:h]), sum(nn[: h + 1]))
                        hop_cols = col[edge_start : edge_start + ne[h]].tolist()
                        edge_start += ne[h]
                        frontier_total[m, h] += len(frontier)
                        for local in frontier:
                            v = int(node[local])
                            if owner[v] == m:
                                continue
                            want["dsp"][m, h] += 1 + hop_cols.count(local)
                            want["whole"][m, h] += degree[v]
                            if not replicated[v]:
                                want["hdr"][m, h] += degree[v]
                                want["pruned"][m, h] += min(degree[v], thetas[h])
        np.testing.assert_array_equal(traffic.frontier_nodes, frontier_total)
        np.testing.assert_array_equal(traffic.dsp, want["dsp"])
        np.testing.assert_array_equal(traffic.whole_list, want["whole"])
        np.testing.assert_array_equal(traffic.hdr, want["hdr"])
        np.testing.assert_array_equal(traffic.hdr_pruned, want["pruned"])
        assert traffic.totals["dsp"] > 0 and traffic.totals["hdr_pruned"] > 0


def test_neighbor_traffic_orderings_and_extremes(graph) -> None:
    sampler = DenseSampler(graph, [6, 4], seed=0)
    num_nodes = sampler.num_nodes
    owner = np.arange(num_nodes) % 4
    degree = np.diff(sampler.indptr)
    replicated = degree >= np.quantile(degree, 0.9)
    train = np.arange(0, num_nodes, 2)
    common = dict(batch_size=16, seed=3)
    traffic = simulate_neighbor_traffic(
        sampler, train, owner, replicated=replicated, theta=5, **common
    )
    assert np.all(traffic.hdr_pruned <= traffic.hdr)
    assert np.all(traffic.hdr <= traffic.whole_list)
    assert traffic.totals["hdr_pruned"] < traffic.totals["hdr"] < traffic.totals["whole_list"]
    assert traffic.remote_nodes[:, 0].sum() == 0  # seeds belong to the training partition
    assert traffic.frontier_nodes[:, 0].sum() == len(train)
    assert traffic.batches.tolist() == [
        math.ceil(np.count_nonzero(owner[train] == m) / 16) for m in range(4)
    ]
    # same batches without replication: DSP and whole lists do not depend on V_r
    plain = simulate_neighbor_traffic(sampler, train, owner, **common)
    np.testing.assert_array_equal(plain.dsp, traffic.dsp)
    np.testing.assert_array_equal(plain.whole_list, traffic.whole_list)
    np.testing.assert_array_equal(plain.hdr, plain.whole_list)
    assert plain.memory_increase == 0.0
    # everything replicated: nothing crosses under HDR
    everything = simulate_neighbor_traffic(
        sampler, train, owner, replicated=np.ones(num_nodes, dtype=bool), **common
    )
    assert everything.totals["hdr"] == everything.totals["hdr_pruned"] == 0
    assert everything.totals["dsp"] == traffic.totals["dsp"] > 0
    assert everything.memory_increase == pytest.approx(3.0)  # (M - 1) · E / E
    # one partition: nothing is remote
    single = simulate_neighbor_traffic(sampler, train, np.zeros(num_nodes, dtype=int), **common)
    assert single.parts == 1
    assert single.totals["frontier_nodes"] > len(train)
    for name in ("remote_nodes", "dsp", "whole_list", "hdr", "hdr_pruned"):
        assert single.totals[name] == 0
    assert all(math.isnan(x) for x in single.normalised().values())
    # theta large enough never prunes; theta 0 prunes everything
    wide = simulate_neighbor_traffic(
        sampler, train, owner, replicated=replicated, theta=int(degree.max()), **common
    )
    np.testing.assert_array_equal(wide.hdr_pruned, traffic.hdr)
    zero = simulate_neighbor_traffic(
        sampler, train, owner, replicated=replicated, theta=0, **common
    )
    assert zero.totals["hdr_pruned"] == 0 and zero.totals["hdr"] == traffic.totals["hdr"]


def test_neighbor_traffic_per_layer_frontier_is_larger(graph) -> None:
    owner = np.arange(300) % 2
    train = np.arange(0, 300, 3)
    dense = simulate_neighbor_traffic(
        DenseSampler(graph, [4, 3, 2], seed=0), train, owner, batch_size=12
    )
    per_layer = simulate_neighbor_traffic(
        PerLayerSampler(graph, [4, 3, 2], seed=0), train, owner, batch_size=12
    )
    assert dense.frontier == "dense" and per_layer.frontier == "per-layer"
    np.testing.assert_array_equal(dense.frontier_nodes[:, 0], per_layer.frontier_nodes[:, 0])
    assert np.all(per_layer.frontier_nodes[:, 1:] > dense.frontier_nodes[:, 1:])
    assert per_layer.totals["whole_list"] > dense.totals["whole_list"]
    assert per_layer.totals["dsp"] > dense.totals["dsp"]


def test_neighbor_traffic_reproducible(graph) -> None:
    owner = np.arange(300) % 3
    train = np.arange(150)

    def run(sampler_seed: int, seed: int, epochs: int = 1) -> dict:
        sampler = DenseSampler(graph, [3, 3], seed=sampler_seed)
        sampler.sample_from_nodes(node_input([4, 5]))
        return simulate_neighbor_traffic(
            sampler, train, owner, batch_size=9, seed=seed, epochs=epochs
        ).as_dict()

    first = run(0, 1)
    assert first == run(0, 1) == run(7, 1)
    assert first["dsp"] != run(0, 2)["dsp"]
    two = run(0, 1, epochs=2)
    assert two["batches"] == [2 * b for b in first["batches"]]
    # epoch 0 of a two-epoch run is the one-epoch run; epoch 1 adds to it
    assert np.all(np.asarray(two["dsp"])[:, 1] > np.asarray(first["dsp"])[:, 1])


def test_neighbor_traffic_rejects_bad_input(graph) -> None:
    sampler = DenseSampler(graph, [2], seed=0)
    train = np.arange(10)
    with pytest.raises(ValueError, match="owner must have shape"):
        simulate_neighbor_traffic(sampler, train, np.zeros(10, int), batch_size=4)
    with pytest.raises(ValueError, match=">= 0"):
        simulate_neighbor_traffic(sampler, train, np.full(300, -1), batch_size=4)
    with pytest.raises(ValueError, match="parts"):
        simulate_neighbor_traffic(sampler, train, np.arange(300) % 3, parts=2, batch_size=4)
    with pytest.raises(ValueError, match="replicated mask"):
        simulate_neighbor_traffic(
            sampler, train, np.zeros(300, int), replicated=np.ones(5, bool), batch_size=4
        )
    with pytest.raises(ValueError, match="theta has 2 entries"):
        simulate_neighbor_traffic(sampler, train, np.zeros(300, int), theta=[1, 2], batch_size=4)


# thresholds and memory -----------------------------------------------------------------


def test_prune_thresholds_rule() -> None:
    assert prune_thresholds([10, 5], 7.5) == (18, 13)  # ceil(avg_degree + fanout)
    assert prune_thresholds([10, -1], 7.5) == (18, None)  # -1 needs whole lists
    assert prune_thresholds([10, 5], 7.5, prune_alpha=2.0, prune_beta=0.5) == (20, 18)
    assert prune_thresholds([10, 5], 7.5, theta=6) == (6, 6)
    assert prune_thresholds([10, -1, 5], 7.5, theta=[6, 7, 8]) == (6, None, 8)


def test_memory_increase_formula(graph) -> None:
    indptr, _ = graph
    num_nodes = len(indptr) - 1
    degree = np.diff(indptr)
    owner = np.arange(num_nodes) % 4
    ids = np.argsort(-degree, kind="stable")[:30]
    mask = np.zeros(num_nodes, dtype=bool)
    mask[ids] = True
    want = 3 * degree[ids].sum() / indptr[-1]
    assert memory_increase(indptr, owner, ids) == pytest.approx(want)
    assert memory_increase(indptr, owner, mask) == pytest.approx(want)
    assert memory_increase(indptr, owner, mask, parts=6) == pytest.approx(want * 5 / 3)
    assert memory_increase(indptr, owner, None) == 0.0
    assert memory_increase(indptr, np.zeros(num_nodes, dtype=int), mask) == 0.0


def test_frontier_kind() -> None:
    csr = star(3)
    assert frontier_kind(DenseSampler(csr, [1])) == "dense"
    assert frontier_kind(NeighborSampler(csr, [1])) == "dense"
    assert frontier_kind(PerLayerSampler(csr, [1])) == "per-layer"
