"""External edge sorting (``_C.write_run`` / ``merge_runs`` / ``merge_runs_to_csr`` and
:class:`gnncore.store.external_sort.ExternalEdgeSorter`) against the plain-NumPy
reference and against the files the in-memory writer produces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gnncore.store.writer as writer_module
from gnncore import _C
from gnncore.errors import InputError
from gnncore.io.canonical import canonicalize
from gnncore.store.external_sort import ExternalEdgeSorter
from gnncore.store.writer import GraphDirWriter
from gnncore.testing.external_sort_reference import external_sort_csr_reference
from tests.threads import another_thread_runs_during

RUN_HEADER = 32


def _graph(seed: int, num_nodes: int, num_edges: int) -> tuple[np.ndarray, np.ndarray]:
    """Random edges with many duplicates and self-loops, on a subset of the nodes
    (the top 10% of ids have no edge: isolated nodes, also at the end)."""
    rng = np.random.default_rng(seed)
    hi = max(1, int(num_nodes * 0.9))
    src = rng.integers(0, hi, num_edges)
    dst = rng.integers(0, hi, num_edges)
    loops = rng.random(num_edges) < 0.05
    dst[loops] = src[loops]
    dup = rng.integers(0, num_edges, num_edges // 4)  # repeats, some reversed
    rev = rng.random(len(dup)) < 0.5
    src = np.concatenate([src, np.where(rev, dst[dup], src[dup])])
    dst = np.concatenate([dst, np.where(rev, src[dup], dst[dup])])
    return src, dst


def _chunks(src: np.ndarray, dst: np.ndarray, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Chunks of random sizes, empty ones included."""
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.integers(0, len(src) + 1, 12))
    bounds = [0, *cuts.tolist(), len(src)]
    return [(src[a:b], dst[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _sort(
    tmp: Path,
    chunks: list[tuple[np.ndarray, np.ndarray]],
    num_nodes: int,
    *,
    directed: bool,
    budget: int,
    max_fan_in: int = 64,
    index_dtype: type | None = None,
) -> tuple[ExternalEdgeSorter, Path, Path, int]:
    out = tmp / "out"
    out.mkdir(exist_ok=True)
    with ExternalEdgeSorter(tmp, budget, directed=directed, max_fan_in=max_fan_in) as sorter:
        for s, d in chunks:
            sorter.add(s, d)
        indptr_path, indices_path, num_edges = sorter.finish(
            num_nodes, out, index_dtype=index_dtype
        )
    return sorter, indptr_path, indices_path, num_edges


def _writer_files(tmp: Path, src, dst, num_nodes: int, directed: bool) -> tuple[bytes, bytes]:
    """indptr.npy / indices.npy as the in-memory ingestion path writes them."""
    canon = canonicalize(src, dst, num_nodes, directed=directed)
    root = tmp / "writer"
    root.mkdir()
    GraphDirWriter(root, "t").write_topology(num_nodes, canon.src, canon.dst, directed=directed)
    return (root / "indptr.npy").read_bytes(), (root / "indices.npy").read_bytes()


@pytest.mark.parametrize("directed", [True, False])
@pytest.mark.parametrize(
    ("num_nodes", "num_edges", "budget"),
    [(300, 3000, 1024), (5000, 20000, 16 << 10), (2000, 8000, 64 << 20)],
    ids=["tiny-budget", "many-runs", "one-run"],
)
def test_same_bytes_as_the_in_memory_writer(tmp_path, directed, num_nodes, num_edges, budget):
    src, dst = _graph(num_edges, num_nodes, num_edges)
    sorter, indptr_path, indices_path, num_edges_out = _sort(
        tmp_path, _chunks(src, dst, 1), num_nodes, directed=directed, budget=budget
    )
    if budget < (1 << 20):
        assert sorter.runs_written >= 10
    else:
        assert sorter.runs_written == 1
    ref_indptr, ref_indices = external_sort_csr_reference(
        [(src, dst)], num_nodes, directed=directed
    )
    indptr, indices = np.load(indptr_path), np.load(indices_path)
    assert indptr.dtype == np.int64 and indices.dtype == np.int32
    np.testing.assert_array_equal(indptr, ref_indptr)
    np.testing.assert_array_equal(indices, ref_indices)
    assert num_edges_out == len(ref_indices) == indptr[-1]

    w_indptr, w_indices = _writer_files(tmp_path, src, dst, num_nodes, directed)
    assert indptr_path.read_bytes() == w_indptr
    assert indices_path.read_bytes() == w_indices

    canon = canonicalize(src, dst, num_nodes, directed=directed)
    assert sorter.num_input_edges == canon.num_input_edges
    assert sorter.self_loops_removed == canon.self_loops_removed
    assert sorter.duplicates_removed == canon.duplicates_removed
    assert sorter.num_canonical_edges == len(canon)


@pytest.mark.parametrize("directed", [True, False])
def test_int64_indices_match_the_writer(tmp_path, directed, monkeypatch):
    src, dst = _graph(7, 400, 3000)
    _, indptr_path, indices_path, _ = _sort(
        tmp_path, [(src, dst)], 400, directed=directed, budget=4096, index_dtype=np.int64
    )
    ref_indptr, ref_indices = external_sort_csr_reference(
        [(src, dst)], 400, directed=directed, index_dtype=np.int64
    )
    indices = np.load(indices_path)
    assert indices.dtype == np.int64
    np.testing.assert_array_equal(indices, ref_indices)
    np.testing.assert_array_equal(np.load(indptr_path), ref_indptr)
    # The writer picks int64 for graphs over 2^31 - 1 nodes: pretend this is one.
    monkeypatch.setattr(writer_module, "index_dtype", lambda n: np.dtype(np.int64))
    w_indptr, w_indices = _writer_files(tmp_path, src, dst, 400, directed)
    assert indptr_path.read_bytes() == w_indptr
    assert indices_path.read_bytes() == w_indices


@pytest.mark.parametrize(
    ("num_nodes", "src", "dst"),
    [
        (0, [], []),
        (5, [], []),
        (4, [0, 1, 3, 3], [0, 1, 3, 3]),  # only self-loops
        (6, [5, 5, 0], [0, 0, 5]),  # isolated nodes between and before
    ],
    ids=["no-nodes", "no-edges", "only-loops", "isolated"],
)
@pytest.mark.parametrize("directed", [True, False])
def test_edge_cases_match_the_writer(tmp_path, num_nodes, src, dst, directed):
    s, d = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
    sorter, indptr_path, indices_path, num_edges = _sort(
        tmp_path, [(s, d)], num_nodes, directed=directed, budget=1024
    )
    w_indptr, w_indices = _writer_files(tmp_path, s, d, num_nodes, directed)
    assert indptr_path.read_bytes() == w_indptr
    assert indices_path.read_bytes() == w_indices
    assert num_edges == int(np.load(indptr_path)[-1])


def test_multi_pass_merge_when_runs_exceed_the_fan_in(tmp_path):
    src, dst = _graph(3, 1000, 6000)
    sorter, indptr_path, indices_path, _ = _sort(
        tmp_path, _chunks(src, dst, 2), 1000, directed=False, budget=2048, max_fan_in=3
    )
    assert sorter.runs_written > 27  # three levels of merging
    ref_indptr, ref_indices = external_sort_csr_reference([(src, dst)], 1000, directed=False)
    np.testing.assert_array_equal(np.load(indptr_path), ref_indptr)
    np.testing.assert_array_equal(np.load(indices_path), ref_indices)


def test_chunk_dtypes_and_sizes(tmp_path):
    src, dst = _graph(4, 200, 2000)
    chunks = [(src[:1], dst[:1]), (src[1:1500].astype(np.int32), dst[1:1500].astype(np.uint16))]
    chunks.append((src[1500:], dst[1500:]))
    _, indptr_path, indices_path, _ = _sort(tmp_path, chunks, 200, directed=True, budget=1024)
    ref_indptr, ref_indices = external_sort_csr_reference([(src, dst)], 200, directed=True)
    np.testing.assert_array_equal(np.load(indptr_path), ref_indptr)
    np.testing.assert_array_equal(np.load(indices_path), ref_indices)


def test_runs_are_deleted_after_finish(tmp_path):
    src, dst = _graph(5, 100, 1000)
    with ExternalEdgeSorter(tmp_path, 1024, directed=False) as sorter:
        sorter.add(src, dst)
        assert len(sorter.run_paths) >= 10 and sorter.run_dir.is_dir()
        sorter.finish(100, tmp_path)
        assert not sorter.run_dir.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["indices.npy", "indptr.npy"]
    with pytest.raises(RuntimeError, match="closed"):
        sorter.add(src, dst)


def test_runs_are_deleted_after_an_exception(tmp_path):
    src, dst = _graph(6, 100, 1000)
    with pytest.raises(KeyError), ExternalEdgeSorter(tmp_path, 1024, directed=True) as sorter:
        sorter.add(src, dst)
        assert sorter.run_paths
        raise KeyError("boom")
    assert not sorter.run_dir.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_truncated_run_is_named_and_the_runs_are_still_deleted(tmp_path):
    src, dst = _graph(8, 100, 1000)
    out = tmp_path / "out"
    out.mkdir()
    with ExternalEdgeSorter(tmp_path, 1024, directed=True) as sorter:
        sorter.add(src, dst)
        victim = sorter.run_paths[3]
        with open(victim, "r+b") as f:
            f.truncate(victim.stat().st_size - 8)
        with pytest.raises(InputError, match="truncated") as info:
            sorter.finish(100, out)
    assert info.value.path == victim and str(victim) in str(info.value)
    assert not sorter.run_dir.exists()
    assert list(out.iterdir()) == []  # no output, not even a temporary file


def test_node_ids_are_checked(tmp_path):
    with ExternalEdgeSorter(tmp_path, 1024, directed=True) as sorter:
        with pytest.raises(ValueError, match="non-negative"):
            sorter.add(np.array([0, -1]), np.array([1, 1]))
        with pytest.raises(ValueError, match="one length"):
            sorter.add(np.array([0, 1]), np.array([1]))
        with pytest.raises(ValueError, match="integers"):
            sorter.add(np.array([0.0]), np.array([1.0]))
        sorter.add(np.array([0, 7]), np.array([1, 2]))
        with pytest.raises(ValueError, match=r"node id 7 is outside \[0, 7\)"):
            sorter.finish(7, tmp_path)
    with pytest.raises(ValueError, match="budget_bytes"):
        ExternalEdgeSorter(tmp_path, 10, directed=True)


# The C++ functions directly ---------------------------------------------------------


def _run_pairs(path: Path) -> np.ndarray:
    return np.fromfile(path, dtype=np.int64, offset=RUN_HEADER).reshape(-1, 2)


@pytest.mark.parametrize("big", [False, True], ids=["packed-keys", "wide-ids"])
@pytest.mark.parametrize("key_order", ["dst_src", "src_dst"])
def test_write_run_sorts_and_deduplicates(tmp_path, key_order, big):
    rng = np.random.default_rng(9)
    base = (1 << 40) if big else 0  # ids past 2^32 take the comparison sort
    src = rng.integers(0, 50, 4000) + base
    dst = rng.integers(0, 50, 4000) + base
    path = tmp_path / "run.bin"
    count = _C.write_run(src, dst, str(path), key_order)
    major, minor = (dst, src) if key_order == "dst_src" else (src, dst)
    expected = np.unique(np.stack([major, minor], axis=1), axis=0)
    assert count == len(expected)
    np.testing.assert_array_equal(_run_pairs(path), expected)
    header = np.fromfile(path, dtype=np.int64, count=4)
    assert header[2] == count and header[3] == max(src.max(), dst.max())
    assert [p.name for p in tmp_path.iterdir()] == ["run.bin"]


def test_merge_runs_into_one_run(tmp_path):
    rng = np.random.default_rng(10)
    paths, all_src, all_dst = [], [], []
    for i in range(5):
        s, d = rng.integers(0, 30, 300), rng.integers(0, 30, 300)
        paths.append(str(tmp_path / f"r{i}.bin"))
        _C.write_run(s, d, paths[-1])
        all_src.append(s)
        all_dst.append(d)
    out = tmp_path / "merged.bin"
    count = _C.merge_runs(paths, str(out), buffer_bytes=64)
    s, d = np.concatenate(all_src), np.concatenate(all_dst)
    expected = np.unique(np.stack([d, s], axis=1), axis=0)
    assert count == len(expected)
    np.testing.assert_array_equal(_run_pairs(out), expected)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64, "int32", np.dtype("<i8")])
def test_merge_to_csr_with_small_buffers(tmp_path, index_dtype):
    rng = np.random.default_rng(11)
    chunks = [(rng.integers(0, 60, 500), rng.integers(0, 60, 500)) for _ in range(12)]
    paths = []
    for i, (s, d) in enumerate(chunks):
        paths.append(str(tmp_path / f"r{i}.bin"))
        _C.write_run(s, d, paths[-1])
    indptr_path, indices_path = tmp_path / "indptr.npy", tmp_path / "indices.npy"
    count = _C.merge_runs_to_csr(
        paths, 64, str(indptr_path), str(indices_path), index_dtype, buffer_bytes=16
    )
    # The reference drops self-loops; write_run keeps what it is given.
    s = np.concatenate([c[0] for c in chunks])
    d = np.concatenate([c[1] for c in chunks])
    pairs = np.unique(np.stack([d, s], axis=1), axis=0)
    indptr = np.zeros(65, dtype=np.int64)
    np.cumsum(np.bincount(pairs[:, 0], minlength=64), out=indptr[1:])
    assert count == len(pairs)
    np.testing.assert_array_equal(np.load(indptr_path), indptr)
    indices = np.load(indices_path)
    assert indices.dtype == np.dtype(index_dtype)
    np.testing.assert_array_equal(indices, pairs[:, 1])
    np.save(tmp_path / "numpy.npy", indices)
    assert indices_path.read_bytes() == (tmp_path / "numpy.npy").read_bytes()


def test_malformed_runs_are_named(tmp_path):
    good = tmp_path / "good.bin"
    _C.write_run(np.arange(10), np.arange(10)[::-1].copy(), str(good))
    data = good.read_bytes()
    out = (str(tmp_path / "indptr.npy"), str(tmp_path / "indices.npy"))

    def merge(path: Path, num_nodes: int = 10) -> None:
        _C.merge_runs_to_csr([str(good), str(path)], num_nodes, *out, np.int32)

    cases = {
        "truncated.bin": (data[:-3], "truncated run file"),
        "short.bin": (data[:20], "shorter than the 32-byte header"),
        "magic.bin": (b"NOTARUN!" + data[8:], r"bad magic"),
        "trailing.bin": (data + b"\0" * 16, "bytes past its"),
        "unsorted.bin": (data[:32] + data[48:64] + data[32:48] + data[64:], "not strictly sorted"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(InputError, match=message) as info:
            merge(path)
        assert info.value.path == path and name in str(info.value)
    with pytest.raises(FileNotFoundError, match="missing.bin"):
        merge(tmp_path / "missing.bin")
    with pytest.raises(ValueError, match=r"good.bin: holds node id 9, outside \[0, 5\)"):
        merge(good, num_nodes=5)
    other = tmp_path / "other.bin"
    _C.write_run(np.arange(3), np.arange(3), str(other), "src_dst")
    with pytest.raises(ValueError, match="different key orders"):
        merge(other)
    with pytest.raises(ValueError, match="index_dtype"):
        _C.merge_runs_to_csr([str(good)], 10, *out, np.float32)
    with pytest.raises(ValueError, match="key_order"):
        _C.write_run(np.arange(3), np.arange(3), str(other), "dst")
    with pytest.raises(ValueError, match="negative"):
        _C.write_run(np.array([-1]), np.array([0]), str(other))
    assert not (tmp_path / "indptr.npy").exists() and not (tmp_path / "indices.npy").exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_output_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        _C.write_run(np.arange(3), np.arange(3), str(tmp_path / "nowhere" / "run.bin"))


def test_merge_releases_the_gil(tmp_path):
    rng = np.random.default_rng(12)
    paths = []
    for i in range(4):
        s, d = rng.integers(0, 1 << 20, 400_000), rng.integers(0, 1 << 20, 400_000)
        paths.append(str(tmp_path / f"r{i}.bin"))
        _C.write_run(s, d, paths[-1])
    out = (str(tmp_path / "indptr.npy"), str(tmp_path / "indices.npy"))

    def merge() -> None:
        _C.merge_runs_to_csr(paths, 1 << 20, *out, np.int32)

    assert another_thread_runs_during(merge, tries=5), (
        "no other thread ran during any of 5 merges: GIL held?"
    )
