"""Partition post-processing in bounded memory against the in-memory path.

The partition directory that ``gnncore partition`` writes by streaming passes
over the edge file must be, file for file and byte for byte, the one the
in-memory post-processing wrote (``gnncore.testing.postprocess_reference``),
for every method, with and without split balancing, on undirected and directed
graphs; and the streaming path must neither map nor copy the edges.
"""

from __future__ import annotations

import functools
import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from conftest import planted_graph
from gnncore import _C
from gnncore.cli.main import main
from gnncore.partition import (
    PartitionOptions,
    partition_graph,
    partition_metrics,
    postprocess_stream,
    store,
)
from gnncore.partition.base import symmetric_graph
from gnncore.partition.postprocess import balance_splits, npy_layout
from gnncore.partition.postprocess_stream import (
    StreamBuffers,
    halo_parts_per_read,
    write_postprocessed,
)
from gnncore.partition.run import MethodSettings, make_partitioner
from gnncore.partition.simple import random_assignment
from gnncore.partition.store import NpyStream
from gnncore.store import GraphDir, create_graph_dir
from gnncore.store.manifest import sha256_of
from gnncore.testing.partition_reference import write_random_graph
from gnncore.testing.postprocess_reference import (
    balance_splits_reference,
    partition_metrics_reference,
    write_partition_reference,
)

# Manifest entries the post-processing computes; the rest (method, options,
# timings, stage key) is what the caller hands it.
COMPUTED = {
    "format",
    "format_version",
    "graph",
    "graph_manifest_sha256",
    "num_nodes",
    "assignment_bytes",
    "assignment_sha256",
    "files",
    "metrics",
    "halo_sizes",
    "split_balancing",
}


