"""The plan's METIS below its top split in a background process
(``gnncore.partition.grem.plan_levels``): the subgraphs of the split's sides,
the parts each side's clusters get, and GREM with workers using it."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from conftest import planted_graph
from gnncore.partition import PartitionOptions
from gnncore.partition.grem import GremPartitioner
from gnncore.partition.grem import plan as plan_module
from gnncore.partition.grem.bisect import halves
from gnncore.partition.grem.plan import PLAN_NCUTS, ClusterPlan, cluster_csr
from gnncore.partition.grem.plan_levels import (
    LowerLevels,
    metis_parts,
    side_subgraph,
    split_plan,
)
from gnncore.partition.metrics import edge_cut
from gnncore.store import GraphDir


def _cluster_graph(k: int, seed: int) -> tuple[np.ndarray, tuple, np.ndarray]:
    """A weighted cluster graph of ``k`` clusters in 4 groups, and cluster sizes."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, k, 12 * k)
    same = rng.random(len(a)) < 0.9
    b = np.where(
        same, (rng.integers(0, k // 4, len(a)) * 4 + a % 4) % k, rng.integers(0, k, len(a))
    )
    keep = a != b
    lo, hi = np.minimum(a, b)[keep], np.maximum(a, b)[keep]
    keys, counts = np.unique(lo * k + hi, return_counts=True)
    sizes = rng.integers(1, 20, k)
    return keys, cluster_csr(keys, counts, k), sizes


def _plan(part: np.ndarray, sizes: np.ndarray, parts: int, lower) -> ClusterPlan:
    """A plan of ``part`` per cluster (no nodes: what the levels read and set)."""
    support = np.bincount(part, weights=sizes, minlength=parts).astype(np.int64)
    return ClusterPlan(np.zeros(1, np.int32), part, sizes, support, 0, 0, {}, lower)


def test_side_subgraph_matches_a_plain_python_one():
    k = 60
    _, csr, _ = _cluster_graph(k, seed=1)
    xadj, adjncy, weights = csr
    high_side = np.random.default_rng(2).random(k) < 0.4
    for side in (False, True):
        members = np.flatnonzero(high_side == side)
        rank = {int(c): i for i, c in enumerate(members)}
        expected = []
        for c in members:
            row = [
                (rank[int(adjncy[j])], int(weights[j]))
                for j in range(xadj[c], xadj[c + 1])
                if high_side[adjncy[j]] == side
            ]
            expected.append(row)
        sub_xadj, sub_adjncy, sub_weights = side_subgraph(csr, high_side, side, members)
        got = [
            list(zip(sub_adjncy[s:e].tolist(), sub_weights[s:e].tolist(), strict=True))
            for s, e in zip(sub_xadj[:-1], sub_xadj[1:], strict=True)
        ]
        assert got == expected


@pytest.mark.parametrize("parts", [3, 5, 8])
def test_each_side_gets_its_share_of_the_parts_balanced(parts):
    k = 400
    _, csr, sizes = _cluster_graph(k, seed=parts)
    provisional, lower = split_plan(k, sizes, csr, parts, 0, 0.03, PLAN_NCUTS)
    q0, _ = halves(parts)
    assert set(np.unique(provisional).tolist()) == {0, q0}

    plan = _plan(provisional, sizes, parts, lower)
    whole = plan.completed()
    assert whole.lower is None and {"lower levels", "waited"} <= set(whole.seconds)
    low = provisional == 0
    assert (whole.part[low] < q0).all() and (whole.part[~low] >= q0).all()
    assert set(whole.part.tolist()) == set(range(parts))
    weight = np.bincount(whole.part, weights=sizes, minlength=parts)
    np.testing.assert_array_equal(whole.support, weight)
    # METIS's balance per bisection compounds over the levels: within 10% here
    assert weight.max() <= 1.10 * sizes.sum() / parts
    # against one METIS call on the whole graph, a comparable cut
    one = metis_parts(k, sizes, csr, parts, 0, 0.03, PLAN_NCUTS)
    xadj, adjncy, weights = csr
    rows = np.repeat(np.arange(k), np.diff(xadj))

    def cut(part):
        return int(weights[part[rows] != part[adjncy]].sum())

    assert cut(whole.part) <= 1.25 * cut(one) + 10


def test_a_pending_plan_is_not_pickled():
    k = 200
    _, csr, sizes = _cluster_graph(k, seed=3)
    provisional, lower = split_plan(k, sizes, csr, 4, 0, 0.03, PLAN_NCUTS)
    plan = _plan(provisional, sizes, 4, lower)
    try:
        with pytest.raises(TypeError, match="pending"):
            pickle.dumps(plan)
    finally:
        lower.close()
    whole_plan = _plan(provisional, sizes, 4, None)
    assert pickle.loads(pickle.dumps(whole_plan)).lower is None


def test_the_background_process_raises_its_error_here_and_stops_when_closed():
    low, high = np.arange(2), np.arange(2, 4)
    broken = LowerLevels(("not", "the", "halves"), low, high, 1)
    with pytest.raises(ValueError, match="not enough values to unpack"):
        broken.collect(4)
    k = 2000
    _, csr, sizes = _cluster_graph(k, seed=5)
    _, lower = split_plan(k, sizes, csr, 16, 0, 0.03, PLAN_NCUTS)
    lower.close()  # not collected: the process is stopped, the pipe closed
    lower.close()
    assert not lower._process.is_alive()


def test_grem_with_workers_plans_below_the_top_split_in_the_background(tmp_path, monkeypatch):
    graph = GraphDir.open(planted_graph(tmp_path / "g", num_nodes=6000, communities=8, degree=12))
    options = PartitionOptions(parts=8, seed=1)
    alone = GremPartitioner(chunk=0.1, seed_method="clusters", workers=1)
    base = alone.assign(graph, options)
    assert "lower levels" not in alone.last_plan.seconds
    monkeypatch.setattr(plan_module, "PLAN_SPLIT_MIN_EDGES", 1)  # any cluster graph
    lines: list[str] = []
    split = GremPartitioner(chunk=0.1, seed_method="clusters", workers=2)
    split.progress = lines.append
    labels = split.assign(graph, options)
    assert split.last_plan is not None and split.last_plan.lower is None
    assert "lower levels" in split.last_plan.seconds
    assert any("METIS below it runs beside the top bisection" in line for line in lines)
    assert any("took" in line and "in the background" in line for line in lines)
    # every part used, within the cap; the cut near the one-process plan's
    assert set(labels.tolist()) == set(range(8))
    cap = int(np.ceil(graph.num_nodes / 8 * 1.03))
    assert np.bincount(labels).max() <= cap
    edges = graph.edges()
    u, v = edges["src"].to_numpy(), edges["dst"].to_numpy()
    assert edge_cut(u, v, labels) <= 1.15 * edge_cut(u, v, base) + 20
