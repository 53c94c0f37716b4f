"""GREM with sibling bisections in worker processes: same labels, memory counted."""

from __future__ import annotations

import dataclasses
import os
import pickle
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import planted_graph
from gnncore import _C
from gnncore.partition import PartitionOptions, partition_graph
from gnncore.partition.edge_stream import EdgeFile
from gnncore.partition.grem import (
    BisectionRecord,
    GreedyPartitioner,
    GremPartitioner,
    grem_partition_file,
    helper_peak_rss,
    recursion,
    widest_level,
)
from gnncore.partition.grem.plan import ClusterPlan
from gnncore.partition.grem.recursion import AUTO_WORKERS_MIN_EDGES, resolve_workers
from gnncore.partition.run import MethodSettings
from gnncore.store import GraphDir


@pytest.fixture(scope="module")
def graph(tmp_path_factory) -> GraphDir:
    return GraphDir.open(
        planted_graph(
            tmp_path_factory.mktemp("grem-workers") / "g", num_nodes=3000, communities=8, degree=10
        )
    )


def comparable(record: BisectionRecord) -> dict:
    """A record without what depends on the process and the clock."""
    fields = dataclasses.asdict(record)
    for key in ("seconds", "phase_seconds", "pid", "process_peak_rss_bytes"):
        fields.pop(key)
    return fields


@pytest.mark.parametrize(
    "parts, passes, seed_method", [(8, 0, "metis"), (5, 3, "clusters"), (6, 1, "ldg")]
)
def test_workers_give_the_same_partition_as_one_process(
    graph, parts, passes, seed_method, tmp_path
):
    options = PartitionOptions(parts=parts, seed=2)
    runs = {}
    for workers in (1, 2, 3):
        partitioner = GremPartitioner(
            chunk=0.05, passes=passes, seed_method=seed_method, workers=workers, tmp_dir=tmp_path
        )
        runs[workers] = (
            partitioner.assign(graph, options),
            partitioner.last_stats,
            partitioner.helper_peak_rss_bytes,
        )
        assert list(tmp_path.iterdir()) == []  # the side files are gone
    labels, records, helpers = runs[1]
    assert helpers == 0 and {r.pid for r in records} == {os.getpid()}
    for workers in (2, 3):
        other_labels, other_records, other_helpers = runs[workers]
        np.testing.assert_array_equal(other_labels, labels)
        # the same bisections, reported in the same (depth-first) order
        assert [comparable(r) for r in other_records] == [comparable(r) for r in records]
        assert records[0].pid == os.getpid()  # the root runs here
        worker_pids = {r.pid for r in other_records} - {os.getpid()}
        assert 1 <= len(worker_pids) <= workers
        assert other_helpers == helper_peak_rss(other_records) > 0


def test_helper_peak_sums_each_workers_largest_peak():
    base = dict(
        first_part=0,
        parts=2,
        nodes=1,
        edges=1,
        chunks=1,
        first_chunk_nodes=1,
        isolated=0,
        reassigned=0,
        moves=[],
        sizes=(1, 0),
        capacities=(1, 1),
        seconds=0.0,
    )
    records = [
        BisectionRecord(**base, pid=os.getpid(), process_peak_rss_bytes=500),
        BisectionRecord(**base, pid=-1, process_peak_rss_bytes=100),
        BisectionRecord(**base, pid=-1, process_peak_rss_bytes=300),
        BisectionRecord(**base, pid=-2, process_peak_rss_bytes=50),
    ]
    assert helper_peak_rss(records) == 300 + 50


@pytest.mark.parametrize(
    "parts, widest",
    [(1, 1), (2, 1), (3, 1), (4, 2), (5, 2), (6, 2), (7, 3), (8, 4), (12, 4), (16, 8)],
)
def test_workers_are_capped_by_the_widest_level(parts, widest):
    assert widest_level(parts) == widest


def test_two_parts_need_no_worker(graph):
    partitioner = GremPartitioner(chunk=0.1, workers=4)
    partitioner.assign(graph, PartitionOptions(parts=2))
    assert partitioner.helper_peak_rss_bytes == 0
    assert [r.pid for r in partitioner.last_stats] == [os.getpid()]


