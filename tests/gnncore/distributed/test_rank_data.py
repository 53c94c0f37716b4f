"""Per-rank data against a slow NumPy reference built from the whole graph."""

from __future__ import annotations

import json
import shutil
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from conftest import planted_graph
from gnncore.distributed.rank_data import RankData, owner_of
from gnncore.distributed.rank_write import write_rank_data
from gnncore.errors import InputError
from gnncore.partition.run import partition_graph
from gnncore.partition.store import PartitionDir
from gnncore.store import GraphDir, create_graph_dir


def directed_graph(out: Path, num_nodes: int = 300, edges: int = 1500, seed: int = 1) -> Path:
    """A random directed graph with features, labels and a train split only."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, num_nodes, (2, edges))
    keep = src != dst
    key = np.unique(src[keep] * num_nodes + dst[keep])
    with create_graph_dir(out, name="directed") as w:
        w.write_topology(num_nodes, key // num_nodes, key % num_nodes, directed=True)
        w.save_array("features", rng.standard_normal((num_nodes, 5)).astype(np.float32))
        w.save_array("labels", rng.integers(0, 3, num_nodes).astype(np.int64))
        w.num_features, w.num_classes = 5, 3
        perm = rng.permutation(num_nodes)
        w.save_splits(perm[:100], np.zeros(0, np.int64), np.zeros(0, np.int64))
    return out


def reference(graph: GraphDir, assignment: np.ndarray, parts: int) -> list[dict]:
    """What each rank should hold, from the canonical edge table (not the CSR)."""
    edges = graph.edges()
    src, dst = edges["src"].to_numpy(), edges["dst"].to_numpy()
    eid = np.arange(len(src))
    if not graph.manifest.directed:  # both directions are in-edges of someone
        src, dst, eid = np.concatenate([src, dst]), np.concatenate([dst, src]), np.tile(eid, 2)
    core_old = [np.flatnonzero(assignment == p) for p in range(parts)]
    new = np.empty(len(assignment), dtype=np.int64)
    new[np.concatenate(core_old)] = np.arange(len(assignment))
    x, labels = np.asarray(graph.features()), np.asarray(graph.labels())
    out = []
    for core in core_old:
        inside = np.zeros(len(assignment), bool)
        inside[core] = True
        into = inside[dst]
        triples = sorted(zip(new[dst[into]], new[src[into]], eid[into]))
        touching = inside[src] | inside[dst]
        ends = np.concatenate([src[touching], dst[touching]])
        halo = np.unique(new[ends[~inside[ends]]])
        masks = {}
        for split in ("train", "val", "test"):
            if graph.has(f"{split}_idx"):
                masks[split] = np.isin(core, graph.split(split))
        out.append(
            dict(core=core, new=new[core], triples=triples, halo=halo, x=x[core], y=labels[core])
            | {"masks": masks}
        )
    return out


def check_against_reference(graph_dir: Path, part_dir: Path, out: Path) -> None:
    graph = GraphDir.open(graph_dir)
    partition = PartitionDir.open(part_dir, graph)
    assignment = np.asarray(partition.assignment())
    expected = reference(graph, assignment, partition.parts)
    for rank, want in enumerate(expected):
        data = RankData.open(out, rank, verify=True)
        lo, hi = data.core_range
        np.testing.assert_array_equal(want["new"], np.arange(lo, hi))  # one contiguous range
        np.testing.assert_array_equal(data.array("original_ids"), want["core"])
        indptr, indices = data.indptr, data.indices
        rows = np.repeat(np.arange(lo, hi), np.diff(indptr))
        got = sorted(zip(rows, indices, data.array("edge_ids")))
        assert got == want["triples"]
        for v in range(hi - lo):  # rows sorted by global id
            assert np.all(np.diff(indices[indptr[v] : indptr[v + 1]]) > 0)
        np.testing.assert_array_equal(data.halo, want["halo"])
        np.testing.assert_array_equal(data.array("features"), want["x"])
        np.testing.assert_array_equal(data.array("labels"), want["y"])
        for split, mask in want["masks"].items():
            np.testing.assert_array_equal(data.array(f"{split}_mask"), mask)
        assert set(want["masks"]) == {s for s in ("train", "val", "test") if data.has(f"{s}_mask")}
        ids = np.arange(graph.num_nodes)
        np.testing.assert_array_equal(
            data.owner(ids), np.repeat(np.arange(partition.parts), np.diff(data.offsets))
        )
        assert np.all(owner_of(want["new"], data.offsets) == rank)


@pytest.mark.parametrize("method,parts", [("random", 3), ("metis", 2)])
def test_rank_data_matches_reference_undirected(tmp_path: Path, method: str, parts: int) -> None:
    graph = planted_graph(tmp_path / "g", num_nodes=300)
    partition_graph(graph, tmp_path / "p", method=method, parts=parts)
    write_rank_data(graph, tmp_path / "p", tmp_path / "r")
    check_against_reference(graph, tmp_path / "p", tmp_path / "r")


def test_rank_data_matches_reference_directed(tmp_path: Path) -> None:
    graph = directed_graph(tmp_path / "g")
    partition_graph(graph, tmp_path / "p", method="random", parts=4, balance=False)
    write_rank_data(graph, tmp_path / "p", tmp_path / "r")
    check_against_reference(graph, tmp_path / "p", tmp_path / "r")
    data = RankData.open(tmp_path / "r", 0)
    assert not data.has("val_mask") or not np.any(data.array("val_mask"))


def test_rank_data_is_idempotent_and_reused(tmp_path: Path) -> None:
    graph = planted_graph(tmp_path / "g", num_nodes=200)
    partition_graph(graph, tmp_path / "p", method="random", parts=2)
    out = write_rank_data(graph, tmp_path / "p", tmp_path / "r")
    manifest = (out / "manifest.json").read_bytes()
    stamp = (out / "rank_0" / "features.npy").stat().st_mtime_ns
    write_rank_data(graph, tmp_path / "p", out)  # reused: nothing rewritten
    assert (out / "rank_0" / "features.npy").stat().st_mtime_ns == stamp
    write_rank_data(graph, tmp_path / "p", out, reuse=False)  # rewritten, same bytes
    assert (out / "manifest.json").read_bytes() == manifest
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries
    partition_graph(graph, tmp_path / "p", method="random", parts=2, seed=5)
    write_rank_data(graph, tmp_path / "p", out)  # another partition: rewritten
    assert (out / "manifest.json").read_bytes() != manifest


def test_open_reads_only_its_own_rank(tmp_path: Path) -> None:
    graph = planted_graph(tmp_path / "g", num_nodes=200)
    partition_graph(graph, tmp_path / "p", method="random", parts=3)
    out = write_rank_data(graph, tmp_path / "p", tmp_path / "r")
    shutil.rmtree(out / "rank_1")
    shutil.rmtree(out / "rank_2")
    data = RankData.open(out, 0, verify=True)
    assert data.num_core == len(data.array("features"))
    with pytest.raises(InputError, match="rank_1/.*: listed in the manifest but missing"):
        RankData.open(out, 1)


def test_writer_streams_features(tmp_path: Path) -> None:
    """Peak Python-side allocation stays well below the whole feature matrix
    (about one partition's rows plus the 4 MiB read buffer of the checksums)."""
    graph = planted_graph(tmp_path / "g", num_nodes=8000, features=512, degree=2)
    partition_graph(graph, tmp_path / "p", method="random", parts=8, balance=False)
    whole = 8000 * 512 * 4
    tracemalloc.start()
    try:
        write_rank_data(graph, tmp_path / "p", tmp_path / "r")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 0.5 * whole, f"peak {peak} bytes vs a {whole}-byte feature matrix"
    check_against_reference(graph, tmp_path / "p", tmp_path / "r")


def one_line_error(excinfo: pytest.ExceptionInfo[InputError], path: Path) -> str:
    message = str(excinfo.value)
    assert "\n" not in message and str(path) in message
    return message


def test_refuses_a_partition_of_another_graph(tmp_path: Path) -> None:
    graph = planted_graph(tmp_path / "g", num_nodes=200)
    other = planted_graph(tmp_path / "o", num_nodes=200, seed=3)
    partition_graph(other, tmp_path / "p", method="random", parts=2)
    with pytest.raises(InputError) as excinfo:
        write_rank_data(graph, tmp_path / "p", tmp_path / "r")
    assert "different version" in one_line_error(excinfo, tmp_path / "p" / "manifest.json")
    assert not (tmp_path / "r").exists()


def test_refuses_a_partition_without_maps(tmp_path: Path) -> None:
    from gnncore.partition.store import write_partition_dir

    graph = planted_graph(tmp_path / "g", num_nodes=200)
    g = GraphDir.open(graph)
    write_partition_dir(tmp_path / "p", g, np.arange(200) % 2, {"parts": 2, "method": "x"})
    with pytest.raises(InputError) as excinfo:
        write_rank_data(graph, tmp_path / "p", tmp_path / "r")
    assert "relabelling maps" in one_line_error(excinfo, tmp_path / "p" / "manifest.json")


def test_refuses_tampered_manifest_and_truncated_file(tmp_path: Path) -> None:
    graph = planted_graph(tmp_path / "g", num_nodes=200)
    partition_graph(graph, tmp_path / "p", method="random", parts=2)
    out = write_rank_data(graph, tmp_path / "p", tmp_path / "r")
    manifest = out / "manifest.json"
    original = manifest.read_text()
    info = json.loads(original)
    info["offsets"][1] += 1  # claim one more node for rank 0
    manifest.write_text(json.dumps(info))
    with pytest.raises(InputError) as excinfo:
        RankData.open(out, 0)
    assert "body_sha256" in one_line_error(excinfo, manifest)
    manifest.write_text(original)
    features = out / "rank_1" / "features.npy"
    features.write_bytes(features.read_bytes()[:-4])
    RankData.open(out, 0)  # rank 0 is untouched
    with pytest.raises(InputError) as excinfo:
        RankData.open(out, 1)
    assert "truncated" in one_line_error(excinfo, features)
    # A same-size corruption passes the cheap checks and fails verify.
    labels = out / "rank_0" / "labels.npy"
    raw = bytearray(labels.read_bytes())
    raw[-1] ^= 1
    labels.write_bytes(bytes(raw))
    with pytest.raises(InputError) as excinfo:
        RankData.open(out, 0, verify=True)
    assert "sha256" in one_line_error(excinfo, labels)
    # The writer does not mistake the damaged directory for a reusable one.
    write_rank_data(graph, tmp_path / "p", out)
    RankData.open(out, 0, verify=True)
    RankData.open(out, 1, verify=True)


def test_refuses_to_replace_other_data(tmp_path: Path) -> None:
    graph = planted_graph(tmp_path / "g", num_nodes=200)
    partition_graph(graph, tmp_path / "p", method="random", parts=2)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("keep me")
    with pytest.raises(InputError, match="refusing to replace"):
        write_rank_data(graph, tmp_path / "p", tmp_path / "busy")
    with pytest.raises(InputError, match="is \\(or holds\\) the input"):
        write_rank_data(graph, tmp_path / "p", tmp_path / "p")
    assert (tmp_path / "busy" / "notes.txt").read_text() == "keep me"


def test_cli_ranks_verb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gnncore.cli.main import main

    graph = planted_graph(tmp_path / "g", num_nodes=200)
    partition_graph(graph, tmp_path / "p", method="random", parts=2)
    argv = ["ranks", str(graph), str(tmp_path / "p"), str(tmp_path / "r")]
    assert main([*argv, "--json", str(tmp_path / "s.json")]) == 0
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["parts"] == 2 and sum(summary["core_nodes"]) == 200
    assert summary["offsets"] == [0, summary["core_nodes"][0], 200]
    (tmp_path / "r" / "rank_0" / "halo.npy").write_bytes(b"")
    assert main([*argv, "--rewrite"]) == 0  # replaced, whole again
    RankData.open(tmp_path / "r", 0, verify=True)
    capsys.readouterr()
    assert main(["ranks", str(tmp_path / "p"), str(tmp_path / "p"), str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gnncore ranks: error: ") and err.count("\n") == 1


def test_replication_plan_adds_the_replicated_rows(tmp_path: Path) -> None:
    from gnncore.distributed.feature_store import Replica
    from gnncore.plan.replication import ReplicationSettings, plan_replication

    graph = planted_graph(tmp_path / "g", num_nodes=300)
    partition_graph(graph, tmp_path / "p", method="metis", parts=3)
    plan_replication(graph, tmp_path / "p", tmp_path / "plan", ReplicationSettings(rate=0.05))
    plain = write_rank_data(graph, tmp_path / "p", tmp_path / "plain")
    out = write_rank_data(graph, tmp_path / "p", tmp_path / "r", replication=tmp_path / "plan")
    g = GraphDir.open(graph)
    x, y = np.asarray(g.features()), np.asarray(g.labels())
    new_of_old = np.asarray(PartitionDir.open(tmp_path / "p", g).array("relabel_new_of_old"))
    replicated = np.sort(new_of_old[np.load(tmp_path / "plan" / "replicated.npy")])
    assert len(replicated) == 15
    info = json.loads((out / "manifest.json").read_text())
    assert info["replicated_nodes"] == 15
    assert info["stage_key"] != json.loads((plain / "manifest.json").read_text())["stage_key"]
    held = 0
    for rank in range(3):
        data = RankData.open(out, rank, verify=True)
        lo, hi = data.core_range
        want = replicated[(replicated < lo) | (replicated >= hi)]
        replica = Replica.of(data)
        assert replica is not None and np.array_equal(replica.ids.numpy(), want)
        old = np.asarray(PartitionDir.open(tmp_path / "p", g).array("relabel_old_of_new"))[want]
        assert np.array_equal(replica.tensors["x"].numpy(), x[old])
        assert np.array_equal(replica.tensors["y"].numpy(), y[old])
        held += len(want)
        assert Replica.of(RankData.open(plain, rank)) is None  # no plan, no replica
    assert held == 2 * 15  # each replicated node lives on the two ranks not owning it

    # A plan of another part count is refused, naming the plan.
    partition_graph(graph, tmp_path / "p2", method="metis", parts=2)
    with pytest.raises(InputError, match="plans 3 parts, the partition has 2"):
        write_rank_data(graph, tmp_path / "p2", tmp_path / "r2", replication=tmp_path / "plan")


def test_refuses_a_malformed_npy_header_in_one_line(tmp_path: Path) -> None:
    graph = planted_graph(tmp_path / "g", num_nodes=200)
    partition_graph(graph, tmp_path / "p", method="random", parts=2)
    out = write_rank_data(graph, tmp_path / "p", tmp_path / "r")
    labels = out / "rank_1" / "labels.npy"
    raw = labels.read_bytes()
    closing = raw.index(b"}")
    labels.write_bytes(raw[:closing] + b" " + raw[closing + 1 :])  # same size, no '}'
    RankData.open(out, 0)  # rank 0 is untouched
    with pytest.raises(InputError) as excinfo:
        RankData.open(out, 1)
    assert "not a valid .npy file" in one_line_error(excinfo, labels)