def directed_graph(out: Path, num_nodes: int = 500, seed: int = 3) -> Path:
    """A directed graph with reciprocal pairs and train/val/test splits."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, num_nodes * 6)
    dst = np.where(
        rng.random(len(src)) < 0.7,
        (src + rng.integers(1, 20, len(src))) % num_nodes,
        rng.integers(0, num_nodes, len(src)),
    )
    keep = src != dst
    key = np.unique(src[keep] * num_nodes + dst[keep])
    perm = rng.permutation(num_nodes)
    with create_graph_dir(out, name="directed") as w:
        w.write_topology(num_nodes, key // num_nodes, key % num_nodes, directed=True)
        w.save_splits(perm[:100], perm[100:150], perm[150:300])
    return out


def relational_graph(out: Path, num_nodes: int = 300, seed: int = 7) -> Path:
    """An undirected graph with 3 relations, many pairs under several of them
    (so its own CSR repeats neighbours), with splits."""
    rng = np.random.default_rng(seed)
    u = rng.integers(0, num_nodes, num_nodes * 4)
    v = (u + rng.integers(1, 15, len(u))) % num_nodes
    rel = rng.integers(0, 3, len(u))
    a, b = np.minimum(u, v), np.maximum(u, v)
    key = np.unique((a * num_nodes + b) * 3 + rel)
    pair, rel = key // 3, key % 3
    perm = rng.permutation(num_nodes)
    with create_graph_dir(out, name="relational") as w:
        w.write_topology(
            num_nodes,
            pair // num_nodes,
            pair % num_nodes,
            directed=False,
            rel=rel,
            num_relations=3,
        )
        w.save_splits(perm[:60], perm[60:90], perm[90:150])
    return out


@pytest.fixture(scope="module")
def graphs(tmp_path_factory) -> dict[str, GraphDir]:
    root = tmp_path_factory.mktemp("pps")
    return {
        "planted": GraphDir.open(planted_graph(root / "planted", num_nodes=800, degree=8, seed=2)),
        "random": GraphDir.open(write_random_graph(root / "random", 300, 900, seed=5)),
        "unsplit": GraphDir.open(
            write_random_graph(root / "unsplit", 200, 500, seed=6, labelled=0)
        ),
        "directed": GraphDir.open(directed_graph(root / "directed")),
        "relational": GraphDir.open(relational_graph(root / "relational")),
    }


def dir_files(path: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(path.iterdir())}


def reference_of(streamed: Path, graph: GraphDir, out: Path, assignment: np.ndarray) -> Path:
    """The in-memory path's directory for the same method output, with the
    measurements (seconds, peak RSS) the streamed run recorded."""
    manifest = json.loads((streamed / "manifest.json").read_text())
    info = {k: v for k, v in manifest.items() if k not in COMPUTED}
    balancing = manifest["split_balancing"]
    write_partition_reference(
        out,
        graph,
        assignment,
        manifest["parts"],
        info,
        balance=balancing is not None,
        tolerance=balancing["tolerance"] if balancing else 0.10,
        imbalance=manifest["imbalance"],
        balancing_seconds=balancing["seconds"] if balancing else 0.0,
    )
    return out


def assert_same_dirs(got: Path, want: Path) -> None:
    a, b = dir_files(got), dir_files(want)
    assert sorted(a) == sorted(b)
    for name in b:
        assert a[name] == b[name], name


# The whole partition directory -------------------------------------------------------


@pytest.mark.parametrize(
    ("graph_name", "method", "parts"),
    [
        ("planted", "grem", 4),
        ("planted", "metis", 8),
        ("planted", "random", 8),
        ("random", "grem", 3),
        ("random", "ldg", 5),
        ("unsplit", "fennel", 4),
        ("directed", "random", 6),
        ("directed", "grem", 2),
        ("planted", "bytegnn", 4),
        ("random", "hydra", 3),
        ("random", "range", 1),
        ("relational", "random", 4),
    ],
)
def test_partition_dir_is_the_in_memory_one(graphs, tmp_path, graph_name, method, parts):
    graph = graphs[graph_name]
    settings = MethodSettings(chunk=0.05)
    partition_graph(
        graph.path, tmp_path / "stream", method=method, parts=parts, seed=1, settings=settings
    )
    assignment = make_partitioner(method, settings).assign(graph, PartitionOptions(parts, seed=1))
    want = reference_of(tmp_path / "stream", graph, tmp_path / "ref", assignment)
    assert_same_dirs(tmp_path / "stream", want)


def test_random_assignments_need_balancing_moves(graphs, tmp_path):
    """The comparison above covers rows read from the CSR file: a random
    assignment of the planted graph leaves split counts out of band."""
    graph = graphs["planted"]
    report = partition_graph(graph.path, tmp_path / "p", method="random", parts=8, seed=1)
    assert report.balancing is not None and report.balancing["moved"] > 0


@pytest.mark.parametrize("graph_name", ["planted", "directed", "unsplit"])
def test_small_reads_and_one_part_per_read_change_nothing(
    graphs, tmp_path, monkeypatch, graph_name
):
    graph = graphs[graph_name]
    monkeypatch.setattr(postprocess_stream, "BITS_BLOCK_WORDS", 2)  # halo ids 128 at a time
    parts = 7
    assignment = random_assignment(graph.num_nodes, parts, 4)
    info = {
        "method": "random",
        "parts": parts,
        "imbalance": 0.03,
        "seconds": 1.5,
        "split_balancing": None,
    }
    written = write_postprocessed(
        tmp_path / "s", graph, assignment, parts, info, chunk_rows=7, halo_budget=1
    )
    assert written.edge_reads == parts
    write_partition_reference(tmp_path / "r", graph, assignment, parts, info, balance=False)
    assert_same_dirs(tmp_path / "s", tmp_path / "r")
    assert (
        written.halo_sizes == json.loads((tmp_path / "r/manifest.json").read_text())["halo_sizes"]
    )


def test_halo_parts_per_read():
    per_part = 16 * 8  # 1000 nodes: 16 words of 8 bytes
    assert halo_parts_per_read(1000, 8, per_part * 8) == 8
    assert halo_parts_per_read(1000, 8, per_part * 100) == 8
    assert halo_parts_per_read(1000, 8, per_part * 3 + 5) == 3
    assert halo_parts_per_read(1000, 8, 1) == 1
    assert halo_parts_per_read(0, 4, 8) == 1


# Balancing and metrics ----------------------------------------------------------------


@pytest.mark.parametrize("graph_name", ["planted", "random", "directed", "relational"])
@pytest.mark.parametrize("parts", [2, 5])
def test_balance_splits_streamed_is_the_in_memory_one(graphs, tmp_path, graph_name, parts):
    graph = graphs[graph_name]
    assignment = random_assignment(graph.num_nodes, parts, parts)
    got = balance_splits(graph, assignment, parts, tmp_dir=tmp_path, chunk_rows=13)
    want = balance_splits_reference(graph, assignment, parts)
    assert np.array_equal(got.assignment, want.assignment)
    for field in (
        "moved",
        "cut_before",
        "cut_after",
        "split_moves",
        "evictions",
        "satisfied",
        "bounds",
        "counts_before",
        "counts_after",
    ):
        assert getattr(got, field) == getattr(want, field), field
    assert (got.rows_read > 0) == (got.moved > 0)
    assert not list(tmp_path.iterdir())  # the directed graph's symmetric CSR is gone
    # balanced already: nothing moves and no row is read
    again = balance_splits(graph, got.assignment, parts, tmp_dir=tmp_path)
    if got.satisfied:
        assert again.moved == 0 and again.rows_read == 0


@pytest.mark.parametrize("graph_name", ["planted", "directed", "unsplit"])
def test_metrics_streamed_are_the_in_memory_ones(graphs, graph_name):
    graph = graphs[graph_name]
    for parts, seed in ((1, 0), (3, 1), (8, 2)):
        assignment = random_assignment(graph.num_nodes, parts, seed)
        assert partition_metrics(graph, assignment, parts, chunk_rows=5) == (
            partition_metrics_reference(graph, assignment, parts)
        )


# Bounded memory --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dense_graph(tmp_path_factory) -> GraphDir:
    """Many edges per node (E = 60 N), so a copy of the edges dwarfs O(|V|)."""
    return GraphDir.open(
        write_random_graph(
            tmp_path_factory.mktemp("pps") / "dense", 2000, 130_000, seed=9, labelled=0.5
        )
    )


def test_postprocessing_neither_maps_nor_copies_the_edges(dense_graph, tmp_path, monkeypatch):
    graph = dense_graph
    edges = graph.manifest.num_undirected_edges
    assert edges > 50 * graph.num_nodes
    mapped: list[str] = []
    original = GraphDir.array

    def recording(self: GraphDir, name: str) -> np.ndarray:
        mapped.append(name)
        return original(self, name)

    monkeypatch.setattr(GraphDir, "array", recording)
    parts = 8
    assignment = random_assignment(graph.num_nodes, parts, 3)
    # the manifest's checksums read files in blocks of 4 MiB: small ones here
    monkeypatch.setattr(store, "sha256_of", functools.partial(sha256_of, block=1 << 12))
    tracemalloc.start()
    try:
        balanced = balance_splits(graph, assignment, parts, chunk_rows=4096)
        info = {"method": "random", "parts": parts, "split_balancing": None}
        write_postprocessed(
            tmp_path / "p", graph, balanced.assignment, parts, info, chunk_rows=4096
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert balanced.moved > 0 and balanced.rows_read > 0
    assert not {"edges_shuffled", "indices", "indptr", "eid"} & set(mapped), mapped
    # a few int64[N] (16 KB each), where one int32 copy of the edges is 1 MB
    assert peak < 16 * graph.num_nodes * 8, peak
    assert peak < edges * 8 / 4


# The kernels -------------------------------------------------------------------------------


def halo_bits_reference(u, v, assignment, parts, first, count):
    n = len(assignment)
    words = (n + 63) // 64
    bits = np.zeros((count, words), dtype=np.uint64)
    for a, b in zip(u.tolist(), v.tolist(), strict=True):
        pa, pb = int(assignment[a]), int(assignment[b])
        if pa == pb:
            continue
        for node, part in ((a, pb), (b, pa)):
            if first <= part < first + count:
                bits[part - first, node // 64] |= np.uint64(1) << np.uint64(node % 64)
    return bits


@pytest.mark.parametrize("int64", [False, True])
def test_edge_pass_against_a_python_reference(tmp_path, int64):
    rng = np.random.default_rng(int64)
    n, parts = 150, 5
    u = rng.integers(0, n, 400)
    v = rng.integers(0, n, 400)
    keep = u != v
    u, v = u[keep], v[keep]
    path = tmp_path / "edges.bin"
    np.stack([u, v], axis=1).astype(np.int64 if int64 else np.int32).tofile(path)
    spec = _C.EdgeFileSpec(str(path), offset=0, int64=int64, rows=len(u))
    a = rng.integers(0, parts, n).astype(np.int64)
    for first, count, chunk in ((0, 0, 1000), (0, 5, 3), (1, 3, 64), (4, 1, 1)):
        got = _C.edge_pass(spec, a, parts, halo_first=first, halo_count=count, chunk_rows=chunk)
        assert got.rows == len(u) and got.words == (n + 63) // 64
        assert got.cut == int(np.count_nonzero(a[u] != a[v]))
        want = halo_bits_reference(u, v, a, parts, first, count)
        assert np.array_equal(np.asarray(got.halo_bits).reshape(count, got.words), want)


def test_edge_pass_names_what_is_wrong(tmp_path):
    path = tmp_path / "edges.bin"
    np.array([[0, 1], [1, 2], [2, 9]], dtype=np.int32).tofile(path)
    spec = _C.EdgeFileSpec(str(path), offset=0, int64=False, rows=3)
    a = np.zeros(3, dtype=np.int64)
    with pytest.raises(IndexError, match="edge row 2 holds \\(2, 9\\)"):
        _C.edge_pass(spec, a, 1)
    with pytest.raises(ValueError, match="assigned to part 4"):
        _C.edge_pass(spec, np.array([0, 4, 0], dtype=np.int64), 2)
    with pytest.raises(ValueError, match="halo parts"):
        _C.edge_pass(spec, a, 2, halo_first=1, halo_count=2)
    with pytest.raises(RuntimeError, match="fewer than"):
        _C.edge_pass(_C.EdgeFileSpec(str(path), offset=0, int64=True, rows=3), a, 1)


def test_balance_splits_file_reads_int64_indices(tmp_path, graphs):
    """The int64 row reader (graphs past 2^31 nodes) against the in-memory kernel."""
    graph = graphs["planted"]
    sym = symmetric_graph(graph)
    indices = tmp_path / "indices.npy"
    np.save(indices, np.asarray(sym.indices, dtype=np.int64))
    codes = np.full(graph.num_nodes, -1, dtype=np.int8)
    codes[graph.split("train")] = 0
    codes[graph.split("test")] = 2
    a = random_assignment(graph.num_nodes, 4, 0)
    options = _C.SplitBalanceOptions(parts=4, lo=(35, 0, 110), hi=(45, 0, 130), capacity=210)
    want = _C.balance_splits(np.asarray(sym.indptr), np.asarray(sym.indices), a, codes, options)
    got = _C.balance_splits_file(
        np.asarray(sym.indptr), str(indices), npy_layout(indices).offset, True, a, codes, options
    )
    assert np.array_equal(got.assignment, want.assignment)
    assert (got.split_moves, got.evictions, got.satisfied) == (
        want.split_moves,
        want.evictions,
        want.satisfied,
    )
    assert got.rows_read > 0 and want.rows_read == 0
    short = tmp_path / "short.npy"
    np.save(short, np.asarray(sym.indices, dtype=np.int64)[:-1])
    with pytest.raises(RuntimeError, match="fewer than"):
        _C.balance_splits_file(
            np.asarray(sym.indptr), str(short), npy_layout(short).offset, True, a, codes, options
        )


@pytest.mark.parametrize("length", [0, 1, 1000])
def test_npy_stream_is_np_save(tmp_path, length):
    data = np.arange(length, dtype=np.int64) * 3
    np.save(tmp_path / "want.npy", data)
    with NpyStream(tmp_path / "got.npy", np.int64, length) as stream:
        for start in range(0, length, 300):
            stream.append(data[start : start + 300])
    assert (tmp_path / "got.npy").read_bytes() == (tmp_path / "want.npy").read_bytes()
    with pytest.raises(ValueError, match="announced"):
        with NpyStream(tmp_path / "bad.npy", np.int64, length + 1) as stream:
            stream.append(data)


# The command -----------------------------------------------------------------------------


def test_cli_memory_budget_changes_no_output(graphs, tmp_path, capsys):
    graph = graphs["planted"]
    summaries = {}
    for budget in ("1MiB", "128MiB"):
        out_json = tmp_path / f"{budget}.json"
        args = ["partition", str(graph.path), str(tmp_path / budget), "--method", "grem"]
        args += ["--parts", "6", "--chunk", "0.05", "--memory-budget", budget]
        assert main([*args, "--json", str(out_json), "--no-progress"]) == 0
        summaries[budget] = json.loads(out_json.read_text())
    small, default = (dir_files(tmp_path / b) for b in ("1MiB", "128MiB"))
    assert sorted(small) == sorted(default)
    for name in small:
        if name != "manifest.json":  # it records the seconds taken
            assert small[name] == default[name], name
    for s in summaries.values():
        assert s["command_peak_rss_bytes"] >= s["peak_rss_bytes"] > 0
        assert s["postprocess_seconds"] > 0
    assert (
        main(
            [
                "partition",
                str(graph.path),
                str(tmp_path / "x"),
                "--parts",
                "2",
                "--memory-budget",
                "64K",
            ]
        )
        == 1
    )
    assert "at least 1 MiB" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_stream_buffers_of_a_budget():
    buffers = StreamBuffers.of(128 << 20)
    assert buffers.chunk_rows == 1 << 20
    assert (buffers.halo_budget, buffers.sort_budget) == (64 << 20, 32 << 20)
    assert StreamBuffers.of(1 << 20).chunk_rows == 8192
    with pytest.raises(ValueError, match="at least 1 MiB"):
        StreamBuffers.of(1 << 19)


def test_auto_budget_of_the_post_processing_stays_between_its_bounds(monkeypatch):
    from gnncore.partition import run

    monkeypatch.setattr(run, "default_memory_budget", lambda fraction: int(64e9 * fraction))
    assert run.postprocess_budget("auto") == 1 << 30  # a quarter of 64 GB, capped
    monkeypatch.setattr(run, "default_memory_budget", lambda fraction: int(200e6 * fraction))
    assert run.postprocess_budget("auto") == 128 << 20  # 50 MB, raised to the floor
    assert run.postprocess_budget(None) == 128 << 20
    assert run.postprocess_budget("256MiB") == 256 << 20
    assert run.postprocess_budget(3 << 20) == 3 << 20