def test_a_bad_row_fails_a_run_with_workers_and_leaves_no_files(tmp_path):
    rng = np.random.default_rng(0)
    pairs = rng.integers(0, 50, size=(400, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    pairs[-1] = (3, 70)  # beyond num_nodes
    path = tmp_path / "edges.npy"
    np.save(path, pairs.astype(np.int64))
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(IndexError, match=r"row \d+ \(3, 70\) .* outside \[0, 60\)"):
        grem_partition_file(
            EdgeFile.from_npy(path), 60, 4, chunk_edges=40, passes=0, workers=2, tmp_dir=work
        )
    assert list(work.iterdir()) == []


def test_reports_add_the_workers_peak_and_record_the_setting(graph, tmp_path):
    report = partition_graph(
        graph.path,
        tmp_path / "p",
        method="grem",
        parts=4,
        settings=MethodSettings(chunk=0.05, workers=2),
        balance=False,
    )
    serial = partition_graph(
        graph.path,
        tmp_path / "s",
        method="grem",
        parts=4,
        settings=MethodSettings(chunk=0.05),
        balance=False,
    )
    assert report.params["workers"] == 2 and serial.params["workers"] == 0  # auto: 1 here
    assert report.to_dict()["workers"] == 2
    # this process's peak plus at least one worker's own (~40 MiB of interpreter and
    # numpy: a worker imports neither Polars nor PyArrow since issue 28, item 2)
    assert report.peak_rss_bytes > serial.peak_rss_bytes + 25 * 2**20
    assert report.metrics.edge_cut_fraction == serial.metrics.edge_cut_fraction


def test_cli_takes_workers():
    import argparse

    from gnncore.cli.partition import add_arguments, settings_from
    from gnncore.partition.run import make_partitioner

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["g", "o", "--method", "greedy", "--parts", "4", "--workers", "3"])
    partitioner = make_partitioner("greedy", settings_from(args))
    assert partitioner.workers == 3 and "workers=3" in repr(partitioner)
    assert repr(GreedyPartitioner(workers=2)).endswith("workers=2)")
    assert "workers" not in repr(GreedyPartitioner())
    with pytest.raises(ValueError, match=r"workers must be an integer >= 0 \(0: auto\)"):
        GremPartitioner(workers=-1)
    parsed = parser.parse_args(["g", "o", "--method", "grem", "--parts", "4"])
    assert make_partitioner("grem", settings_from(parsed)).workers == 0


def test_auto_workers_take_one_per_cpu_from_the_threshold_up(monkeypatch):
    monkeypatch.setattr(recursion, "usable_cpus", lambda: 2)
    monkeypatch.setattr(recursion, "memory_room", lambda: None)
    below, at = AUTO_WORKERS_MIN_EDGES - 1, AUTO_WORKERS_MIN_EDGES
    assert resolve_workers(0, below, 16) == 1
    assert resolve_workers(0, at, 16) == 2
    assert resolve_workers(0, at, 2) == 1  # one bisection: nothing to run beside it
    assert resolve_workers(0, at, 4) == 2
    assert resolve_workers(3, below, 16) == 3  # a given count is kept (up to the widest level)
    assert resolve_workers(3, below, 4) == 2
    monkeypatch.setattr(recursion, "usable_cpus", lambda: 1)
    assert resolve_workers(0, at, 16) == 1
    with pytest.raises(ValueError, match="workers must be an integer >= 0"):
        resolve_workers(True, at, 16)


def test_auto_workers_fit_three_quarters_of_the_memory_room(monkeypatch):
    # 100M nodes, 10M-row chunks: about 2 GB a worker, 0.9 GB for this process
    # while they run. An 8 GiB cgroup holds two; 4 GiB none (one process);
    # a given count is not second-guessed.
    monkeypatch.setattr(recursion, "usable_cpus", lambda: 4)
    nodes, chunk, rows = 100_000_000, 10_000_000, 1_000_000_000
    each = recursion.worker_bytes(nodes, chunk)
    assert 1.8 * 2**30 < each < 2.1 * 2**30
    for room, expected in ((64 << 30, 4), (8 << 30, 2), (6 << 30, 1), (4 << 30, 1)):
        monkeypatch.setattr(recursion, "memory_room", lambda room=room: room)
        assert resolve_workers(0, rows, 16, nodes, chunk) == expected, room
    assert resolve_workers(3, rows, 16, nodes, chunk) == 3
    monkeypatch.setattr(recursion, "memory_room", lambda: None)  # unknown: the CPUs decide
    assert resolve_workers(0, rows, 16, nodes, chunk) == 4


def test_memory_room_is_the_cgroup_limit_else_what_is_available(monkeypatch):
    monkeypatch.setattr(recursion, "cgroup_limit", lambda: 8 << 30)
    monkeypatch.setattr(recursion, "mem_available", lambda: 20 << 30)
    assert recursion.memory_room() == 8 << 30
    monkeypatch.setattr(recursion, "cgroup_limit", lambda: None)
    assert recursion.memory_room() == 20 << 30


def test_auto_is_one_process_on_a_small_graph(graph):
    partitioner = GremPartitioner(chunk=0.1)
    partitioner.assign(graph, PartitionOptions(parts=4))
    assert partitioner.last_workers == 1
    assert {r.pid for r in partitioner.last_stats} == {os.getpid()}


def test_workers_run_their_share_of_the_cpus_as_threads(graph, tmp_path, monkeypatch):
    # Two workers on a 4-CPU machine: each is told, as it starts, to run its
    # OpenMP kernels on 2 threads (not one per CPU each, waiting on the other's).
    monkeypatch.setattr(recursion, "usable_cpus", lambda: 4)
    handed: list[tuple[int, object, object]] = []

    def record(roots, run, expand, context, *, workers, worker_setup):
        handed.append((workers, worker_setup, context))

    monkeypatch.setattr(recursion, "run_task_tree", record)
    edges = EdgeFile.from_npy(graph.path / "edges_shuffled.npy")
    grem_partition_file(edges, graph.num_nodes, 8, chunk_edges=500, workers=2, tmp_dir=tmp_path)
    ((workers, setup, context),) = handed
    assert workers == 2 and setup is recursion._setup_worker
    assert context.worker_threads == 2
    before = _C.num_threads()
    try:
        setup(dataclasses.replace(context, worker_threads=1))
        assert _C.num_threads() == 1
    finally:
        _C.set_num_threads(before)


def test_set_num_threads_sets_the_kernels_default():
    before = _C.num_threads()
    try:
        _C.set_num_threads(1)
        assert _C.num_threads() == 1
        with pytest.raises(ValueError, match="threads must be >= 1"):
            _C.set_num_threads(0)
    finally:
        _C.set_num_threads(before)


def test_a_plan_shared_with_workers_pickles_as_its_mapped_file(tmp_path):
    plan = ClusterPlan(
        cluster=np.arange(1000, dtype=np.int32) % 7,
        part=np.arange(7, dtype=np.int64) % 2,
        sizes=np.full(7, 3, dtype=np.int64),
        support=np.array([4, 3], dtype=np.int64),
        cluster_edges=11,
        internal_edges=5,
        seconds={"plan": 0.5},
    )
    in_memory = pickle.dumps(plan)
    assert len(in_memory) > plan.cluster.nbytes  # a copy of the array
    mapped = recursion._mapped_plan(plan, tmp_path)
    sent = pickle.dumps(mapped)
    assert len(sent) < plan.cluster.nbytes // 4  # the path, not the array
    back = pickle.loads(sent)
    assert isinstance(back.cluster, np.memmap)
    assert Path(back.cluster.filename) == tmp_path / "plan-cluster.npy"
    np.testing.assert_array_equal(back.cluster, plan.cluster)
    np.testing.assert_array_equal(back.part, plan.part)
    assert (back.cluster_edges, back.internal_edges, back.seconds) == (11, 5, {"plan": 0.5})
    np.testing.assert_array_equal(pickle.loads(in_memory).cluster, plan.cluster)


@pytest.mark.parametrize("method, workers", [("grem", 1), ("grem", 2), ("greedy", 1), ("metis", 1)])
def test_partitioning_reports_its_progress(graph, tmp_path, method, workers):
    lines: list[str] = []
    partition_graph(
        graph.path,
        tmp_path / "p",
        method=method,
        parts=5,
        settings=MethodSettings(chunk=0.05, workers=workers),
        progress=lines.append,
    )
    assert lines[0].startswith(f"{method}: 3,000 nodes, ") and "into 5 parts" in lines[0]
    bisections = [line for line in lines if ": bisection " in line]
    if method == "metis":
        assert bisections == []
    else:  # one line per bisection, numbered in completion order
        assert [b.split(" of parts")[0] for b in bisections] == [
            f"{method}: bisection {k}/4" for k in range(1, 5)
        ]
        assert bisections[0].startswith(f"{method}: bisection 1/4 of parts 0..4: 3,000 nodes")
        # where each bisection's time went, phase by phase
        phases = r"\(seed [\d.]+, pass [\d.]+, restreams (([\d.]+\+)*[\d.]+|none), split [\d.]+\)"
        assert all(re.search(phases, b) for b in bisections), bisections
        assert any(", worker " in b for b in bisections) == (workers > 1)
    assert lines[-1].startswith(f"wrote {tmp_path / 'p'}: edge cut ")


def test_cli_prints_progress_unless_told_not_to(graph, tmp_path, capsys):
    from gnncore.cli.main import main

    base = [
        "partition",
        str(graph.path),
        str(tmp_path / "p"),
        "--method",
        "grem",
        "--parts",
        "3",
        "--chunk",
        "0.05",
    ]
    assert main(base) == 0
    err = capsys.readouterr().err
    assert "[partition] grem: bisection 2/2 of parts " in err
    assert main(base + ["--no-progress"]) == 0
    assert "[partition]" not in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["-1", "-2", "two"])
def test_cli_rejects_a_bad_worker_count_at_parse_time(graph, tmp_path, capsys, bad):
    from gnncore.cli.main import main

    with pytest.raises(SystemExit) as exited:
        main(["partition", str(graph.path), str(tmp_path / "p"), "--parts", "2", "--workers", bad])
    assert exited.value.code == 2
    assert f"argument --workers: expected an integer >= 0; got '{bad}'" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()
