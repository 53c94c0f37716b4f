"""The C++ block reader (``_C.read_range`` / ``read_ranges`` / ``evict``) and its
wrapper :mod:`gnncore.outofcore.reader`, against the plain-Python reference."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from conftest import opens_direct, resident_pages
from gnncore import _C
from gnncore.errors import InputError
from gnncore.outofcore.reader import (
    evict_from_page_cache,
    npy_header_bytes,
    read_row_ranges,
    read_rows,
)
from gnncore.testing.reader_reference import read_row_ranges_reference, read_rows_reference
from tests.threads import another_thread_runs_during


def _save(path: Path, array: np.ndarray, version: tuple[int, int] | None = None) -> Path:
    with open(path, "wb") as f:
        np.lib.format.write_array(f, array, version=version)
    return path


def _layout(path: Path) -> tuple[int, np.dtype, tuple[int, ...]]:
    array = np.load(path, mmap_mode="r")
    return npy_header_bytes(path), array.dtype, tuple(array.shape[1:])


@pytest.fixture(scope="module")
def features(tmp_path_factory) -> tuple[Path, np.ndarray]:
    x = np.random.default_rng(0).standard_normal((3000, 37)).astype(np.float32)
    return _save(tmp_path_factory.mktemp("reader") / "features.npy", x), x


@pytest.fixture(scope="module")
def edges(tmp_path_factory) -> tuple[Path, np.ndarray]:
    e = np.random.default_rng(1).integers(-(2**40), 2**40, size=(5000, 2), dtype=np.int64)
    return _save(tmp_path_factory.mktemp("reader") / "edges.npy", e), e


@pytest.mark.parametrize("version", [None, (1, 0), (2, 0), (3, 0)])
def test_header_bytes_is_the_offset_of_row_0(tmp_path, version):
    a = np.arange(60, dtype=np.int32).reshape(20, 3)
    path = _save(tmp_path / "a.npy", a, version)
    assert npy_header_bytes(path) == path.stat().st_size - a.nbytes


def test_header_bytes_of_a_file_that_is_not_npy(tmp_path):
    path = tmp_path / "plain.bin"
    path.write_bytes(b"not an npy file at all")
    with pytest.raises(InputError, match="bad magic") as info:
        npy_header_bytes(path)
    assert info.value.path == path


@pytest.mark.parametrize("direct", [False, True], ids=["buffered", "direct"])
@pytest.mark.parametrize("fixture", ["features", "edges"])
@pytest.mark.parametrize("chunk_bytes", [8 << 20, 4096, 4093, 1])
def test_random_ranges_match_the_reference(request, fixture, chunk_bytes, direct):
    path, array = request.getfixturevalue(fixture)
    header, dtype, row_shape = _layout(path)
    rng = np.random.default_rng(chunk_bytes)
    n = len(array)
    ranges = [
        tuple(sorted(rng.integers(0, n + 1, size=2))) for _ in range(8 if chunk_bytes > 1 else 2)
    ]
    ranges += [(0, n), (n - 1, n), (n, n), (0, 0), (17, 17), (n - 300, n)]
    for start, stop in ranges:
        got = read_rows(
            path, header, dtype, row_shape, start, stop, chunk_bytes=chunk_bytes, direct=direct
        )
        want = read_rows_reference(path, header, dtype, row_shape, start, stop)
        assert got.dtype == dtype and got.shape == (stop - start, *row_shape)
        assert np.array_equal(got, want)
        assert np.array_equal(got, array[start:stop])


def test_a_range_larger_than_a_chunk_takes_many_preads(tmp_path):
    # 1 MiB of rows in 4 KiB preads (and a chunk that does not divide it), no hint.
    x = np.random.default_rng(2).integers(0, 2**62, size=(1 << 16, 2), dtype=np.int64)
    path = _save(tmp_path / "big.npy", x)
    header = npy_header_bytes(path)
    for chunk_bytes in (4096, 4096 - 24, 65535):
        got = read_rows(
            path, header, np.int64, (2,), 3, 3 + (1 << 16) - 7,
            chunk_bytes=chunk_bytes, sequential_hint=False,
        )  # fmt: skip
        assert np.array_equal(got, x[3 : 3 + (1 << 16) - 7])


def test_one_dimensional_arrays_have_empty_row_shape(tmp_path):
    a = np.arange(1000, dtype="<u2")
    path = _save(tmp_path / "a.npy", a)
    got = read_rows(path, npy_header_bytes(path), a.dtype, (), 100, 900)
    assert got.shape == (800,) and np.array_equal(got, a[100:900])


def test_several_ranges_are_concatenated_in_the_order_given(features, edges):
    for path, array in (features, edges):
        header, dtype, row_shape = _layout(path)
        n = len(array)
        ranges = [(n - 50, n), (0, 10), (5, 5), (3, 40), (3, 40), (n, n), (1000, 1999)]
        got = read_row_ranges(path, header, dtype, row_shape, ranges, chunk_bytes=4096)
        want = read_row_ranges_reference(path, header, dtype, row_shape, ranges)
        assert np.array_equal(got, want)
        assert np.array_equal(got, np.concatenate([array[a:b] for a, b in ranges]))
        empty = read_row_ranges(path, header, dtype, row_shape, [])
        assert empty.shape == (0, *row_shape) and empty.dtype == dtype
        # Into a slice of a larger array, leaving the rest alone.
        total = sum(b - a for a, b in ranges)
        target = np.full((total + 7, *row_shape), 7, dtype=dtype)
        read_row_ranges(path, header, dtype, row_shape, ranges, out=target[3 : 3 + total])
        assert np.array_equal(target[3 : 3 + total], want)
        assert (target[:3] == 7).all() and (target[3 + total :] == 7).all()
        with pytest.raises(ValueError, match="C-contiguous"):
            read_row_ranges(path, header, dtype, row_shape, ranges, out=target[: total + 1])


@pytest.mark.parametrize("direct", [False, True], ids=["buffered", "direct"])
def test_random_multi_range_reads_match_the_reference(edges, direct):
    path, array = edges
    header, dtype, row_shape = _layout(path)
    rng = np.random.default_rng(3)
    for _ in range(20):
        k = int(rng.integers(1, 6))
        ranges = [
            tuple(int(v) for v in sorted(rng.integers(0, len(array) + 1, 2))) for _ in range(k)
        ]
        got = read_row_ranges(
            path, header, dtype, row_shape, ranges, chunk_bytes=1000, direct=direct
        )
        assert np.array_equal(
            got, read_row_ranges_reference(path, header, dtype, row_shape, ranges)
        )


def test_direct_reads_bypass_the_page_cache(tmp_path):
    """A direct read of an evicted file leaves (almost) none of it cached, where a
    buffered read caches what it read; both return the same rows."""
    x = np.random.default_rng(4).standard_normal((4096, 64)).astype(np.float32)  # 1 MiB
    path = _save(tmp_path / "features.npy", x)
    if not opens_direct(tmp_path):
        pytest.skip(f"the file system of {tmp_path} refuses O_DIRECT")
    os.sync()
    header, dtype, row_shape = _layout(path)
    pages = -(-path.stat().st_size // 4096)
    assert evict_from_page_cache([path]) == 1
    if resident_pages(path) > pages // 4:
        pytest.skip("the page cache here does not drop evicted pages")
    got = read_rows(path, header, dtype, row_shape, 10, 4000, chunk_bytes=64 << 10, direct=True)
    assert np.array_equal(got, x[10:4000])
    assert resident_pages(path) <= pages // 8
    read_rows(path, header, dtype, row_shape, 10, 4000, chunk_bytes=64 << 10, direct=False)
    assert resident_pages(path) >= pages // 2


def test_direct_reads_fall_back_where_o_direct_is_refused():
    """tmpfs refuses O_DIRECT: the read goes through the page cache and is right."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        pytest.skip("no writable /dev/shm")
    path = shm / f"gnncore-direct-{os.getpid()}.npy"
    try:
        x = np.arange(3000 * 5, dtype=np.int64).reshape(3000, 5)
        _save(path, x)
        if opens_direct(shm):
            pytest.skip("/dev/shm accepts O_DIRECT here")
        header, dtype, row_shape = _layout(path)
        got = read_row_ranges(
            path, header, dtype, row_shape, [(7, 2000), (0, 3)], chunk_bytes=4096, direct=True
        )
        assert np.array_equal(got, np.concatenate([x[7:2000], x[0:3]]))
    finally:
        path.unlink(missing_ok=True)


