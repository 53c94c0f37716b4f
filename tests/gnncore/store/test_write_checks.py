"""Checks made while a graph directory is written (:mod:`gnncore.store.write_checks`):
bounded ingestion checks ``indptr``/``indices``/``eid`` and ``edges_shuffled``
from its buffers, so the final validation reads none of them back; a check
that fails (or does not match the manifest) leaves the file to the validation,
which refuses it with its usual error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gnncore import _C
from gnncore.errors import InputError
from gnncore.io import ingest
from gnncore.io.bounded.csr import write_key_csr
from gnncore.io.bounded.csr_sink import CsrSink
from gnncore.io.bounded.npy_stream import HashedNpyWriter
from gnncore.store import GraphDir, create_graph_dir
from gnncore.store.edge_keys import KeySorter, split_keys
from gnncore.store.manifest import sha256_of
from gnncore.store.write_checks import CsrChecks, WrittenCheck, pairs_ok
from gnncore.synth.edge_csv import write_edge_csv
from gnncore.synth.model import SynthSpec


def csv_of(tmp_path: Path, num_nodes: int = 300, seed: int = 3) -> Path:
    """A small generated graph's edge list as a CSV (repeats and loops included)."""
    spec = SynthSpec(num_nodes=num_nodes, avg_degree=6, num_classes=2, num_features=1, seed=seed)
    path = tmp_path / "edges.csv"
    write_edge_csv(path, spec)
    return path


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The array files the validation reads back (the real checks still run)."""
    seen: list[str] = []
    methods = {"_first_outside": None, "_first_invalid_row": "indices",
               "_check_pairs": "edges_shuffled", "_check_indptr": "indptr"}  # fmt: skip
    for method, name in methods.items():
        real = getattr(GraphDir, method)

        def spy(self, *args, _real=real, _name=name, **kwargs):
            seen.append(_name or args[0])
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(GraphDir, method, spy)
    return seen


# the CSR of keys merged in memory, and of keys in a run on disk
@pytest.mark.parametrize(("num_nodes", "budget"), [(300, 1 << 30), (3000, 64 << 10)])
@pytest.mark.parametrize("directed", [False, True])
def test_bounded_ingest_checks_while_writing_same_bytes(
    tmp_path, reads, num_nodes, budget, directed
):
    source = csv_of(tmp_path, num_nodes)
    ingest(source, tmp_path / "mem", memory_budget=None, directed=directed, seed=2)
    assert {"indices", "eid", "edges_shuffled", "indptr"} <= set(reads)  # in memory: read back
    reads.clear()
    ingest(source, tmp_path / "ext", memory_budget=budget, directed=directed, seed=2)
    assert reads == []  # every array was checked as it was written
    for file in sorted(p.name for p in (tmp_path / "mem").iterdir()):
        assert (tmp_path / "mem" / file).read_bytes() == (tmp_path / "ext" / file).read_bytes()
    graph = GraphDir.open(tmp_path / "ext")
    graph.validate(checksums=True)  # the digests hashed from the buffers are the files'
    for name, entry in graph.manifest.files.items():
        assert sha256_of(tmp_path / "ext" / name) == entry.sha256


def write_bad_csr(out: Path, change_indices=None, change_eid=None) -> None:
    """A graph directory whose CSR goes through :class:`CsrSink` after the
    in-memory writer's, with ``change_*`` applied to its arrays first."""
    src = np.array([0, 0, 1, 2], dtype=np.int64)
    dst = np.array([1, 2, 2, 3], dtype=np.int64)
    with create_graph_dir(out, "bad") as writer:
        writer.write_topology(4, src, dst, directed=False)
        indptr = np.load(writer.root / "indptr.npy")
        indices = np.load(writer.root / "indices.npy")
        eid = np.load(writer.root / "eid.npy")
        for change, array in ((change_indices, indices), (change_eid, eid)):
            if change is not None:
                change(array)
        with CsrSink(writer, indptr, indices.dtype, len(src)) as sink:
            half = 2
            sink.put(0, half, indices[: indptr[half]], eid[: indptr[half]])
            sink.put(half, 4, indices[indptr[half] :], eid[indptr[half] :])
        assert len(writer.written_checks) == (3 if change_indices is change_eid is None else 0)


