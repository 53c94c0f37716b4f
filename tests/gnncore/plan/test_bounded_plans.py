"""The planners in bounded memory: the streaming spmv estimator, the O(cache)
lookup tables of plan format v2, the refusal of v1 placements, and the memory
estimate and budget refusal."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gnncore.errors import InputError
from gnncore.partition import partition_graph
from gnncore.plan import (
    PlacementPlan,
    PlacementSettings,
    PlanError,
    ReplicationPlan,
    ReplicationSettings,
    plan_placement,
    plan_replication,
)
from gnncore.plan.estimators import spmv_access
from gnncore.plan.lookup import lookup_tables, sorted_tables
from gnncore.plan.memory import placement_memory_bytes
from gnncore.plan.placement import cache_slots, peer_groups
from gnncore.plan.replication import CURVE_RATES, memory_curve, stored_ids
from gnncore.store import GraphDir
from gnncore.store.manifest import MANIFEST_FILE
from gnncore.testing.plan_reference import access_spmv_reference
from tests.gnncore.plan.test_plans import write_planted

_C = pytest.importorskip("gnncore._C")


def random_csr(seed: int, n: int = 80, m: int = 300, dtype=np.int32):
    """A directed multigraph's CSR with self-loops, duplicates and isolated nodes."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n - 6, m), rng.integers(0, n - 6, m)
    order = np.argsort(dst, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    return indptr, src[order].astype(dtype)


@pytest.mark.parametrize("block_ids", [1, 7, 64, 1 << 20])
@pytest.mark.parametrize("seed", [0, 1])
def test_streaming_spmv_equals_the_in_memory_kernel_exactly(seed, block_ids):
    indptr, indices = random_csr(seed)
    train = np.random.default_rng(seed).integers(0, 80, 30)
    for layers in (0, 1, 3):
        want = _C.access_spmv(indptr, indices, train, layers)
        got = spmv_access(indptr, indices, train, layers, block_ids=block_ids)
        assert np.array_equal(got, want)
        np.testing.assert_allclose(got, access_spmv_reference(indptr, indices, train, layers))


def test_streaming_spmv_reads_memory_mapped_files_and_reports_passes(tmp_path):
    indptr, indices = random_csr(3)
    np.save(tmp_path / "indptr.npy", indptr)
    np.save(tmp_path / "indices.npy", indices)
    lines: list[str] = []
    got = spmv_access(
        np.load(tmp_path / "indptr.npy", mmap_mode="r"),
        np.load(tmp_path / "indices.npy", mmap_mode="r"),
        np.arange(10),
        2,
        block_ids=50,
        progress=lines.append,
    )
    assert np.array_equal(got, _C.access_spmv(indptr, indices, np.arange(10), 2))
    assert len(lines) == 2 and lines[1].startswith("spmv: pass 2/2")


def test_streaming_spmv_refuses_a_malformed_csr():
    indptr, indices = random_csr(0)
    bad = indices.copy()
    bad[5] = 80
    with pytest.raises(ValueError, match="outside"):
        spmv_access(indptr, bad, np.arange(3), 1)
    with pytest.raises(ValueError, match="end at len"):
        spmv_access(indptr, indices[:-1], np.arange(3), 1)
    with pytest.raises(ValueError, match="training node"):
        spmv_access(indptr, indices, np.array([80]), 1)


@pytest.mark.parametrize(("devices", "topology"), [(4, "all"), (5, "pairs"), (3, "none")])
def test_stored_tables_resolve_as_the_dense_tables(tmp_path, devices, topology):
    graph = write_planted(tmp_path / "g")
    settings = PlacementSettings(devices=devices, cache_nodes=30, topology=topology, alpha=0.4)
    report = plan_placement(graph, tmp_path / "p", settings)
    plan = PlacementPlan.open(tmp_path / "p")
    n = GraphDir.open(graph).num_nodes
    caches = np.asarray(plan.caches())
    groups = peer_groups(devices, topology)
    dev_num, buf_pos = lookup_tables(caches, n, groups)
    # Nothing in the plan is [devices, N]: one id and one row per cached node.
    sizes = {name: entry["shape"] for name, entry in plan.plan.info["files"].items()}
    assert sizes["cached_ids.npy"] == sizes["cached_rows.npy"] == [devices, 30]
    for d in range(devices):
        source, row = plan.resolve(d, np.arange(n))
        assert np.array_equal(source, dev_num[d]) and np.array_equal(row, buf_pos[d])
        assert np.array_equal(plan.readable(d), np.flatnonzero(dev_num[d] >= 0))
        peer = (dev_num[d] >= 0) & (dev_num[d] != d)
        assert np.array_equal(plan.peer_ids(d), np.flatnonzero(peer))
    # The predicted costs are the v1 formula over the dense table.
    access = np.asarray(plan.access()) / report.metrics["num_train_nodes"]
    want = [
        access[dev_num[d] < 0].sum() + 0.4 * access[(dev_num[d] >= 0) & (dev_num[d] != d)].sum()
        for d in range(devices)
    ]
    assert report.metrics["predicted_cost"] == want


def test_sorted_tables_invert_the_cache_order():
    ids, rows = sorted_tables(np.array([[9, 2, 5], [0, 7, 3]]))
    assert ids.tolist() == [[2, 5, 9], [0, 3, 7]]
    assert rows.tolist() == [[1, 2, 0], [0, 2, 1]] and rows.dtype == np.int32


def _as_v1(plan_dir):
    manifest = json.loads((plan_dir / MANIFEST_FILE).read_text())
    manifest["format_version"] = 1
    (plan_dir / MANIFEST_FILE).write_text(json.dumps(manifest))


def test_a_v1_placement_is_refused_saying_what_to_run_and_a_v1_replication_opens(tmp_path):
    graph = write_planted(tmp_path / "g")
    plan_placement(graph, tmp_path / "p", PlacementSettings(devices=2, cache_nodes=10))
    _as_v1(tmp_path / "p")
    with pytest.raises(InputError, match=r"v1 placement.*re-run `gnncore plan placement`"):
        PlacementPlan.open(tmp_path / "p")
    # Re-running the planner over it (the pipeline's reuse) rewrites it as v2.
    report = plan_placement(
        graph, tmp_path / "p", PlacementSettings(devices=2, cache_nodes=10), reuse=True
    )
    assert not report.reused and PlacementPlan.open(tmp_path / "p").devices == 2
    partition_graph(graph, tmp_path / "part", method="random", parts=2, balance=False)
    plan_replication(graph, tmp_path / "part", tmp_path / "r", ReplicationSettings(rate=0.05))
    _as_v1(tmp_path / "r")
    assert len(ReplicationPlan.open(tmp_path / "r").replicated()) == 20


def test_a_budget_below_the_estimate_is_refused_naming_both(tmp_path):
    graph = write_planted(tmp_path / "g")
    settings = PlacementSettings(devices=2, cache_nodes=10)
    with pytest.raises(PlanError, match=r"memory_budget of 1\.0 MiB is below the .* MiB"):
        plan_placement(graph, tmp_path / "p", settings, memory_budget=1 << 20)
    assert not (tmp_path / "p").exists()
    lines: list[str] = []
    report = plan_placement(
        graph, tmp_path / "p", settings, memory_budget=1 << 32, progress=lines.append
    )
    assert "of memory needed (budget 4.0 GiB)" in lines[0]
    assert report.metrics["memory_estimate_bytes"] == placement_memory_bytes(400, 2, 10)
    partition_graph(graph, tmp_path / "part", method="random", parts=2, balance=False)
    with pytest.raises(PlanError, match="memory_budget of 1.0 MiB"):
        plan_replication(
            graph, tmp_path / "part", tmp_path / "r", ReplicationSettings(), memory_budget=1 << 20
        )


def test_the_estimate_grows_with_nodes_and_cache_not_with_devices_times_nodes():
    small = placement_memory_bytes(10**6, 4, 10**5)
    big = placement_memory_bytes(5 * 10**7, 4, 5 * 10**6)
    assert big < 3 << 30  # the 50M nodes under 3 GiB
    assert placement_memory_bytes(5 * 10**7, 64, 1000) < big
    assert small < big
    settings = PlacementSettings(devices=4)
    assert cache_slots(settings, 5 * 10**7, 0) == 5 * 10**6


def test_memory_curve_with_one_sort_equals_the_per_rate_sort():
    rng = np.random.default_rng(0)
    degree = rng.integers(0, 50, 2000)
    owner = rng.integers(0, 4, 2000)
    curve = memory_curve(degree, degree, owner, 4)
    total = int(degree.sum())
    for rate, got in zip(CURVE_RATES, curve["memory_increase"], strict=True):
        count = int(round(rate * 2000))
        top = np.sort(np.argsort(-degree, kind="stable")[:count])
        assert got == float(stored_ids(degree, owner, 4, top).sum() - total) / total