def test_a_truncated_file_is_named(tmp_path):
    x = np.arange(4000, dtype=np.float32).reshape(1000, 4)
    path = _save(tmp_path / "features.npy", x)
    header = npy_header_bytes(path)
    os.truncate(path, path.stat().st_size - 10)  # the last row loses 10 of its 16 bytes
    assert np.array_equal(read_rows(path, header, np.float32, (4,), 0, 999), x[:999])
    with pytest.raises(InputError, match=r"ends early \(truncated\)") as info:
        read_rows(path, header, np.float32, (4,), 990, 1000, chunk_bytes=8)
    assert info.value.path == path and str(path) in str(info.value)
    with pytest.raises(EOFError):
        read_rows_reference(path, header, np.float32, (4,), 990, 1000)
    with pytest.raises(InputError, match=r"ends early \(truncated\)") as info:
        read_row_ranges(path, header, np.float32, (4,), [(0, 10), (995, 1000)])
    assert info.value.path == path


def test_the_extension_names_path_and_offset_of_a_short_file(tmp_path):
    path = tmp_path / "short.bin"
    path.write_bytes(bytes(100))
    with pytest.raises(OSError, match=r"ends early \(truncated\)") as info:
        _C.read_range(str(path), 60, np.empty(50, np.uint8))
    assert info.value.errno is None
    assert str(path) in str(info.value) and "offset 60" in str(info.value)