def test_sound_csr_through_the_sink_is_recorded_and_appears(tmp_path):
    write_bad_csr(tmp_path / "ok")
    GraphDir.open(tmp_path / "ok").validate(checksums=True)


def test_unsorted_row_caught_while_written_fails_as_validate_does(tmp_path):
    def swap(indices):  # row 2 holds [0, 1, 3]: now [1, 0, 3]
        indices[4], indices[5] = indices[5], indices[4]

    with pytest.raises(InputError, match="adjacency row is unsorted") as info:
        write_bad_csr(tmp_path / "g", change_indices=swap)
    assert "indices.npy" in str(info.value) and "row 2" in str(info.value)
    assert not (tmp_path / "g").exists()


def test_edge_id_out_of_range_caught_while_written_fails_as_validate_does(tmp_path):
    def spoil(eid):
        eid[5] = 4  # 4 canonical edges: ids 0..3

    with pytest.raises(InputError, match=r"edge id 4 is outside \[0, 4\)"):
        write_bad_csr(tmp_path / "g", change_eid=spoil)
    assert not (tmp_path / "g").exists()


def test_bad_pair_caught_while_hashed_fails_as_validate_does(tmp_path):
    with create_graph_dir(tmp_path / "ok", "ok") as writer:
        writer.write_topology(4, np.array([0, 1]), np.array([1, 2]), directed=False)
    with pytest.raises(InputError, match=r"pair \(2, 1\) is not u < v"):
        with create_graph_dir(tmp_path / "g", "g") as writer:
            writer.write_topology(4, np.array([0, 1]), np.array([1, 2]), directed=False)
            path = writer.file_path("edges_shuffled.npy", "npy")
            check = lambda block: pairs_ok(block, 4)  # noqa: E731
            with HashedNpyWriter(path, np.int32, (2, 2), check=check) as out:
                out.write(np.array([[0, 1], [2, 1]], dtype=np.int32))
                writer.set_digest("edges_shuffled.npy", out.close())
                assert out.checked() is None  # nothing to record


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_pairs_ok_matches_a_numpy_reference(dtype):
    def reference(pairs: np.ndarray, num_nodes: int) -> bool:
        p = pairs.reshape(-1, 2)
        return bool(
            len(p) == 0 or (p.min() >= 0 and p.max() < num_nodes and (p[:, 0] < p[:, 1]).all())
        )

    rng = np.random.default_rng(4)
    good = np.sort(rng.choice(1000, size=(5000, 2)), axis=1)
    good = good[good[:, 0] < good[:, 1]].astype(dtype)
    cases = [good, good[:0], good.reshape(-1)]  # [k, 2], empty, flat as the writer gives it
    for row, pair in [(0, (-1, 3)), (7, (5, 5)), (100, (9, 4)), (len(good) - 1, (2, 1000))]:
        bad = good.copy()
        bad[row] = pair
        cases.append(bad)
    for case in cases:
        assert pairs_ok(case, 1000) == reference(case, 1000)
    assert not pairs_ok(good.reshape(-1)[:-1], 1000)  # an odd count is no pairs


def test_all_in_range_matches_min_and_max():
    values = np.arange(-3, 50, dtype=np.int64)
    assert _C.all_in_range(values, -3, 50) and _C.all_in_range(values[:0], 0, 0)
    assert not _C.all_in_range(values, -2, 50) and not _C.all_in_range(values, -3, 49)


