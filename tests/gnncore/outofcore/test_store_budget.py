"""The store writer within a memory budget: bounded buffers write the same bytes
as the writer always did; budgets and disks too small are refused up front."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from conftest import planted_graph
from gnncore.cli.main import main
from gnncore.errors import InputError
from gnncore.outofcore.store import build_partitioned_store, relabel_by_partition
from gnncore.outofcore.store_budget import MAX_BUFFER_BYTES, StoreBuffers, store_buffers
from gnncore.partition import partition_graph
from gnncore.store import GraphDir
from gnncore.usage import current_rss_bytes


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("store-budget")
    graph = GraphDir.open(planted_graph(root / "g", num_nodes=600, degree=12, features=24))
    partition_graph(graph.path, root / "part", method="random", parts=5, seed=1)
    return root, graph


def reference_store(graph: GraphDir, part_dir, out, static_fraction: float) -> None:
    """The store's arrays the plain way: everything in memory, as the writer
    computed them before it streamed (``np.save`` of each array)."""
    out.mkdir()
    n, assignment = graph.num_nodes, np.load(part_dir / "assignment.npy")
    parts = int(assignment.max()) + 1
    order, offsets = relabel_by_partition(assignment, parts)
    node_map = np.empty(n, dtype=np.int64)
    node_map[order] = np.arange(n)
    x, indptr, indices = np.asarray(graph.features()), graph.indptr, np.asarray(graph.indices)
    arrays = {"node_order": order, "node_map": node_map, "partition_offsets": offsets}
    arrays["features"] = x[order].astype(np.float32)
    arrays["labels"] = np.asarray(graph.labels())[order]
    for split in ("train", "val", "test"):
        arrays[f"{split}_idx"] = np.sort(node_map[graph.split(split)])
    src = node_map[indices]
    dst = node_map[np.repeat(np.arange(n), np.diff(indptr))]
    part_of = np.repeat(np.arange(parts), np.diff(offsets))
    bucket = part_of[dst] * parts + part_of[src]
    by = np.lexsort((src, dst, bucket))
    arrays["edges"] = np.stack([src[by], dst[by]], axis=1)
    arrays["bucket_offsets"] = np.concatenate(
        ([0], np.cumsum(np.bincount(bucket, minlength=parts * parts)))
    )
    degree = np.diff(indptr).astype(np.int64)
    count = int(round(static_fraction * n))
    static = np.sort(node_map[np.lexsort((np.arange(n), -degree))[:count]])
    old = order[static]
    arrays["static_nodes"] = static
    arrays["static_indptr"] = np.concatenate(([0], np.cumsum(degree[old])))
    arrays["static_indices"] = np.concatenate(
        [node_map[indices[indptr[v] : indptr[v + 1]]] for v in old]
    ).astype(np.int64)
    arrays["static_features"] = x[old].astype(np.float32)
    for name, array in arrays.items():
        np.save(out / f"{name}.npy", array)


def same_files(a, b) -> None:
    names = sorted(p.name for p in a.glob("*.npy"))
    assert names == sorted(p.name for p in b.glob("*.npy"))
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.mark.parametrize("fraction", [0.05, 0.5])  # static rows read alone / in one pass
def test_tiny_buffers_write_the_bytes_of_the_in_memory_writer(inputs, fraction):
    root, graph = inputs
    base = root / f"s{fraction}"
    base.mkdir()
    reference_store(graph, root / "part", base / "reference", fraction)
    default = build_partitioned_store(graph.path, root / "part", base / "default", fraction)
    # Blocks of 7 rows, pieces of 5 entries (rows of ~12 entries cut in three),
    # a sync every 4000 bytes: hundreds of blocks, pieces and syncs.
    tiny = StoreBuffers(feature_rows=7, edge_rows=5, sync_bytes=4000)
    bounded = build_partitioned_store(
        graph.path, root / "part", base / "bounded", fraction, buffers=tiny
    )
    assert bounded.buffers == tiny and default.buffers != tiny
    same_files(base / "default", base / "reference")
    same_files(base / "bounded", base / "reference")
    assert bounded.store.info["files"] == default.store.info["files"]
    bounded.store.verify()


def test_a_budget_sizes_the_buffers_and_the_report_holds_the_figures(inputs):
    root, graph = inputs
    budget = current_rss_bytes() + (64 << 20)
    report = build_partitioned_store(
        graph.path, root / "part", root / "budget", 0.05, memory_budget=budget
    )
    summary = report.to_dict()
    assert summary["memory_budget_bytes"] == budget and not summary["reused"]
    assert 0 < summary["peak_rss_bytes"] and summary["fixed_bytes"] < budget
    assert summary["disk_estimate_bytes"] >= summary["output_bytes"] > 0
    assert report.buffers is not None
    assert report.buffers.edge_rows < store_buffers(None, 0, 96).edge_rows
    again = build_partitioned_store(
        graph.path, root / "part", root / "budget", 0.05, reuse=True, memory_budget=budget
    )
    assert again.reused and again.buffers is None and again.store.info == report.store.info


def test_buffers_shrink_with_the_budget_and_stop_at_the_largest():
    small, large = store_buffers(100 << 20, 60 << 20, 1024), store_buffers(8 << 30, 0, 1024)
    assert small.feature_rows < large.feature_rows and small.edge_rows < large.edge_rows
    assert large == store_buffers(None, 0, 1024)  # past MAX_BUFFER_BYTES nothing grows
    assert large.edge_rows * 128 + large.sync_bytes <= MAX_BUFFER_BYTES


def test_a_budget_below_the_minimum_is_refused_before_writing(inputs, tmp_path):
    root, graph = inputs
    with pytest.raises(InputError, match=r"memory budget 1\.0 MiB is below the .* needs"):
        build_partitioned_store(graph.path, root / "part", tmp_path / "s", memory_budget="1MiB")
    with pytest.raises(InputError, match="memory budget"):
        build_partitioned_store(graph.path, root / "part", tmp_path / "s", memory_budget="lots")
    assert not (tmp_path / "s").exists()


def test_a_disk_without_room_is_refused_before_writing(inputs, tmp_path, monkeypatch):
    root, graph = inputs
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=4096))
    with pytest.raises(InputError, match=r"needs about .* of disk, and its file system has"):
        build_partitioned_store(graph.path, root / "part", tmp_path / "s")
    assert not (tmp_path / "s").exists() and list(tmp_path.iterdir()) == []


def test_cli_reports_the_budget_and_refuses_a_small_one(inputs, tmp_path, capsys):
    root, graph = inputs
    out, summary = tmp_path / "cli", tmp_path / "s.json"
    args = ["store", str(graph.path), str(root / "part"), str(out)]
    assert main([*args, "--memory-budget", "2GiB", "--json", str(summary)]) == 0
    figures = json.loads(summary.read_text())
    assert figures["memory_budget_bytes"] == 2 << 30 and figures["peak_rss_bytes"] > 0
    assert figures["buffers"]["feature_rows"] > 0 and figures["num_nodes"] == 600
    assert main([*args, "--memory-budget", "4MiB"]) != 0
    assert "memory budget 4.0 MiB is below" in capsys.readouterr().err


def test_row_readers_match_numpy_indexing_whatever_the_block(tmp_path):
    from gnncore.outofcore.store_io import NpyWriter, gather_rows, scatter_rows
    from gnncore.store.npy import inspect_npy

    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 5)).astype(np.float64)  # cast to float32 on the way
    np.save(tmp_path / "x.npy", x)
    src = inspect_npy(tmp_path / "x.npy")
    picked = rng.choice(300, size=40, replace=False)
    perm = rng.permutation(300)
    for block in (1, 7, 1000):
        out = NpyWriter(tmp_path / "g.npy", np.float32, (40, 5), sync_bytes=100)
        gather_rows(src, picked, out, block)
        out.close()
        position = np.full(300, -1)
        position[perm[:40]] = np.arange(40)  # row perm[k] goes to k; the others skipped
        out = NpyWriter(tmp_path / "s.npy", np.float32, (40, 5), sync_bytes=100)
        scatter_rows(src, position, out, block)
        out.close()
        assert (tmp_path / "g.npy").read_bytes() == _saved(tmp_path, x[picked].astype(np.float32))
        assert (tmp_path / "s.npy").read_bytes() == _saved(
            tmp_path, x[perm[:40]].astype(np.float32)
        )


def _saved(tmp_path, array: np.ndarray) -> bytes:
    np.save(tmp_path / "expected.npy", array)
    return (tmp_path / "expected.npy").read_bytes()


def test_an_output_left_short_is_never_closed_as_complete(tmp_path):
    from gnncore.outofcore.store_io import NpyWriter

    out = NpyWriter(tmp_path / "e.npy", np.int64, (10, 2), sync_bytes=1 << 20)
    out.append(np.zeros((9, 2), dtype=np.int64))
    with pytest.raises(RuntimeError, match="wrote 144 of 160 data bytes"):
        out.close()