def test_ranges_outside_the_file(features):
    path, array = features
    header, dtype, row_shape = _layout(path)
    n = len(array)
    for start, stop in [(n, n + 1), (n - 1, n + 1), (n + 10, n + 20), (0, 10 * n)]:
        with pytest.raises(InputError, match=r"ends early \(truncated\)"):
            read_rows(path, header, dtype, row_shape, start, stop)
    with pytest.raises(InputError, match=r"ends early \(truncated\)"):
        read_row_ranges(path, header, dtype, row_shape, [(0, 1), (n, n + 1)])
    for start, stop in [(-1, 5), (10, 9)]:
        with pytest.raises(ValueError, match="start <= stop"):
            read_rows(path, header, dtype, row_shape, start, stop)
        with pytest.raises(ValueError, match="start <= stop"):
            read_row_ranges(path, header, dtype, row_shape, [(0, 1), (start, stop)])
    with pytest.raises(ValueError, match="header_bytes"):
        read_rows(path, -1, dtype, row_shape, 0, 1)
    with pytest.raises(ValueError, match="offset must be non-negative"):
        _C.read_range(str(path), -1, np.empty(4, np.uint8))


def test_a_missing_file_raises_os_error_naming_it(tmp_path):
    path = tmp_path / "absent.npy"
    with pytest.raises(FileNotFoundError) as info:
        read_rows(path, 128, np.float32, (4,), 0, 0)
    assert info.value.filename == str(path) and str(path) in str(info.value)
    with pytest.raises(FileNotFoundError):
        read_row_ranges(path, 128, np.float32, (4,), [(0, 1)])


def test_bad_lengths_and_buffers_are_refused(features):
    path = str(features[0])
    out = np.empty(16, np.uint8)
    cases = [
        (np.array([0, 8]), np.array([8, 4]), "add up to 12 bytes, out holds 16"),
        (np.array([0, 8]), np.array([8, 9]), "add up to more than"),
        (np.array([0, 8]), np.array([8, -8]), r"lengths\[1\] is negative"),
        (np.array([0]), np.array([8, 8]), "differ in length"),
        (np.array([-8, 8]), np.array([8, 8]), "offset must be non-negative"),
    ]
    for offsets, lengths, message in cases:
        with pytest.raises(ValueError, match=message):
            _C.read_ranges(path, offsets, lengths, out)
    with pytest.raises(ValueError, match="chunk_bytes must be positive"):
        _C.read_range(path, 0, out, chunk_bytes=0)
    with pytest.raises(ValueError, match="chunk_bytes must be positive"):
        _C.read_ranges(path, np.array([0]), np.array([16]), out, chunk_bytes=-1)
    frozen = np.empty(16, np.uint8)
    frozen.flags.writeable = False
    for bad in (
        frozen,
        np.empty(16, np.int8),
        np.empty((4, 4), np.uint8),
        np.empty(32, np.uint8)[::2],
    ):
        with pytest.raises(TypeError):
            _C.read_range(path, 0, bad)
    with pytest.raises(ValueError, match="Python objects"):
        read_rows(path, 0, object, (), 0, 1)


def test_evict_drops_a_regular_file(features, tmp_path):
    path = features[0]
    assert _C.evict(str(path)) is True
    assert _C.evict(str(tmp_path / "absent")) is False
    assert evict_from_page_cache([path, tmp_path / "absent", str(path)]) == 2
    header, dtype, row_shape = _layout(path)  # still readable after eviction
    assert np.array_equal(read_rows(path, header, dtype, row_shape, 0, 100), features[1][:100])


def test_other_threads_run_while_a_read_is_in_progress(tmp_path):
    size = 64 << 20
    path = tmp_path / "big.bin"
    np.full(size, 7, dtype=np.uint8).tofile(path)
    out = np.empty(size, dtype=np.uint8)

    def read() -> None:
        _C.read_range(str(path), 0, out, chunk_bytes=64 << 10, sequential_hint=False)

    assert another_thread_runs_during(read, tries=10), (
        "no other thread ran during any of 10 reads of 64 MiB: GIL held?"
    )
    assert out[0] == 7 and out[-1] == 7 and np.all(out == 7)
