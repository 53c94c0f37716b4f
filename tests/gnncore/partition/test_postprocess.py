"""Relabeling, halos and split rebalancing of an assignment."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import planted_graph
from gnncore.errors import InputError
from gnncore.partition import PartitionOptions, partition_metrics, symmetric_graph
from gnncore.partition.metis import MetisPartitioner
from gnncore.partition.metrics import max_part_size
from gnncore.partition.postprocess import (
    balance_splits,
    halo_nodes,
    halo_sizes,
    local_id,
    part_of,
    postprocess_arrays,
    relabel,
    split_bounds,
    split_codes,
)
from gnncore.partition.simple import random_assignment
from gnncore.store import GraphDir
from gnncore.testing.partition_reference import (
    halo_reference,
    relabel_reference,
    write_random_graph,
)


@pytest.fixture(scope="module")
def random_graph(tmp_path_factory):
    return GraphDir.open(
        write_random_graph(tmp_path_factory.mktemp("pp") / "g", 300, 700, seed=4, labelled=0.3)
    )


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return GraphDir.open(
        planted_graph(tmp_path_factory.mktemp("pp") / "planted", num_nodes=800, degree=8, seed=2)
    )


# Relabeling ----------------------------------------------------------------------


@pytest.mark.parametrize("parts", [1, 3, 6])
def test_relabel_matches_the_reference(parts):
    rng = np.random.default_rng(parts)
    assignment = rng.integers(0, parts, 97)
    if parts > 1:
        assignment[assignment == parts - 2] = 0  # leave a part empty
    r = relabel(assignment, parts)
    old_of_new, offsets = relabel_reference(assignment, parts)
    assert r.old_of_new.tolist() == old_of_new and r.offsets.tolist() == offsets
    assert r.new_of_old[r.old_of_new].tolist() == list(range(97))
    new_ids = np.arange(97)
    assert np.array_equal(part_of(new_ids, r.offsets), assignment[r.old_of_new])
    local = local_id(new_ids, r.offsets)
    for i in range(parts):
        assert local[r.offsets[i] : r.offsets[i + 1]].tolist() == list(
            range(r.offsets[i + 1] - r.offsets[i])
        )
    with pytest.raises(IndexError):
        part_of(np.array([97]), r.offsets)
    with pytest.raises(ValueError, match="outside"):
        relabel(np.append(assignment, parts), parts)


# Halos -----------------------------------------------------------------------------


def test_halos_match_the_reference(random_graph):
    sym = symmetric_graph(random_graph)
    for parts, seed in ((2, 0), (5, 1), (8, 2)):
        assignment = random_assignment(random_graph.num_nodes, parts, seed)
        halos = halo_nodes(sym, assignment, parts)
        want = halo_reference(sym.indptr, sym.indices, assignment, parts)
        assert [h.tolist() for h in halos] == [w.tolist() for w in want]
        assert halo_sizes(halos).tolist() == [len(w) for w in want]
        for i, h in enumerate(halos):
            assert h.dtype == np.int64 and not np.any(assignment[h] == i)
    wide = type(sym)(sym.num_nodes, sym.indptr, sym.indices.astype(np.int64))
    assert [h.tolist() for h in halo_nodes(wide, assignment, 8)] == [w.tolist() for w in want]


def test_postprocess_arrays(random_graph):
    assignment = random_assignment(random_graph.num_nodes, 3, 5)
    arrays = postprocess_arrays(random_graph, assignment, 3)
    assert sorted(arrays) == sorted(
        ["relabel_new_of_old", "relabel_old_of_new", "offsets", "halo_0", "halo_1", "halo_2"]
    )
    assert arrays["offsets"].tolist() == [0, 100, 200, 300]
    assert all(a.dtype == np.int64 for a in arrays.values())


# Split balance ---------------------------------------------------------------------


def test_split_bounds():
    assert split_bounds(80, 4, 0.10) == (18, 22)
    assert split_bounds(100, 10, 0.10) == (9, 11)  # 10·0.9 rounds to 9, not 10
    assert split_bounds(5, 2, 0.10) == (2, 3)  # no integer in [2.25, 2.75]
    assert split_bounds(2, 4, 0.10) == (0, 1)


def assert_balanced(graph, report, parts, tolerance=0.10, imbalance=0.03):
    assert report.satisfied
    sizes = np.bincount(report.assignment, minlength=parts)
    assert sizes.max() <= max_part_size(graph.num_nodes, parts, imbalance)
    metrics = partition_metrics(graph, report.assignment, parts)
    assert metrics.edge_cut == report.cut_after
    for split, counts in metrics.split_counts.items():
        mean = sum(counts) / parts
        lo, hi = report.bounds[split]
        assert lo >= np.floor(min(mean * (1 - tolerance), np.floor(mean)))
        assert hi <= np.ceil(max(mean * (1 + tolerance), np.ceil(mean)))
        assert all(lo <= c <= hi for c in counts), (split, counts, (lo, hi))
        assert counts == report.counts_after[split]


@pytest.mark.parametrize("parts", [4, 8])
def test_balance_splits_after_metis(planted, parts):
    assignment = MetisPartitioner().assign(planted, PartitionOptions(parts=parts, seed=0))
    before = partition_metrics(planted, assignment, parts)
    report = balance_splits(planted, assignment, parts)
    assert_balanced(planted, report, parts)
    assert report.cut_before == before.edge_cut
    assert report.cut_after >= report.cut_before  # METIS's cut is (locally) minimal
    assert report.moved == int(np.count_nonzero(report.assignment != assignment))
    assert report.moved >= report.split_moves > 0
    again = balance_splits(planted, assignment, parts)
    assert np.array_equal(again.assignment, report.assignment)


def test_full_parts_swap_instead_of_growing(random_graph, planted):
    # imbalance 0 and an exactly balanced input: every move into a part must
    # evict another node; the random graph has unlabelled nodes, the planted
    # graph has none (the evicted nodes then belong to other splits).
    for graph in (random_graph, planted):
        assignment = random_assignment(graph.num_nodes, 4, 3)
        report = balance_splits(graph, assignment, 4, imbalance=0.0)
        assert_balanced(graph, report, 4, imbalance=0.0)
        assert report.evictions == report.split_moves > 0
        assert np.array_equal(np.bincount(report.assignment), np.bincount(assignment))


def test_parts_sorted_by_split_are_repaired(planted):
    # Every node of the planted graph is in a split; parts cut from the nodes
    # sorted by split start with train/val all in the first parts. Evictions
    # must then move nodes of splits balanced later (relaxed rule).
    codes = split_codes(planted)
    order = np.lexsort((np.arange(planted.num_nodes), codes))
    assignment = np.empty(planted.num_nodes, dtype=np.int64)
    assignment[order] = np.arange(planted.num_nodes) * 4 // planted.num_nodes
    report = balance_splits(planted, assignment, 4)
    assert_balanced(planted, report, 4)
    assert report.evictions > 0


def test_balance_needs_splits(tmp_path):
    graph = GraphDir.open(write_random_graph(tmp_path / "g", 30, 40, seed=0, labelled=0))
    with pytest.raises(InputError, match="splits"):
        balance_splits(graph, np.zeros(30, dtype=np.int64), 2)
