"""GREM (ALGORITHMS.md §1): hand-worked bisections, the C++/reference match,
recursion, temporary files and argument checks."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import planted_graph
from gnncore.partition import PartitionOptions, partition_metrics
from gnncore.partition.edge_stream import EdgeFile, chunk_rows
from gnncore.partition.grem import (
    GreedyPartitioner,
    GremPartitioner,
    greedy_partitioner,
    grem_bisect,
    grem_partition_file,
    seed_sides,
    side_capacity,
)
from gnncore.partition.grem import plan as grem_plan
from gnncore.partition.grem import recursion as grem_recursion
from gnncore.partition.grem.chunk import (
    chunk_components,
    chunk_csr,
    chunk_nodes_local,
    first_appearance,
    metis_chunk,
    tree_roots,
)
from gnncore.partition.grem.plan import (
    ClusterPlan,
    cluster_chunk,
    cluster_graph_edges,
    cluster_plan,
    core_clusters,
    plan_applies,
    plan_sides,
    trim_cluster_graph,
)
from gnncore.store import GraphDir, create_graph_dir
from gnncore.testing.grem_reference import (
    chunk_csr_reference,
    chunk_nodes_local_reference,
    first_appearance_reference,
    grem_bisect_reference,
    majority_rounds_reference,
    tree_roots_reference,
)


def edge_file(
    tmp_path: Path,
    pairs: list[tuple[int, int]] | np.ndarray,
    dtype: str = "int32",
    name: str = "edges.npy",
) -> EdgeFile:
    """Write ``pairs`` in exactly this stream order as an ``.npy`` edge file."""
    path = tmp_path / name
    np.save(path, np.asarray(pairs, dtype=dtype).reshape(-1, 2))
    return EdgeFile.from_npy(path)


def bisect(
    tmp_path: Path,
    pairs,
    members,
    chunk: int,
    seeds: dict[int, int],
    capacities: tuple[int, int],
    weights=(1, 1),
    refine=True,
    passes=0,
    split=False,
) -> tuple[dict[int, int], dict]:
    """Run the C++ bisection and the Python reference; check they agree."""
    edges = edge_file(tmp_path, pairs)
    members = np.asarray(members, dtype=np.int64)
    nodes = np.asarray(list(seeds), dtype=np.int64)
    labels = np.asarray(list(seeds.values()), dtype=np.int64)
    outs = (str(tmp_path / "s0.bin"), str(tmp_path / "s1.bin")) if split else ("", "")
    result = grem_bisect(
        edges,
        int(members.max()) + 1,
        members,
        chunk_edges=chunk,
        seed_nodes=nodes,
        seed_labels=labels,
        capacities=capacities,
        weights=weights,
        refine=refine,
        passes=passes,
        out_paths=outs,
    )
    ref = grem_bisect_reference(
        np.asarray(pairs),
        members.tolist(),
        chunk,
        nodes,
        labels,
        capacities,
        weights,
        refine,
        passes,
    )
    np.testing.assert_array_equal(result.side, ref.side)
    assert tuple(result.sizes) == ref.sizes
    assert list(result.moves) == ref.moves
    assert result.reassigned == ref.reassigned and result.isolated == ref.isolated
    return dict(zip(members.tolist(), np.asarray(result.side).tolist())), result


# The stream format --------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_edge_file_is_read_in_chunks_at_the_npy_offset(tmp_path, dtype):
    pairs = np.arange(20).reshape(10, 2)
    edges = edge_file(tmp_path, pairs, dtype)
    assert edges.rows == 10 and edges.dtype == dtype and edges.offset >= 64
    np.testing.assert_array_equal(edges.read(0, 3), pairs[:3])
    assert edges.read(0, 3).dtype == dtype  # the file's width: no widened copy
    np.testing.assert_array_equal(edges.read(8, 5), pairs[8:])
    assert edges.read(10, 4).shape == (0, 2)


def test_chunk_is_a_fixed_number_of_edges_of_the_whole_graph():
    assert chunk_rows(0.1, 210946) == 21095
    assert chunk_rows(0.01, 210946) == 2110
    assert chunk_rows(0.07, 100) == 7  # no float round-off to 8
    assert chunk_rows(0.001, 10) == 1


def test_capacity_comes_from_the_global_target():
    n = 14541
    assert side_capacity(n, 1, 2, 0.03) == math.ceil(n / 2 * 1.03)
    assert side_capacity(n, 2, 5, 0.03) == math.ceil(n * 2 / 5 * 1.03)
    assert side_capacity(100, 1, 4, 0.0) == 25


# Hand-worked bisections -------------------------------------------------------

# A seed labels the first chunk; est (nbr_counts) holds the chunk's counts.
SEED_CHUNK = [(0, 1), (0, 2), (3, 4)]
SEED = {0: 0, 1: 0, 2: 0, 3: 1, 4: 1}


def test_first_chunk_keeps_the_seed_labels(tmp_path):
    side, result = bisect(tmp_path, SEED_CHUNK, range(5), 3, SEED, (3, 3))
    assert side == SEED and result.first_chunk_nodes == 5 and result.num_chunks == 1


def test_metis_seed_splits_the_first_chunk_along_its_sparse_cut():
    # Two triangles joined by one edge, then rows that are not in the first chunk.
    first = np.array([(0, 1), (1, 2), (0, 2), (2, 3), (3, 4), (4, 5), (3, 5)])
    nodes, labels = seed_sides(first, "metis", (1, 1), (3, 3), 0, 0.03, (0, 2))
    assert nodes.tolist() == [0, 1, 2, 3, 4, 5]  # first-appearance order
    assert len(set(labels[:3])) == 1 and len(set(labels[3:])) == 1 and labels[0] != labels[3]
    for method in ("random", "ldg"):
        nodes, labels = seed_sides(first, method, (1, 1), (3, 3), 0, 0.03, (0, 2))
        assert sorted(np.bincount(labels, minlength=2).tolist()) == [3, 3]


def test_ldg_seed_by_hand():
    from gnncore import _C

    # Path 0-1-2-3, capacities 2: 0 ties -> side 0; 1 joins 0; side 0 is full, so
    # 2 goes to 1; 3 follows 2.
    indptr = np.array([0, 1, 3, 5, 6])
    indices = np.array([1, 0, 2, 1, 3, 2])
    assert _C.ldg_bisect(indptr, indices, 2, 2).tolist() == [0, 0, 1, 1]


# Chunk 1 = (0, 3), (5, 6), (6, 7); chunk 2 = (0, 4).
AVERAGING = SEED_CHUNK + [(0, 3), (5, 6), (6, 7), (0, 4)]


def test_refinement_averages_the_running_estimate(tmp_path):
    # Chunk 1: node 0 alone would see (0, 1) and switch to side 1; averaged with
    # its seed estimate (2, 0) it sees (1, 0.5) and stays on side 0.
    side, _ = bisect(tmp_path, AVERAGING[:6], range(8), 3, SEED, (6, 6))
    assert side[0] == 0
    # Chunk 2 shows one more side-1 neighbour: ((1 + 0) / 2, (0.5 + 1) / 2) =
    # (0.5, 0.75), so node 0 moves to side 1.
    side, result = bisect(tmp_path, AVERAGING, range(8), 3, SEED, (6, 6))
    assert side[0] == 1 and result.reassigned == 1
    # Chunk 1 also placed the new nodes: 5 (tie -> argmin(3, 2) = 1), 6 and 7 follow.
    assert side[5] == side[6] == side[7] == 1 and tuple(result.sizes) == (2, 6)


def test_refinement_respects_a_full_side(tmp_path):
    # With P = 5, side 1 is full after chunk 1 (sizes (3, 5)): node 0 cannot
    # join it and argmin(sizes) keeps it on side 0.
    side, _ = bisect(tmp_path, AVERAGING, range(8), 3, SEED, (5, 5))
    assert side[0] == 0


def test_greedy_keeps_first_labels_where_grem_refines(tmp_path):
    grem, _ = bisect(tmp_path, AVERAGING, range(8), 3, SEED, (6, 6))
    greedy, result = bisect(tmp_path, AVERAGING, range(8), 3, SEED, (6, 6), refine=False)
    assert grem[0] == 1 and greedy[0] == 0
    assert result.reassigned == 0
    assert {n: greedy[n] for n in SEED} == SEED


def test_capacity_does_not_count_a_node_twice(tmp_path):
    # Side 0 holds 3 = P nodes. Node 0 (on side 0) sees only side-0 neighbours:
    # it must stay, since it is not counted twice against P. Counting it twice
    # would find side 0 full and send it to argmin(3, 2) = side 1.
    pairs = [(0, 1), (1, 2), (3, 4), (0, 2), (3, 5)]
    seeds = {0: 0, 1: 0, 2: 0, 3: 1, 4: 1}
    side, result = bisect(tmp_path, pairs, range(6), 3, seeds, (3, 3))
    assert side[0] == 0 and side[2] == 0
    assert result.reassigned == 0
    # Node 5 (new, neighbour on side 1) joins side 1: sizes (3, 3).
    assert side[5] == 1 and tuple(result.sizes) == (3, 3)


def test_a_full_side_sends_new_nodes_to_the_other_side(tmp_path):
    # Side 1 is full (2 = P): node 5, whose only neighbour is on side 1, must go to 0.
    pairs = [(0, 1), (3, 4), (3, 5)]
    seeds = {0: 0, 1: 0, 3: 1, 4: 1}
    side, result = bisect(tmp_path, pairs, [0, 1, 3, 4, 5], 2, seeds, (4, 2))
    assert side[5] == 0 and tuple(result.sizes) == (3, 2)


def test_updates_within_a_chunk_are_visible_to_later_nodes(tmp_path):
    # Chunk 1 = (5, 6), (5, 1), visited 5, 6, 1: 5 sees 1 (side 0) and joins 0;
    # 6 then sees 5 already on side 0. Had 5's label not been visible, 6 would
    # see nothing and go to argmin(3, 2) = side 1.
    pairs = [(0, 1), (2, 3), (5, 6), (5, 1)]
    seeds = {0: 0, 1: 0, 2: 1, 3: 1}
    side, _ = bisect(tmp_path, pairs, [0, 1, 2, 3, 5, 6], 2, seeds, (5, 5))
    assert side[5] == 0 and side[6] == 0


def test_isolated_nodes_go_to_the_smaller_side(tmp_path):
    # Sizes after streaming (3, 2); isolated 8 -> side 1, then 9 -> side 0 (tie).
    members = [0, 1, 2, 3, 4, 8, 9]
    side, result = bisect(tmp_path, SEED_CHUNK, members, 3, SEED, (4, 4))
    assert side[8] == 1 and side[9] == 0 and result.isolated == 2
    assert tuple(result.sizes) == (4, 3)


def test_one_restreaming_pass_moves_a_misplaced_node(tmp_path):
    # Node 0 is seeded on side 1 but both its neighbours are on side 0 (gain 2);
    # nodes 1 and 2 have one neighbour on each side (gain 0). One pass moves 0;
    # the next moves nothing and stops the passes early.
    pairs = [(0, 1), (0, 2), (1, 2), (3, 4)]
    seeds = {0: 1, 1: 0, 2: 0, 3: 1, 4: 1}
    side, result = bisect(tmp_path, pairs, range(5), 4, seeds, (3, 3), passes=3)
    assert side == {0: 0, 1: 0, 2: 0, 3: 1, 4: 1}
    assert list(result.moves) == [1, 0]
    side, result = bisect(tmp_path, pairs, range(5), 4, seeds, (3, 3), passes=0)
    assert side[0] == 1 and list(result.moves) == []


def test_restreaming_moves_by_gain_and_respects_capacity(tmp_path):
    # Gains are those at the start of a pass: 0 (+2, side 1 -> 0) moves first;
    # 1 and 2 (+1 each, 0 -> 1) then follow while side 1 has room: 1 moves, 2
    # is blocked (side 1 full, nothing left on side 1). The second pass moves 1
    # back; the third moves nothing.
    pairs = [(0, 1), (0, 2), (3, 4)]
    seeds = {0: 1, 1: 0, 2: 0, 3: 1, 4: 1}
    side, result = bisect(tmp_path, pairs, range(5), 3, seeds, (3, 3), passes=5)
    assert list(result.moves) == [2, 1, 0]
    assert side == {0: 0, 1: 0, 2: 0, 3: 1, 4: 1}


def test_split_writes_each_sides_edges_in_stream_order_in_its_own_ids(tmp_path):
    pairs = [(0, 1), (0, 2), (3, 4), (2, 3), (1, 2), (4, 5)]
    seeds = {0: 0, 1: 0, 2: 0, 3: 1, 4: 1}
    side, result = bisect(tmp_path, pairs, range(6), 3, seeds, (3, 3), split=True)
    for s in (0, 1):
        rows = np.fromfile(tmp_path / f"s{s}.bin", dtype=np.int32).reshape(-1, 2)
        # the next level's ids: node i of the side is its i-th member by id
        members = sorted(x for x in side if side[x] == s)
        expected = [p for p in pairs if side[p[0]] == side[p[1]] == s]
        assert [[members[u], members[v]] for u, v in rows.tolist()] == [list(p) for p in expected]
        assert rows.max() < len(members)
        assert result.rows_written[s] == len(expected)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_all_members_is_the_listed_range_and_the_split_renumbers_a_listed_subset(tmp_path, dtype):
    rng = np.random.default_rng(7)
    n = 60
    pairs = random_stream(rng, n, 150)
    first = np.unique(pairs[:20].reshape(-1), return_index=True)
    nodes = first[0][np.argsort(first[1])]
    labels = rng.integers(0, 2, len(nodes))
    edges = edge_file(tmp_path, pairs, dtype=dtype)
    args = dict(chunk_edges=20, seed_nodes=nodes, seed_labels=labels, capacities=(33, 33), passes=2)
    outs = {}
    for name, members in (("all", None), ("listed", np.arange(n))):
        outs[name] = (str(tmp_path / f"{name}0.bin"), str(tmp_path / f"{name}1.bin"))
        result = grem_bisect(edges, n, members, out_paths=outs[name], **args)
        outs[name + "-side"] = np.asarray(result.side)
    np.testing.assert_array_equal(outs["all-side"], outs["listed-side"])
    for s in (0, 1):
        a, b = (np.fromfile(outs[k][s], dtype=dtype) for k in ("all", "listed"))
        np.testing.assert_array_equal(a, b)
    # members listed out of order, inside a larger id space: the split's ids are
    # ranks among each side's members by id, whatever order they were listed in
    sparse = edge_file(tmp_path, [(10, 30), (30, 20), (40, 50)], dtype=dtype)
    split = (str(tmp_path / "sp0.bin"), str(tmp_path / "sp1.bin"))
    result = grem_bisect(sparse, 60, np.array([50, 10, 40, 30, 20]), chunk_edges=3,
                         seed_nodes=np.array([10, 30, 20, 40, 50]),
                         seed_labels=np.array([0, 0, 0, 1, 1]), capacities=(3, 3),
                         out_paths=split)  # fmt: skip
    assert np.asarray(result.side).tolist() == [1, 0, 1, 0, 0]
    assert np.fromfile(split[0], dtype=dtype).tolist() == [0, 2, 2, 1]  # 10, 20, 30 -> 0, 1, 2
    assert np.fromfile(split[1], dtype=dtype).tolist() == [0, 1]  # 40, 50 -> 0, 1


# The C++ kernel against the literal reference --------------------------------------


def random_stream(rng: np.random.Generator, n: int, m: int) -> np.ndarray:
    u = rng.integers(0, n, 3 * m)
    v = rng.integers(0, n, 3 * m)
    keep = u != v
    key = np.unique(np.minimum(u, v)[keep] * n + np.maximum(u, v)[keep])[:m]
    pairs = np.stack([key // n, key % n], axis=1)
    return pairs[rng.permutation(len(pairs))]


@pytest.mark.parametrize("trial", range(8))
def test_kernel_matches_the_reference_on_random_graphs(tmp_path, trial):
    rng = np.random.default_rng(trial)
    n = int(rng.integers(30, 120))
    pairs = random_stream(rng, n, int(rng.integers(n, 4 * n)))
    members = np.arange(n + 3)  # three isolated nodes
    chunk = int(rng.integers(5, 40))
    first = np.unique(pairs[:chunk].reshape(-1), return_index=True)
    nodes = first[0][np.argsort(first[1])]
    seeds = dict(zip(nodes.tolist(), rng.integers(0, 2, len(nodes)).tolist()))
    weights = [(1, 1), (1, 2), (2, 3)][trial % 3]
    total = len(members)
    caps = tuple(math.ceil(total * w / sum(weights) * 1.03) for w in weights)
    for refine, passes in ((True, 0), (True, 3), (False, 0)):
        d = tmp_path / f"{refine}-{passes}"
        d.mkdir()
        _, result = bisect(
            d, pairs, members, chunk, seeds, caps, weights, refine, passes, split=True
        )
        assert all(result.sizes[s] <= caps[s] for s in (0, 1))
        ref = grem_bisect_reference(
            pairs,
            members.tolist(),
            chunk,
            list(seeds),
            list(seeds.values()),
            caps,
            weights,
            refine,
            passes,
        )
        for s in (0, 1):
            rows = np.fromfile(d / f"s{s}.bin", dtype=np.int32).reshape(-1, 2)
            np.testing.assert_array_equal(rows, ref.side_edges[s])


@pytest.mark.parametrize("trial", range(4))
def test_kernel_matches_the_reference_on_int64_files(tmp_path, trial):
    rng = np.random.default_rng(100 + trial)
    n = int(rng.integers(30, 100))
    pairs = random_stream(rng, n, int(rng.integers(n, 3 * n)))
    members = np.arange(n)
    chunk = int(rng.integers(5, 30))
    first = np.unique(pairs[:chunk].reshape(-1), return_index=True)
    nodes = first[0][np.argsort(first[1])]
    labels = rng.integers(0, 2, len(nodes))
    caps = (math.ceil(n * 0.53), math.ceil(n * 0.53))
    edges = edge_file(tmp_path, pairs, dtype="int64")
    outs = (str(tmp_path / "s0.bin"), str(tmp_path / "s1.bin"))
    result = grem_bisect(
        edges,
        n,
        members,
        chunk_edges=chunk,
        seed_nodes=nodes,
        seed_labels=labels,
        capacities=caps,
        passes=3,
        out_paths=outs,
    )
    ref = grem_bisect_reference(pairs, members.tolist(), chunk, nodes, labels, caps, passes=3)
    np.testing.assert_array_equal(result.side, ref.side)
    assert list(result.moves) == ref.moves
    for s in (0, 1):
        rows = np.fromfile(outs[s], dtype=np.int64).reshape(-1, 2)
        np.testing.assert_array_equal(rows, ref.side_edges[s])
    assert result.seconds_grem >= 0 and result.seconds_split >= 0
    assert len(result.seconds_passes) == len(ref.moves)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("trial", range(6))
def test_chunk_renumbering_and_csr_match_the_numpy_references(trial, dtype):
    rng = np.random.default_rng(trial)
    n = int(rng.integers(1, 200))
    pairs = random_stream(rng, n + 1, int(rng.integers(0, 4 * n + 1))).astype(dtype)
    nodes, local = first_appearance(pairs)
    assert nodes.dtype == dtype and local.dtype == dtype  # int32 chunks stay int32
    ref_nodes, ref_local = first_appearance_reference(pairs)
    np.testing.assert_array_equal(nodes, ref_nodes)
    np.testing.assert_array_equal(local, ref_local)
    nodes, local = chunk_nodes_local(pairs, n + 1)
    ref_nodes, ref_local = chunk_nodes_local_reference(pairs, n + 1)
    np.testing.assert_array_equal(nodes, ref_nodes)
    np.testing.assert_array_equal(local, ref_local)
    for got, want in zip(chunk_csr(local, len(nodes)), chunk_csr_reference(local, len(nodes))):
        np.testing.assert_array_equal(got, want)


def test_tree_roots_by_hand():
    # a triangle 0-1-2 with a path 2-3-4 hanging off it, and a separate path 5-6-7
    pairs = np.array([[0, 1], [1, 2], [0, 2], [2, 3], [3, 4], [5, 6], [6, 7]])
    indptr, indices = chunk_csr(pairs, 8)
    # leaves 4, 5, 7 go first (id order): 4 -> 3, 5 -> 6, 7 -> 6 (6 is left alone), 3 -> 2
    assert tree_roots(indptr, indices).tolist() == [0, 1, 2, 2, 2, 6, 6, 6]
    # trees of at most two nodes: 4 -> 3 and 5 -> 6, then 7, 3 would make three
    assert tree_roots(indptr, indices, 2).tolist() == [0, 1, 2, 3, 3, 6, 6, 7]


@pytest.mark.parametrize("trial", range(6))
def test_tree_roots_match_the_literal_reference(trial):
    rng = np.random.default_rng(trial)
    n = int(rng.integers(2, 150))
    pairs = random_stream(rng, n, int(rng.integers(1, 2 * n)))
    indptr, indices = chunk_csr(pairs, n)
    adjacency = [indices[indptr[x] : indptr[x + 1]].tolist() for x in range(n)]
    for cap in (1, 3, 2**62):
        root = tree_roots(indptr, indices, cap)
        assert root.tolist() == tree_roots_reference(adjacency, cap)
        kept = root == np.arange(n)
        assert np.all(kept[root]) and np.bincount(root, minlength=n).max() <= cap


def test_peeled_metis_keeps_trees_whole_and_balances():
    import pymetis

    rng = np.random.default_rng(0)
    core = random_stream(rng, 200, 600)  # a denser part with leaves hung on it
    leaves = np.stack([rng.integers(0, 200, 300), np.arange(200, 500)], axis=1)
    local = np.concatenate([core, leaves])
    options = pymetis.Options()
    options.seed = 0
    parts = metis_chunk(local, 500, 2, options, recursive=True, peel=True)
    assert np.all(parts[leaves[:, 0]] == parts[leaves[:, 1]])
    assert np.bincount(parts, minlength=2).max() <= math.ceil(1.03 * 250)


@pytest.mark.parametrize("side_dtype", [np.int8, np.int64])
@pytest.mark.parametrize("local_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("trial", range(6))
def test_majority_rounds_match_the_vectorised_reference(trial, local_dtype, side_dtype):
    from gnncore import _C

    rng = np.random.default_rng(trial)
    n = int(rng.integers(2, 300))
    local = random_stream(rng, n, int(rng.integers(1, 3 * n))).astype(local_dtype)
    side = rng.choice([-1, -1, -1, 0, 1], n).astype(side_dtype)
    for rounds in (0, 1, 2, 8):
        got = side.copy()
        _C.grem_majority_rounds(local.reshape(-1).copy(), got, rounds)
        np.testing.assert_array_equal(
            got, majority_rounds_reference(local.astype(np.int64), side.astype(np.int64), rounds)
        )
    with pytest.raises(ValueError, match="-1, 0 or 1"):
        _C.grem_majority_rounds(local.reshape(-1).copy(), np.full(n, 2, dtype=side_dtype), 1)


def repair_capacity_reference(sides, local, capacities):
    """The float-weighted score of the first implementation (own-side minus
    other-side chunk neighbours), kept as the reference."""
    for s in (0, 1):
        excess = int(np.count_nonzero(sides == s)) - capacities[s]
        if excess <= 0:
            continue
        sign = np.where(sides[local[:, 0]] == sides[local[:, 1]], 1.0, -1.0)
        score = (
            np.bincount(local[:, 0], weights=sign, minlength=len(sides))
            + np.bincount(local[:, 1], weights=sign, minlength=len(sides))
        ).astype(np.int64)
        mine = np.flatnonzero(sides == s)
        sides = sides.copy()
        sides[mine[np.argsort(score[mine], kind="stable")[:excess]]] = 1 - s
    return sides


@pytest.mark.parametrize("trial", range(8))
def test_capacity_repair_matches_the_signed_count_reference(trial):
    from gnncore.partition.grem.chunk import repair_capacity

    rng = np.random.default_rng(trial)
    n = int(rng.integers(4, 300))
    local = random_stream(rng, n, int(rng.integers(1, 4 * n))).astype(np.int32)
    sides = (rng.random(n) < 0.5).astype(np.int8)
    sides[:2] = (0, 1)
    full = trial % 2  # the side over its capacity
    excess = int(rng.integers(1, np.count_nonzero(sides == full) + 1))
    cap = int(np.count_nonzero(sides == full)) - excess
    capacities = (cap, n - cap) if full == 0 else (n - cap, cap)
    got = repair_capacity(sides, local, capacities)
    assert np.count_nonzero(got != sides) == excess
    want = repair_capacity_reference(sides.astype(np.int64), local.astype(np.int64), capacities)
    np.testing.assert_array_equal(got, want)
    assert all(np.count_nonzero(got == s) <= capacities[s] for s in (0, 1))


@pytest.mark.parametrize("trial", range(4))
def test_bisection_is_the_same_for_narrow_and_wide_arrays_and_offsets(tmp_path, trial):
    # int32 members/seeds with int8 sides against int64 ones, and a chunk large
    # enough for 64-bit adjacency offsets against the same single chunk with
    # 32-bit ones: one kernel, the same labels
    from gnncore import _C

    rng = np.random.default_rng(trial)
    n = int(rng.integers(30, 120))
    pairs = random_stream(rng, n, 3 * n)
    edges = edge_file(tmp_path, pairs, "int32")
    chunk = int(rng.integers(5, 40))
    nodes = np.unique(pairs[:chunk])
    sides = rng.integers(0, 2, len(nodes))
    results = []
    for wide, rows in ((True, chunk), (False, chunk), (False, 1 << 30)):
        ids = np.int64 if wide else np.int32
        options = _C.GremBisectOptions(
            num_nodes=n, chunk_rows=rows, capacities=(n // 2 + 3, n // 2 + 3), passes=2
        )
        first = nodes if rows == chunk else np.unique(pairs)
        labels = sides if rows == chunk else rng.integers(0, 2, len(first))
        if rows != chunk:  # one chunk holds the whole file: compare with int32 offsets
            small = _C.GremBisectOptions(
                num_nodes=n, chunk_rows=len(pairs), capacities=options.capacities, passes=2
            )
            base = _C.grem_bisect(
                edges.spec(),
                np.arange(n, dtype=ids),
                first.astype(ids),
                labels.astype(np.int8),
                small,
            )
            results.append(np.asarray(base.side))
        result = _C.grem_bisect(
            edges.spec(),
            np.arange(n, dtype=ids),
            first.astype(ids),
            labels.astype(np.int64 if wide else np.int8),
            options,
        )
        results.append(np.asarray(result.side))
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[2], results[3])


def test_chunk_helpers_reject_bad_ids():
    from gnncore import _C

    with pytest.raises(IndexError, match="outside"):
        chunk_nodes_local(np.array([[0, 5]]), 3)
    with pytest.raises(IndexError, match="outside"):
        _C.grem_chunk_csr(np.array([0, 3], dtype=np.int64), 2)
    with pytest.raises(ValueError, match="even"):
        _C.grem_chunk_csr(np.array([0, 1, 1], dtype=np.int64), 2)
    assert [len(a) for a in first_appearance(np.zeros((0, 2), dtype=np.int64))] == [0, 0]


# Recursion, the partitioner and its files ----------------------------------------------


@pytest.fixture(scope="module")
def graph(tmp_path_factory) -> GraphDir:
    return GraphDir.open(
        planted_graph(tmp_path_factory.mktemp("grem") / "g", num_nodes=600, degree=10)
    )


@pytest.mark.parametrize("parts", [2, 3, 4, 5, 7])
def test_recursion_keeps_every_part_within_capacity(graph, parts, tmp_path):
    partitioner = GremPartitioner(chunk=0.1, tmp_dir=tmp_path)
    labels = partitioner.assign(graph, PartitionOptions(parts=parts, seed=1))
    assert labels.dtype == np.int64 and labels.shape == (graph.num_nodes,)
    sizes = np.bincount(labels, minlength=parts)
    assert len(sizes) == parts and sizes.min() > 0
    assert sizes.max() <= math.ceil(1.03 * graph.num_nodes / parts)
    assert len(partitioner.last_stats) == parts - 1
    chunk = chunk_rows(0.1, graph.manifest.num_undirected_edges)
    for record in partitioner.last_stats:  # the chunk stays fixed at every level
        assert record.chunks == math.ceil(record.edges / chunk)
        assert all(s <= c for s, c in zip(record.sizes, record.capacities))
        phases = record.phase_seconds
        assert set(phases) == {"seed", "grem", "passes", "split"}
        assert len(phases["passes"]) == len(record.moves)
        assert phases["seed"] + phases["grem"] + sum(phases["passes"]) <= record.seconds
    assert list(tmp_path.iterdir()) == []


def test_grem_finds_communities_and_beats_greedy(graph):
    options = PartitionOptions(parts=4, seed=0)
    cut = {}
    for name, partitioner in (
        ("grem", GremPartitioner(chunk=0.05)),
        ("grem0", GremPartitioner(chunk=0.05, passes=0)),
        ("greedy", GreedyPartitioner(chunk=0.05)),
    ):
        cut[name] = partition_metrics(graph, partitioner.assign(graph, options), 4)
        cut[name] = cut[name].edge_cut_fraction
    assert cut["grem"] < 0.25
    assert cut["grem"] <= cut["grem0"] < cut["greedy"]


@pytest.mark.parametrize("method", ["random", "ldg"])
def test_other_seeds_run_and_are_deterministic(graph, method):
    partitioner = GremPartitioner(chunk=0.1, seed_method=method)
    a = partitioner.assign(graph, PartitionOptions(parts=4, seed=3))
    b = partitioner.assign(graph, PartitionOptions(parts=4, seed=3))
    np.testing.assert_array_equal(a, b)
    assert np.bincount(a).max() <= math.ceil(1.03 * 600 / 4)


def test_isolated_nodes_of_a_graph_are_placed(tmp_path):
    # 40 nodes, edges only among the first 20.
    rng = np.random.default_rng(0)
    pairs = random_stream(rng, 20, 60)
    pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
    with create_graph_dir(tmp_path / "g", name="iso") as w:
        w.write_topology(40, pairs[:, 0], pairs[:, 1], directed=False)
    graph = GraphDir.open(tmp_path / "g")
    labels = GremPartitioner(chunk=0.2).assign(graph, PartitionOptions(parts=4))
    assert np.bincount(labels, minlength=4).max() <= math.ceil(1.03 * 40 / 4)


@pytest.mark.parametrize("parts", [3, 5, 6, 8])
def test_tiny_graphs_get_no_empty_part(tmp_path, parts):
    edges = edge_file(tmp_path, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (6, 7)])
    for method in ("metis", "random", "ldg", "clusters"):
        labels = grem_partition_file(edges, 8, parts, chunk_edges=2, seed_method=method)
        sizes = np.bincount(labels, minlength=parts)
        assert sizes.min() >= 1 and sizes.max() <= math.ceil(1.03 * 8 / parts)


def test_an_edgeless_stream_spreads_the_nodes(tmp_path):
    edges = edge_file(tmp_path, np.zeros((0, 2)))
    for method in ("metis", "clusters"):
        labels = grem_partition_file(edges, 10, 3, chunk_edges=5, seed_method=method)
        assert sorted(np.bincount(labels).tolist()) == [3, 3, 4]


def test_one_part_and_whole_graph_chunk(graph):
    assert not GremPartitioner().assign(graph, PartitionOptions(parts=1)).any()
    labels = GremPartitioner(chunk=1.0).assign(graph, PartitionOptions(parts=2))
    assert np.bincount(labels).max() <= 309


def test_temporary_side_files_exist_during_the_run_and_go_afterwards(graph, tmp_path, monkeypatch):
    seen = []
    real = grem_recursion.seed_sides

    def spy(*args, **kwargs):
        seen.append(sorted(p.name for p in tmp_path.glob("gnncore-grem-*/*")))
        return real(*args, **kwargs)

    monkeypatch.setattr(grem_recursion, "seed_sides", spy)
    GremPartitioner(tmp_dir=tmp_path).assign(graph, PartitionOptions(parts=4))
    # a sub-problem's file is named by its parts (first part, count)
    assert seen[0] == [] and seen[1] == ["p0-q2.bin", "p2-q2.bin"]
    assert seen[2] == ["p2-q2.bin"]  # a level's file is removed once it is split
    assert list(tmp_path.iterdir()) == []


def test_temporary_files_are_removed_on_error(graph, tmp_path, monkeypatch):
    calls = []
    real = grem_recursion.seed_sides

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return real(*args, **kwargs)

    monkeypatch.setattr(grem_recursion, "seed_sides", failing)
    with pytest.raises(RuntimeError, match="boom"):
        GremPartitioner(tmp_dir=tmp_path).assign(graph, PartitionOptions(parts=4))
    assert list(tmp_path.iterdir()) == []


# Argument checks ------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"chunk": 0}, "chunk"),
        ({"chunk": 1.5}, "chunk"),
        ({"chunk": "0.1"}, "chunk"),
        ({"passes": -1}, "passes"),
        ({"passes": 1.5}, "passes"),
        ({"seed_method": "kmeans"}, "seed_method"),
        ({"refine": "yes"}, "refine"),
        ({"seed_method": "clusters", "clusters": 1}, "clusters"),
        ({"seed_method": "clusters", "clusters": 0}, "clusters"),
        ({"seed_method": "clusters", "clusters": 2.5}, "clusters"),
        ({"seed_method": "clusters", "clusters": True}, "clusters"),
        ({"seed_method": "clusters", "clusters": "64"}, "clusters"),
        ({"seed_method": "clusters", "clusters": 1 << 17}, "clusters"),
        ({"seed_method": "metis", "clusters": 64}, "clusters"),
    ],
)
def test_bad_constructor_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GremPartitioner(**kwargs)


def test_bad_run_arguments_raise(graph, tmp_path):
    with pytest.raises(ValueError, match="cannot split"):
        GremPartitioner().assign(graph, PartitionOptions(parts=601))
    with pytest.raises(ValueError, match="imbalance"):
        GremPartitioner().assign(graph, PartitionOptions(parts=2, imbalance=1.5))
    edges = edge_file(tmp_path, [(0, 1)])
    with pytest.raises(ValueError, match="chunk_edges"):
        grem_partition_file(edges, 2, 2, chunk_edges=0)


def test_bad_edge_files_raise(tmp_path):
    seeds = dict(nodes=np.array([0, 1]), labels=np.array([0, 1]))

    def run(pairs, members=range(3), **kw):
        edges = edge_file(tmp_path, pairs)
        args = dict(
            chunk_edges=1, seed_nodes=seeds["nodes"], seed_labels=seeds["labels"], capacities=(2, 2)
        )
        args.update(kw)
        return grem_bisect(edges, 3, np.asarray(list(members)), **args)

    with pytest.raises(ValueError, match="outside the sub-problem"):
        run([(0, 1), (1, 2)], members=[0, 1])
    with pytest.raises(ValueError, match="self-loop"):
        run([(0, 1), (2, 2)])
    with pytest.raises(IndexError, match="outside"):
        run([(0, 1), (1, 7)])
    with pytest.raises(ValueError, match="first chunk"):
        run([(0, 1)], seed_nodes=np.array([0, 2]))
    with pytest.raises(ValueError, match="exceed"):
        run([(0, 1)], capacities=(1, 1))
    # the bad row deep in a chunk: the rows before it were renumbered to chunk-local
    # ids (0, 1, 2: not members here) and are given back before the row is named
    with pytest.raises(ValueError, match=r"row 2 \(4, 4\) of .* is a self-loop"):
        grem_bisect(edge_file(tmp_path, [(5, 6), (6, 4), (4, 4)]), 7, np.array([4, 5, 6]),
                    chunk_edges=3, seed_nodes=np.array([4, 5, 6]),
                    seed_labels=np.array([0, 1, 0]), capacities=(2, 2))  # fmt: skip
    np.save(tmp_path / "f.npy", np.zeros((3, 2), dtype=np.float32))
    with pytest.raises(ValueError, match="int32 or int64"):
        EdgeFile.from_npy(tmp_path / "f.npy")
    short = EdgeFile(str(tmp_path / "edges.npy"), 128, "int32", 1000)
    with pytest.raises(RuntimeError, match="fewer than"):
        short.read(0, 1)


def test_greedy_factory_and_names():
    greedy = greedy_partitioner(0.01)
    assert isinstance(greedy, GreedyPartitioner) and greedy.name == "greedy"
    assert greedy.chunk == 0.01 and greedy.passes == 0 and greedy.refine is False
    assert GremPartitioner.name == "grem"


# Seed method "clusters" -----------------------------------------------------------


@pytest.fixture(scope="module")
def communities(tmp_path_factory) -> GraphDir:
    """20,000 nodes in 8 planted communities (~100k edges): a 2% first chunk
    (average degree ~0.4) carries no community structure of its own."""
    return GraphDir.open(
        planted_graph(
            tmp_path_factory.mktemp("grem-c") / "g",
            num_nodes=20000,
            communities=8,
            degree=10,
            features=2,
        )
    )


def test_cluster_seed_keeps_communities_whole_where_metis_seed_cannot(communities):
    options = PartitionOptions(parts=4, seed=0)
    cut = {}
    for method in ("metis", "clusters"):
        # the seeds alone: the final k-way refinement repairs the metis seed's split
        partitioner = GremPartitioner(chunk=0.02, seed_method=method, final_passes=0)
        labels = partitioner.assign(communities, options)
        assert np.bincount(labels, minlength=4).max() <= math.ceil(1.03 * 20000 / 4)
        cut[method] = partition_metrics(communities, labels, 4).edge_cut_fraction
    # METIS itself cuts ~0.075 here: two communities per part.
    assert cut["clusters"] < 0.12 < 0.3 < cut["metis"]
    refined = GremPartitioner(chunk=0.02, seed_method="metis").assign(communities, options)
    assert partition_metrics(communities, refined, 4).edge_cut_fraction < 0.12
    plan = partitioner.last_plan
    assert plan is not None and plan.support.sum() == plan.sizes.sum()
    assert [r.seed for r in partitioner.last_stats] == ["clusters"] * 3


@pytest.mark.parametrize("parts", [3, 8])
def test_cluster_seed_is_balanced_and_deterministic(communities, parts, tmp_path):
    partitioner = GremPartitioner(chunk=0.02, seed_method="clusters", clusters=64, tmp_dir=tmp_path)
    a = partitioner.assign(communities, PartitionOptions(parts=parts, seed=5))
    b = partitioner.assign(communities, PartitionOptions(parts=parts, seed=5))
    np.testing.assert_array_equal(a, b)
    sizes = np.bincount(a, minlength=parts)
    assert sizes.min() > 0 and sizes.max() <= math.ceil(1.03 * 20000 / parts)
    assert list(tmp_path.iterdir()) == []
    assert "clusters=64" in repr(partitioner)


def test_cluster_graph_is_streamed_one_chunk_at_a_time(communities, monkeypatch):
    from gnncore import _C

    edges = EdgeFile.from_npy(communities.path / "edges_shuffled.npy")
    chunk = chunk_rows(0.02, edges.rows)
    reads: list[tuple[int, int]] = []
    calls: list[int] = []
    real, real_pass = EdgeFile.read, _C.grem_cluster_edges

    def spy(self, begin, count):
        reads.append((begin, count))
        return real(self, begin, count)

    def spy_pass(*args, **kwargs):
        calls.append(kwargs["chunk_rows"])  # of the C++ streaming pass
        return real_pass(*args, **kwargs)

    monkeypatch.setattr(EdgeFile, "read", spy)
    monkeypatch.setattr(_C, "grem_cluster_edges", spy_pass)
    plan = cluster_plan(edges, communities.num_nodes, 4, chunk_edges=chunk)
    assert reads == [(0, chunk)]  # the prefix (here the first chunk), read once
    assert calls == [chunk]
    # The counted cluster graph matches a count over the whole stream.
    monkeypatch.setattr(EdgeFile, "read", real)
    pairs = edges.read(0, edges.rows)
    cu, cv = plan.cluster[pairs[:, 0]], plan.cluster[pairs[:, 1]]
    both = (cu >= 0) & (cv >= 0)
    assert plan.cluster_edges == int(np.count_nonzero(both & (cu != cv)))
    # internal_edges counts inside every prefix cluster, the dropped isolated ones too
    assert plan.internal_edges >= int(np.count_nonzero(both & (cu == cv)))
    monkeypatch.setattr(
        grem_plan,
        "core_clusters",
        _keep_every_cluster,
    )
    kept = cluster_plan(edges, communities.num_nodes, 4, chunk_edges=chunk)
    ku, kv = kept.cluster[pairs[:, 0]], kept.cluster[pairs[:, 1]]
    assert kept.internal_edges == plan.internal_edges
    assert kept.internal_edges == int(np.count_nonzero((ku >= 0) & (ku == kv)))
    assert plan.cluster.dtype == np.int32 and len(plan.cluster) == communities.num_nodes
    assert plan.part.min() >= 0 and plan.part.max() < 4


def test_cluster_graph_counts_match_a_brute_force_count(tmp_path):
    rng = np.random.default_rng(0)
    pairs = random_stream(rng, 60, 300)
    edges = edge_file(tmp_path, pairs)
    cluster = rng.integers(-1, 50, 60).astype(np.int32)
    from gnncore import _C

    for k, buffer in ((50, 1 << 20), (2100, 1 << 20), (50, 3), (2100, 0)):
        # buffer 3 or 0: the raw keys are merged after every chunk
        graph = _C.grem_cluster_edges(edges.spec(), cluster, k, chunk_rows=7, buffer_keys=buffer)
        keys, counts, internal = np.asarray(graph.keys), np.asarray(graph.counts), graph.internal
        if buffer == 1 << 20:
            same = cluster_graph_edges(edges, cluster, k, chunk_edges=7)
            np.testing.assert_array_equal(same[0], keys)
            np.testing.assert_array_equal(same[1], counts)
        expected: dict[int, int] = {}
        inside = 0
        for u, v in pairs.tolist():
            a, b = int(cluster[u]), int(cluster[v])
            if a < 0 or b < 0:
                continue
            if a == b:
                inside += 1
            else:
                key = min(a, b) * k + max(a, b)
                expected[key] = expected.get(key, 0) + 1
        assert dict(zip(keys.tolist(), counts.tolist())) == expected
        assert internal == inside and np.all(np.diff(keys) > 0)
    with pytest.raises(IndexError, match=r"\[-1, k\)"):
        cluster_graph_edges(edges, np.full(60, 50, dtype=np.int32), 50, chunk_edges=7)
    with pytest.raises(IndexError, match="outside"):
        cluster_graph_edges(edges, cluster[:30], 50, chunk_edges=7)


def test_the_plan_clusters_only_the_stream_prefix(communities, monkeypatch):
    edges = EdgeFile.from_npy(communities.path / "edges_shuffled.npy")
    chunk = chunk_rows(0.1, edges.rows)
    plan = cluster_plan(edges, communities.num_nodes, 4, chunk_edges=chunk, prefix_edges=500)
    clustered = np.zeros(communities.num_nodes, dtype=bool)
    clustered[edges.read(0, 500).reshape(-1)] = True
    # the clusters no stream edge joins to another leave the plan ...
    assert not (plan.cluster[~clustered] >= 0).any() and (plan.cluster >= 0).sum() > 0
    # ... and, kept, every prefix node has a cluster
    monkeypatch.setattr(
        grem_plan,
        "core_clusters",
        _keep_every_cluster,
    )
    plan = cluster_plan(edges, communities.num_nodes, 4, chunk_edges=chunk, prefix_edges=500)
    np.testing.assert_array_equal(plan.cluster >= 0, clustered)
    # default prefix: min(chunk, max(1% of |E|, PLAN_MIN_PREFIX)) rows
    monkeypatch.setattr(grem_plan, "PLAN_MIN_PREFIX", 0)
    plan = cluster_plan(edges, communities.num_nodes, 4, chunk_edges=chunk)
    clustered[:] = False
    clustered[edges.read(0, chunk_rows(0.01, edges.rows)).reshape(-1)] = True
    np.testing.assert_array_equal(plan.cluster >= 0, clustered)
    monkeypatch.setattr(grem_plan, "PLAN_MIN_PREFIX", 1 << 17)
    plan = cluster_plan(edges, communities.num_nodes, 4, chunk_edges=chunk)
    clustered[edges.read(0, chunk).reshape(-1)] = True
    np.testing.assert_array_equal(plan.cluster >= 0, clustered)


def test_a_large_cluster_graph_is_trimmed_to_its_budget(communities, monkeypatch):
    edges = EdgeFile.from_npy(communities.path / "edges_shuffled.npy")
    chunk = chunk_rows(0.05, edges.rows)
    full = cluster_plan(edges, communities.num_nodes, 4, chunk_edges=chunk, clusters=2000)
    monkeypatch.setattr(grem_plan, "PLAN_MIN_BUDGET", 0)  # budget: one chunk
    trimmed = cluster_plan(edges, communities.num_nodes, 4, chunk_edges=chunk, clusters=2000)
    assert trimmed.clusters < full.clusters and trimmed.cluster_edges < full.cluster_edges
    assert trimmed.cluster.max() == trimmed.clusters - 1
    assert np.count_nonzero(trimmed.cluster >= 0) == trimmed.sizes.sum() == trimmed.support.sum()
    # Only whole clusters were dropped, the largest first.
    kept = trimmed.cluster >= 0
    assert np.array_equal(full.cluster[kept] >= 0, np.ones(np.count_nonzero(kept), bool))
    assert trimmed.sizes.max() <= np.sort(full.sizes)[-2]


def test_chunk_components_and_clusters():
    # Components {0,1,2}, {3,4}, {5..14} (a path), {15}; 16 nodes, target size 4.
    path = [(i, i + 1) for i in range(5, 14)]
    local = np.array([(0, 1), (2, 1), (3, 4)] + path + [(15, 15)])[:-1]
    comp = chunk_components(local, 16)
    assert comp.tolist() == [0, 0, 0, 1, 1] + [2] * 10 + [3]
    cluster = cluster_chunk(local, 16, clusters=4, seed=0)
    # Small components are clusters of their own; the path is cut into 3.
    assert cluster[0] == cluster[1] == cluster[2] and cluster[3] == cluster[4]
    assert len({cluster[0], cluster[3], cluster[15]}) == 3
    path_clusters = set(cluster[5:15].tolist())
    assert len(path_clusters) == 3 and not path_clusters & {cluster[0], cluster[3], cluster[15]}
    assert sorted(set(cluster.tolist())) == list(range(6))
    assert cluster_chunk(local, 16, clusters=16, seed=0).tolist() == list(range(16))


def test_trimming_drops_the_largest_clusters_first():
    # Clusters 0..3 of sizes 5, 1, 3, 2; edges 0-1, 0-2, 0-3, 1-3, 2-3.
    k = 4
    keys = np.array([0 * k + 1, 0 * k + 2, 0 * k + 3, 1 * k + 3, 2 * k + 3])
    counts = np.array([1, 2, 3, 4, 5])
    sizes = np.array([5, 1, 3, 2])
    new_keys, new_counts, new_sizes, renumber = trim_cluster_graph(keys, counts, sizes, 3)
    # Dropping cluster 0 (size 5) leaves 1-3 and 2-3: within the budget.
    assert renumber.tolist() == [-1, 0, 1, 2] and new_sizes.tolist() == [1, 3, 2]
    assert new_keys.tolist() == [0 * 3 + 2, 1 * 3 + 2] and new_counts.tolist() == [4, 5]
    # Budget 1: cluster 2 (size 3) goes next, leaving 1-3.
    new_keys, new_counts, sizes1, renumber = trim_cluster_graph(keys, counts, sizes, 1)
    assert renumber.tolist() == [-1, 0, -1, 1] and sizes1.tolist() == [1, 2]
    assert new_keys.tolist() == [0 * 2 + 1] and new_counts.tolist() == [4]


def _keep_every_cluster(keys, counts, sizes):
    return keys, counts, sizes, np.arange(len(sizes))


def test_the_plan_keeps_the_core_of_the_cluster_graph(monkeypatch):
    # Clusters 0..5: the triangle 0-2-5, cluster 3 hanging off 5, 1 and 4 alone.
    k = 6
    keys = np.array([0 * k + 2, 0 * k + 5, 2 * k + 5, 3 * k + 5])
    counts, sizes = np.array([3, 4, 5, 6]), np.array([4, 7, 2, 1, 9, 3])
    new_keys, new_counts, new_sizes, renumber = core_clusters(keys, counts, sizes, 2, 8)
    assert renumber.tolist() == [0, -1, 1, -1, -1, 2] and new_sizes.tolist() == [4, 2, 3]
    assert new_keys.tolist() == [0 * 3 + 1, 0 * 3 + 2, 1 * 3 + 2]  # still a < b, increasing
    assert new_counts.tolist() == [3, 4, 5]
    # degree 1 is enough: only the clusters without an edge go
    new_keys, new_counts, new_sizes, renumber = core_clusters(keys, counts, sizes, 1, 8)
    assert renumber.tolist() == [0, -1, 1, 2, -1, 3] and new_counts.tolist() == [3, 4, 5, 6]
    assert new_keys.tolist() == [0 * 4 + 1, 0 * 4 + 3, 1 * 4 + 3, 2 * 4 + 3]
    # A chain 0-1-2-3 peels from both ends, one cluster a side each round.
    chain = np.array([0 * 4 + 1, 1 * 4 + 2, 2 * 4 + 3])
    ones = np.ones(4, dtype=np.int64)
    assert core_clusters(chain, ones[:3], ones, 2, 1)[3].tolist() == [-1, 0, 1, -1]
    assert core_clusters(chain, ones[:3], ones, 2, 8)[3].tolist() == [-1, -1, -1, -1]
    # Nothing peeled: the arrays come back as they are.
    same = core_clusters(new_keys, new_counts, new_sizes, 1, 8)
    assert same[0] is new_keys and same[1] is new_counts and same[2] is new_sizes
    assert same[3].tolist() == [0, 1, 2, 3]


def test_the_plan_leaves_out_the_clusters_outside_the_core(tmp_path):
    # The 4-edge prefix holds the clusters {0, 1}, {2, 3}, {4, 5} and {6, 7};
    # the rest of the stream joins the first three, never {6, 7}: its nodes
    # get no cluster, the others a cluster planned into a part.
    rows = [(0, 1), (2, 3), (4, 5), (6, 7)] + [(1, 2), (3, 4), (5, 0), (0, 2), (2, 4)] * 3
    path = tmp_path / "edges.npy"
    np.save(path, np.array(rows, dtype=np.int32))
    plan = cluster_plan(EdgeFile.from_npy(path), 8, 2, chunk_edges=4, clusters=4, prefix_edges=4)
    assert plan.cluster[6] == plan.cluster[7] == -1
    assert (plan.cluster[:6] >= 0).all() and plan.clusters == 3
    assert len(set(plan.cluster[:6].tolist())) == 3 and set(plan.part.tolist()) <= {0, 1}


def test_a_tree_like_cluster_graph_is_planned_whole(tmp_path):
    # A random tree streamed in random order: its cluster graph is a forest, whose
    # core is empty, so the plan keeps every cluster instead of none.
    rng = np.random.default_rng(0)
    n = 3000
    pairs = np.stack([[rng.integers(0, i) for i in range(1, n)], np.arange(1, n)], axis=1)
    edges = edge_file(tmp_path, pairs[rng.permutation(n - 1)])
    plan = cluster_plan(edges, n, 4, chunk_edges=300)
    assert plan.clusters > 0 and plan.cluster_edges > 0
    assert (plan.cluster >= 0).sum() == plan.sizes.sum()


def test_plan_sides_follow_the_plan_and_the_majority():
    # Nodes 0..5 planned: cluster 0 -> part 2, cluster 1 -> part 3, cluster 2 ->
    # part 0 (outside the sub-problem's parts 2..3); 6, 7 have no cluster.
    cluster = np.array([0, 0, 1, 1, 2, 2, -1, -1], dtype=np.int32)
    plan = ClusterPlan(
        cluster, np.array([2, 3, 0]), np.array([2, 2, 2]), np.array([2, 0, 2, 2]), 0, 0, {}
    )
    pairs = np.array([(0, 1), (2, 3), (4, 0), (5, 2), (5, 3), (6, 7), (6, 1)])
    nodes, sides = plan_sides(pairs, plan, 8, 2, (1, 1), (5, 5))
    assert nodes.tolist() == list(range(8))
    # 4 sees side 0 (node 0); 5 sees side 1 twice; 6 follows 1 (round 1), 7
    # follows 6 (round 2).
    assert sides.tolist() == [0, 0, 1, 1, 0, 1, 0, 0]
    # Capacity 4 on side 0: the repair hands back a node with the fewest
    # own-side minus other-side chunk neighbours (4 and 7: one each; 4 first).
    _, sides = plan_sides(pairs, plan, 8, 2, (1, 1), (4, 5))
    assert sides.tolist() == [0, 0, 1, 1, 1, 1, 0, 0]
    # No labelled neighbour: fill the side with more room until both have the
    # same, then alternate.
    _, sides = plan_sides(np.array([(6, 7), (7, 6)])[:1], plan, 8, 2, (1, 1), (3, 1))
    assert sides.tolist() == [0, 0]
    nodes, sides = plan_sides(np.array([(6, 7), (0, 5)]), plan, 8, 0, (1, 1), (4, 2))
    assert dict(zip(nodes.tolist(), sides.tolist())) == {0: 0, 5: 0, 6: 0, 7: 1}


def test_dense_or_thinly_planned_bisections_fall_back_to_metis():
    plan = ClusterPlan(
        np.zeros(0, dtype=np.int32),
        np.zeros(0, dtype=np.int64),
        np.zeros(0, dtype=np.int64),
        np.array([1000, 1000, 100, 1000]),
        0,
        0,
        {},
    )
    sparse = np.array([(2 * i, 2 * i + 1) for i in range(50)])  # average degree 1
    assert plan_applies(plan, sparse, 100, 0, (1, 1))
    assert not plan_applies(plan, sparse, 100, 1, (1, 1))  # part 2: 100 planned nodes
    assert plan_applies(plan, sparse, 100, 0, (2, 2))  # parts 2 + 3: 1100 nodes
    # A clique on 8 nodes: average degree 7 >= PLAN_MAX_DEGREE.
    clique = np.array([(i, j) for i in range(8) for j in range(i + 1, 8)])
    assert not plan_applies(plan, clique, 100, 0, (1, 1))
    # A fine plan (PLAN_FINE_CLUSTERS clusters planned into each side) seeds a
    # dense chunk too; one cluster short on a side and METIS seeds it.
    fine = grem_plan.PLAN_FINE_CLUSTERS
    part = np.repeat(np.arange(4), fine)
    plan = ClusterPlan(
        np.zeros(0, dtype=np.int32),
        part,
        np.ones(len(part), dtype=np.int64),
        np.full(4, 1000),
        len(part),
        0,
        {},
    )
    assert plan_applies(plan, clique, 100, 0, (1, 1))
    plan = ClusterPlan(
        np.zeros(0, dtype=np.int32),
        part[1:],
        np.ones(len(part) - 1, dtype=np.int64),
        np.full(4, 1000),
        len(part),
        0,
        {},
    )
    assert not plan_applies(plan, clique, 100, 0, (1, 1))
    assert plan_applies(plan, clique, 100, 1, (1, 1))


def test_a_dense_first_chunk_is_seeded_by_metis(communities):
    partitioner = GremPartitioner(chunk=1.0, seed_method="clusters")
    labels = partitioner.assign(communities, PartitionOptions(parts=2))
    assert partitioner.last_stats[0].seed == "clusters:metis"  # average degree 10
    assert partition_metrics(communities, labels, 2).edge_cut_fraction < 0.1


def test_cli_offers_the_cluster_seed():
    import argparse

    from gnncore.cli.partition import add_arguments, settings_from

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        ["g", "o", "--method", "grem", "--parts", "4", "--seed-method", "clusters"]
    )
    assert settings_from(args).seed_method == "clusters"


def test_cli_sets_the_cluster_count_and_the_seed_defaults_by_passes():
    import argparse

    from gnncore.cli.partition import add_arguments, settings_from
    from gnncore.partition.run import make_partitioner, method_params

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["g", "o", "--method", "grem", "--parts", "4", "--clusters", "40"])
    settings = settings_from(args)
    assert settings.clusters == 40 and settings.seed_method is None
    assert method_params("grem", settings) == {
        "chunk": 0.1,
        "passes": 3,
        "seed_method": "clusters",
        "clusters": 40,
        "workers": 0,  # auto: resolved from the graph's size when the run starts
        "final_passes": 8,
    }
    partitioner = make_partitioner("grem", settings)
    assert partitioner.seed_method == "clusters" and partitioner.clusters == 40
    args = parser.parse_args(["g", "o", "--method", "grem", "--parts", "4", "--passes", "0"])
    assert method_params("grem", settings_from(args))["seed_method"] == "metis"
    assert "clusters" not in method_params("grem", settings_from(args))
    assert method_params("greedy", settings_from(args))["seed_method"] == "metis"
    assert GremPartitioner(passes=0).seed_method == "metis"
    assert GremPartitioner().seed_method == "clusters"
    with pytest.raises(ValueError, match="clusters applies"):
        GremPartitioner(passes=0, clusters=40)


_THREADED_BISECTION = """
import hashlib, sys
import numpy as np
from gnncore.partition.edge_stream import EdgeFile
from gnncore.partition.grem import grem_bisect
path, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
edges = EdgeFile.from_npy(path)
first = edges.read(0, 5000).reshape(-1)
nodes = first[np.sort(np.unique(first, return_index=True)[1])]
cap = -(-n * 52 // 100)
result = grem_bisect(edges, n, None, chunk_edges=5000, seed_nodes=nodes,
                     seed_labels=(nodes % 2).astype(np.int8), capacities=(cap, cap),
                     passes=3, out_paths=(out + "0.bin", out + "1.bin"))
digest = hashlib.sha256(np.asarray(result.side).tobytes())
for s in (0, 1):
    digest.update(open(out + f"{s}.bin", "rb").read())
print(digest.hexdigest(), list(result.moves))
"""


@pytest.mark.parametrize("spread", [False, True])
def test_the_threaded_restreams_and_split_give_the_same_sides_moves_and_files(tmp_path, spread):
    # The split gathers a share of each block's rows per thread, written share
    # after share; from 2**24 nodes (``spread``: the 3,000 nodes' ids scattered
    # over that many) the restreaming passes also count their blocks of 5,000
    # rows on OpenMP's threads (atomic adds; the last block of 4,000 in one
    # thread). Whatever the thread count: the same sides, moves and files.
    rng = np.random.default_rng(11)
    pairs = random_stream(rng, 3000, 24000)
    n = 3000
    if spread:
        n = 1 << 24
        pairs = np.sort(rng.choice(n, 3000, replace=False))[pairs]
    edges = edge_file(tmp_path, pairs)
    runs = {}
    for threads in (1, 2, 3):
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        done = subprocess.run(
            [sys.executable, "-c", _THREADED_BISECTION, edges.path, str(tmp_path / f"t{threads}-"),
             str(n)],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        runs[threads] = done.stdout.strip()
    assert runs[1] == runs[2] == runs[3], runs
    assert runs[1].endswith("]") and "[0]" not in runs[1]  # the passes moved nodes
