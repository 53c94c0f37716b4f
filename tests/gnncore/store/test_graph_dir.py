"""The on-disk format: atomic writes, manifest checks, content validation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gnncore.errors import InputError
from gnncore.store import GraphDir, create_graph_dir, open_graph


def write_tiny(out: Path, **extra) -> Path:
    with create_graph_dir(out, name="tiny") as w:
        w.write_topology(4, np.array([0, 0, 1, 2]), np.array([1, 2, 3, 3]), directed=False)
        w.save_array("labels", np.array([0, 1, 1, 0]))
        w.num_classes = 2
        w.save_splits([0], [1], [2, 3])
        for name, array in extra.items():
            w.save_array(name, array)
    return out


def rewrite_manifest(graph: Path, edit) -> None:
    path = graph / "manifest.json"
    obj = json.loads(path.read_text())
    edit(obj)
    path.write_text(json.dumps(obj))


def test_roundtrip_adjacency_is_symmetric_and_sorted(tmp_path):
    g = open_graph(write_tiny(tmp_path / "g"), validate=True)
    m = g.manifest
    assert (m.num_nodes, m.num_canonical_edges, m.num_edges) == (4, 4, 8)
    assert g.indices.dtype == np.int32
    rows = {v: g.indices[g.indptr[v] : g.indptr[v + 1]].tolist() for v in range(4)}
    assert rows == {0: [1, 2], 1: [0, 3], 2: [0, 3], 3: [1, 2]}
    # eid maps each adjacency entry back to its canonical edge row.
    edges = g.edges()
    eid = g.array("eid")
    for v in range(4):
        for j in range(g.indptr[v], g.indptr[v + 1]):
            pair = {int(edges["src"][int(eid[j])]), int(edges["dst"][int(eid[j])])}
            assert pair == {v, int(g.indices[j])}
    shuffled = np.asarray(g.array("edges_shuffled"))
    assert sorted(map(tuple, shuffled.tolist())) == [(0, 1), (0, 2), (1, 3), (2, 3)]
    g.validate(checksums=True)


def test_directed_adjacency_lists_in_neighbours(tmp_path):
    with create_graph_dir(tmp_path / "d", name="d") as w:
        w.write_topology(3, np.array([0, 1, 2]), np.array([1, 2, 1]), directed=True)
    g = GraphDir.open(tmp_path / "d")
    assert g.manifest.num_edges == 3
    assert g.indices[g.indptr[1] : g.indptr[2]].tolist() == [0, 2]  # sources into node 1


def test_partition_stream_holds_each_connected_pair_once(tmp_path):
    with create_graph_dir(tmp_path / "d", name="d") as w:
        w.write_topology(3, np.array([0, 1, 0, 2]), np.array([1, 0, 2, 1]), directed=True)
    g = GraphDir.open(tmp_path / "d")
    assert (g.manifest.num_canonical_edges, g.manifest.num_undirected_edges) == (4, 3)
    pairs = sorted(map(tuple, np.asarray(g.array("edges_shuffled")).tolist()))
    assert pairs == [(0, 1), (0, 2), (1, 2)]


def test_failed_write_leaves_nothing_and_rerun_replaces(tmp_path):
    out = tmp_path / "g"
    with pytest.raises(RuntimeError):
        with create_graph_dir(out, name="x") as w:
            w.write_topology(2, np.array([0]), np.array([1]), directed=False)
            raise RuntimeError("crash mid-write")
    assert list(tmp_path.iterdir()) == []
    write_tiny(out)
    first = (out / "manifest.json").read_text()
    write_tiny(out)  # idempotent: same inputs, same manifest, no leftovers
    assert (out / "manifest.json").read_text() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g"]


def test_invalid_content_never_appears(tmp_path):
    out = tmp_path / "g"
    with pytest.raises(InputError, match="label 5 is outside"):
        with create_graph_dir(out, name="x") as w:
            w.write_topology(3, np.array([0]), np.array([1]), directed=False)
            w.save_array("labels", np.array([0, 5, 1]))
            w.num_classes = 2
    assert not out.exists()


def test_checksum_mismatch_is_reported(tmp_path):
    g = write_tiny(tmp_path / "g")
    labels = np.load(g / "labels.npy")
    labels[0] = 1  # same size, different bytes
    np.save(g / "labels.npy", labels)
    GraphDir.open(g).validate()  # contents are still plausible
    with pytest.raises(InputError, match=r"labels\.npy: sha256 does not match"):
        GraphDir.open(g).validate(checksums=True)


def test_size_mismatch_is_caught_before_mapping(tmp_path):
    g = write_tiny(tmp_path / "g")
    with open(g / "indices.npy", "ab") as fh:
        fh.write(b"\0\0\0\0")
    with pytest.raises(InputError, match=r"indices\.npy: size is"):
        GraphDir.open(g)


def test_manifest_names_cannot_escape_the_directory(tmp_path):
    g = write_tiny(tmp_path / "g")
    rewrite_manifest(g, lambda m: m["files"].update({"../evil.npy": m["files"]["labels.npy"]}))
    with pytest.raises(InputError, match="not a plain file name"):
        GraphDir.open(g)


def test_manifest_counts_must_match_arrays(tmp_path):
    g = write_tiny(tmp_path / "g")
    rewrite_manifest(g, lambda m: m.update(num_nodes=5))
    with pytest.raises(InputError, match=r"indptr\.npy: shape"):
        GraphDir.open(g)


def test_unknown_format_version_is_rejected(tmp_path):
    g = write_tiny(tmp_path / "g")
    rewrite_manifest(g, lambda m: m.update(format_version=99))
    with pytest.raises(InputError, match="unsupported format_version 99"):
        GraphDir.open(g)


def test_overlapping_splits_are_rejected(tmp_path):
    with pytest.raises(InputError, match="node 1 is also in another split"):
        with create_graph_dir(tmp_path / "g", name="x") as w:
            w.write_topology(3, np.array([0]), np.array([1]), directed=False)
            w.save_splits([0, 1], [1], [2])
    assert not (tmp_path / "g").exists()


def test_non_finite_features_name_the_row(tmp_path):
    x = np.ones((4, 3), dtype=np.float32)
    x[2, 1] = np.nan
    with pytest.raises(InputError, match=r"features\.npy: row 2: feature row holds NaN"):
        with create_graph_dir(tmp_path / "g", name="x") as w:
            w.write_topology(4, np.array([0]), np.array([1]), directed=False)
            w.save_array("features", x)
            w.num_features = 3


def test_corrupt_adjacency_names_the_row(tmp_path):
    g = write_tiny(tmp_path / "g")
    indices = np.load(g / "indices.npy")
    indices[3] = 7  # row 1 now points outside the graph
    np.save(g / "indices.npy", indices)
    with pytest.raises(InputError, match=r"indices\.npy: row 1"):
        GraphDir.open(g).validate()


@pytest.mark.parametrize("block", [1, 3, 5, 1 << 22])
@pytest.mark.parametrize("strict", [True, False])
def test_blockwise_adjacency_check_finds_the_whole_array_checks_row(tmp_path, block, strict):
    """validate() reads indices in row ranges of ``VALIDATE_ENTRIES`` entries (not
    mapped): each corruption is reported at the row the whole-array check names."""
    from gnncore import _C
    from gnncore.store import graph_dir

    rng = np.random.default_rng(0)
    num_nodes = 40
    a, b = rng.integers(0, num_nodes, 300), rng.integers(0, num_nodes, 300)
    pairs = np.unique(np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1)[a != b], axis=0)
    src, dst = pairs[:, 0], pairs[:, 1]
    with create_graph_dir(tmp_path / "g", name="g") as w:
        w.write_topology(num_nodes, src, dst, directed=False)
    g = GraphDir.open(tmp_path / "g")
    indptr, clean = np.array(g.indptr), np.array(g.indices)
    monkey = pytest.MonkeyPatch()
    monkey.setattr(graph_dir, "VALIDATE_ENTRIES", block)
    try:
        assert g._first_invalid_row(indptr, num_nodes, strict) == -1
        for spot in rng.choice(len(clean) - 1, 25, replace=False):
            for value in (-1, num_nodes, int(clean[spot + 1]), int(clean[spot + 1]) + 1):
                bad = clean.copy()
                bad[spot] = value
                np.save(g.path / "indices.npy", bad)
                expected = _C.find_invalid_csr_row(indptr, bad, num_nodes, strict)
                assert g._first_invalid_row(indptr, num_nodes, strict) == expected
        np.save(g.path / "indices.npy", clean)
        swapped = indptr.copy()
        swapped[7], swapped[8] = indptr[8], indptr[7]
        expected = _C.find_invalid_csr_row(swapped, clean, num_nodes, strict)
        assert 0 <= g._first_invalid_row(swapped, num_nodes, strict) == expected <= 7
    finally:
        monkey.undo()
