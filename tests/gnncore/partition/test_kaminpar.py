"""KaMinPar as a partitioning method: the ParHIP file it reads, its labels, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import planted_graph, require_dataset
from gnncore.cli.main import main
from gnncore.partition import PartitionDir, PartitionOptions, partition_graph
from gnncore.partition.kaminpar import KaMinParPartitioner, write_parhip
from gnncore.partition.metrics import balance_violations, partition_metrics
from gnncore.store import GraphDir

kaminpar = pytest.importorskip("kaminpar")


def loaded_adjacency(path) -> list[list[int]]:
    """Every node's neighbours as KaMinPar's own reader loads the file."""
    graph = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP)
    return [sorted(v for v, _ in graph.neighbors(u)) for u in range(graph.n())]


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_parhip_file_loads_as_the_same_adjacency(tmp_path, dtype):
    rng = np.random.default_rng(0)
    n = 50
    pairs = {(min(a, b), max(a, b)) for a, b in rng.integers(0, n, (200, 2)) if a != b}
    rows: list[list[int]] = [[] for _ in range(n)]
    for a, b in pairs:
        rows[a].append(b)
        rows[b].append(a)
    rows = [sorted(r) for r in rows]
    indptr = np.cumsum([0] + [len(r) for r in rows]).astype(np.int64)
    indices = np.array([v for r in rows for v in r], dtype=dtype)
    np.save(tmp_path / "indptr.npy", indptr)
    np.save(tmp_path / "indices.npy", indices)
    # memory-mapped, as GraphDir hands them out, in chunks smaller than the arrays
    mapped = (np.load(tmp_path / f"{name}.npy", mmap_mode="r") for name in ("indptr", "indices"))
    size = write_parhip(*mapped, tmp_path / "g.parhip", chunk=7)
    assert size == (tmp_path / "g.parhip").stat().st_size == 24 + (n + 1) * 8 + len(indices) * 4
    assert loaded_adjacency(tmp_path / "g.parhip") == rows
    write_parhip(indptr, indices, tmp_path / "in_memory.parhip")
    assert (tmp_path / "in_memory.parhip").read_bytes() == (tmp_path / "g.parhip").read_bytes()


def test_parhip_rejects_a_neighbour_outside_the_graph(tmp_path):
    with pytest.raises(ValueError, match=r"neighbour id 3 is outside \[0, 3\)"):
        write_parhip(np.array([0, 1, 2, 2]), np.array([1, 3], np.int32), tmp_path / "g.parhip")
    with pytest.raises(ValueError, match="indptr must run from 0 to len"):
        write_parhip(np.array([0, 1, 3]), np.array([1, 0], np.int32), tmp_path / "g.parhip")


def test_kaminpar_finds_planted_communities_within_the_node_cap(tmp_path):
    graph = GraphDir.open(planted_graph(tmp_path / "g", num_nodes=1000, communities=8))
    for threads in (1, 2):
        options = PartitionOptions(parts=8, seed=3, imbalance=0.03)
        assignment = KaMinParPartitioner(threads=threads).assign(graph, options)
        assert assignment.dtype == np.int64 and assignment.shape == (1000,)
        assert set(np.unique(assignment)) == set(range(8))
        metrics = partition_metrics(graph, assignment, 8)
        assert balance_violations(metrics, 0.03) == []  # every part <= ceil(1.03 N / p)
        # 90% of the edges are inside a community: random parts would cut ~7/8 of them
        assert metrics.edge_cut_fraction < 0.25


def test_one_thread_is_deterministic_for_a_seed(tmp_path):
    # (with 2 threads the labels differ from run to run: not asserted)
    graph = GraphDir.open(planted_graph(tmp_path / "g", num_nodes=2000, communities=16))
    solver = KaMinParPartitioner(threads=1)
    runs = [solver.assign(graph, PartitionOptions(parts=4, seed=s)) for s in (5, 5, 5)]
    assert all(np.array_equal(runs[0], r) for r in runs[1:])
    other_seed = solver.assign(graph, PartitionOptions(parts=4, seed=6))
    assert not np.array_equal(runs[0], other_seed)  # the seed reaches KaMinPar
    assert set(solver.phase_seconds) == {"write", "load", "partition"}


def test_one_part_and_bad_settings(tmp_path):
    graph = GraphDir.open(planted_graph(tmp_path / "g"))
    ones = KaMinParPartitioner().assign(graph, PartitionOptions(parts=1))
    assert not ones.any() and len(ones) == graph.num_nodes
    with pytest.raises(ValueError, match="unknown KaMinPar preset 'fastest'"):
        KaMinParPartitioner(preset="fastest").assign(graph, PartitionOptions(parts=2))
    with pytest.raises(ValueError, match="threads must be >= 0"):
        KaMinParPartitioner(threads=-1)


def test_cli_writes_a_partition_directory(tmp_path):
    graph_dir = planted_graph(tmp_path / "g")
    out, summary = tmp_path / "p", tmp_path / "p.json"
    argv = ["partition", str(graph_dir), str(out), "--method", "kaminpar", "--parts", "4",
            "--threads", "2", "--seed", "1", "--no-progress", "--json", str(summary)]  # fmt: skip
    assert main(argv) == 0
    report = json.loads(summary.read_text())
    assert report["method"] == "kaminpar" and report["threads"] == 2
    part = PartitionDir.open(out, GraphDir.open(graph_dir))  # the directory's own checks
    assert part.method == "kaminpar" and part.info["threads"] == 2
    assignment = np.asarray(part.assignment())
    assert report["edge_cut_fraction"] == pytest.approx(
        partition_metrics(GraphDir.open(graph_dir), assignment, 4).edge_cut_fraction
    )
    assert report["edge_cut_fraction"] < 0.2 and report["max_part_ratio"] <= 1.03


def test_cora_cut_is_close_to_metis(tmp_path):
    from gnncore.io import ingest

    cora = tmp_path / "cora"
    ingest(require_dataset("planetoid", "Cora"), cora, format="planetoid", name="cora")
    cuts = {
        method: partition_graph(
            cora, tmp_path / method, method, parts=8, balance=False
        ).metrics.edge_cut_fraction
        for method in ("kaminpar", "metis", "random")
    }
    assert cuts["kaminpar"] < cuts["metis"] + 0.05
    assert cuts["kaminpar"] < cuts["random"] / 3


def test_bench_runs_kaminpar_beside_grem_with_threads(small_graph, tmp_path):
    out = tmp_path / "bench"
    argv = ["bench", "partition", str(small_graph), "--parts", "4", "--methods",
            "kaminpar,grem", "--threads", "2", "--chunk", "0.2", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    rows = {r["method"]: r for r in json.loads((out / "bench.json").read_text())["rows"]}
    assert rows["kaminpar"]["threads"] == 2 and "threads" not in rows["grem"]
    for row in rows.values():
        # each a process of its own: the command's peak covers the method's
        assert row["command_peak_rss_bytes"] >= row["peak_rss_bytes"] > 20 * 2**20
        # the kernel's figure for the same process agrees within what the
        # interpreter's exit and the VmHWM read leave out
        assert abs(row["process_peak_rss_bytes"] - row["command_peak_rss_bytes"]) < 16 * 2**20
        assert row["edge_cut_fraction"] < 0.3
    table = (out / "bench.md").read_text()
    assert "| kaminpar | 4 | threads=2 |" in table and "process peak RSS MiB" in table
    assert "Command peak RSS MiB (median over shuffles)" in table


def test_chunks_of_a_mapped_array_and_of_a_view_of_it(tmp_path):
    from gnncore.partition.kaminpar import _chunks

    np.save(tmp_path / "a.npy", np.arange(100, dtype=np.int64) * 3)
    mapped = np.load(tmp_path / "a.npy", mmap_mode="r")
    for array in (mapped, mapped[17:], mapped[::2]):
        assert np.array_equal(np.concatenate(list(_chunks(array, 7))), np.asarray(array))