def test_checks_that_do_not_match_the_manifest_are_ignored(tmp_path):
    with create_graph_dir(tmp_path / "g", "g") as writer:
        writer.write_topology(4, np.array([0, 0, 1]), np.array([1, 2, 2]), directed=False)
    indices = tmp_path / "g" / "indices.npy"
    array = np.load(indices)
    array[[0, 1]] = array[[1, 0]]  # row 0 was [1, 2]: unsorted, same bytes count
    np.save(indices, array)
    graph = GraphDir.open(tmp_path / "g")
    n, e = graph.manifest.num_nodes, graph.manifest.num_edges
    for checks in (
        [WrittenCheck("indices.npy", e, n)],  # no check of indptr: rows unchecked against it
        [WrittenCheck("indptr.npy", n + 1, e), WrittenCheck("indices.npy", e - 1, n)],
        [WrittenCheck("indptr.npy", n + 1, e), WrittenCheck("indices.npy", e, n + 1)],
        [WrittenCheck("indptr.npy", n + 1, e), WrittenCheck("indices.npy", e, n, strict=False)],
    ):
        with pytest.raises(InputError, match="adjacency row is unsorted"):
            GraphDir.open(tmp_path / "g").validate(written=checks)
    matching = [WrittenCheck("indptr.npy", n + 1, e), WrittenCheck("indices.npy", e, n)]
    GraphDir.open(tmp_path / "g").validate(written=matching)  # trusted: not read


def test_csr_checks_need_every_row_in_order():
    indptr = np.array([0, 2, 3, 3], dtype=np.int64)
    indices, eid = np.array([1, 2, 0], dtype=np.int32), np.array([0, 1, 0], dtype=np.int64)
    whole = CsrChecks(indptr, 3, 2)
    whole.rows(0, 3, indices, eid)
    assert [c.file for c in whole.results()] == ["indptr.npy", "indices.npy", "eid.npy"]
    part = CsrChecks(indptr, 3, 2)
    part.rows(0, 1, indices[:2], eid[:2])
    assert part.results() == []  # rows 1 and 2 never seen
    skipped = CsrChecks(indptr, 3, 2)
    skipped.rows(1, 3, indices[2:], eid[2:])
    assert skipped.results() == []
    repeat = CsrChecks(indptr, 3, 2)
    repeat.rows(0, 3, np.array([1, 1, 0], dtype=np.int32), eid)
    assert repeat.results() == []
    falling = CsrChecks(np.array([0, 2, 1, 3], dtype=np.int64), 3, 2)
    falling.rows(0, 3, indices, eid)
    assert falling.results() == []


@pytest.mark.parametrize("directed", [False, True])
def test_csr_filled_by_passes_over_keys_in_memory_is_checked(tmp_path, directed):
    """Keys in memory past the merge's room (a sorter given more than the
    budget): each row range is filled by a pass over them, then checked."""
    rng = np.random.default_rng(4)
    src, dst = rng.integers(0, 200, 3000), rng.integers(0, 200, 3000)
    keys = KeySorter(tmp_path, "canon", 1 << 20)
    keys.add_edges(src, dst, unordered=not directed)
    keys.finish()
    assert keys.keys is not None
    key_src, key_dst = split_keys(keys.keys)
    with create_graph_dir(tmp_path / "mem", "g") as writer:
        writer.write_topology(200, key_src, key_dst, directed=directed)
    with create_graph_dir(tmp_path / "ext", "g") as writer:
        writer.write_topology(200, key_src, key_dst, directed=directed)
        write_key_csr(keys, writer, 200, directed, budget=8 << 10, rows=512)
        assert {c.file for c in writer.written_checks} == {"indptr.npy", "indices.npy", "eid.npy"}
    for name in ("indptr.npy", "indices.npy", "eid.npy"):
        assert (tmp_path / "mem" / name).read_bytes() == (tmp_path / "ext" / name).read_bytes()
    GraphDir.open(tmp_path / "ext").validate(checksums=True)
