"""Pages faulted in ahead of their writer (gnncore.prefault), and the key sorter's
buffer and scratch faulted in as keys arrive.

Residency is read with ``mincore`` over the array's own pages, so what other
threads of the test process touch does not count."""

from __future__ import annotations

import ctypes
import gc
import mmap
import sys
import threading
import time
import weakref

import numpy as np
import pytest

from gnncore import prefault
from gnncore.prefault import MIN_LEAD, Prefaulter, populate
from gnncore.store.edge_keys import PREFAULT_AHEAD_KEYS, PREFAULT_MIN_KEYS, KeySorter

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not populate(np.empty(1 << 20, np.uint8), 0, 1 << 20),
    reason="MADV_POPULATE_WRITE is Linux 5.14+",
)

PAGE = mmap.PAGESIZE


def whole_pages(array: np.ndarray, start: int = 0, stop: int | None = None) -> tuple[int, int]:
    """The first address and the count of the whole pages under elements ``[start, stop)``."""
    stop = len(array) if stop is None else stop
    base = array.ctypes.data
    first = -(-(base + start * array.itemsize) // PAGE) * PAGE
    last = (base + stop * array.itemsize) // PAGE * PAGE
    return first, max(last - first, 0) // PAGE


def resident_pages(array: np.ndarray, start: int = 0, stop: int | None = None) -> int:
    """Resident whole pages under elements ``[start, stop)`` of ``array`` (``mincore``)."""
    first, count = whole_pages(array, start, stop)
    if count == 0:
        return 0
    vec = (ctypes.c_ubyte * count)()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
    assert libc.mincore(first, count * PAGE, vec) == 0, ctypes.get_errno()
    return sum(v & 1 for v in vec)


def fresh(n: int, dtype: type = np.uint64) -> np.ndarray:
    """A fresh, untouched array of its own anonymous mapping, page-aligned and
    without numpy's request for huge pages (khugepaged could otherwise fill a
    huge page around a touched one behind the test's back)."""
    itemsize = np.dtype(dtype).itemsize
    array = np.frombuffer(mmap.mmap(-1, n * itemsize), dtype=dtype)
    assert resident_pages(array) == 0
    return array


def prefault_threads() -> int:
    return sum(t.name == "gnncore-prefault" for t in threading.enumerate())


def wait_until(predicate, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_populate_faults_the_range_in_and_keeps_what_was_written():
    array = fresh(4 << 20)  # 32 MiB
    array[:8] = np.arange(8)  # the first page, written before
    assert populate(array, 0, 2 << 20)
    assert resident_pages(array, 0, 2 << 20) == whole_pages(array, 0, 2 << 20)[1]
    assert resident_pages(array, 2 << 20) == 0  # the next half untouched
    assert array[:8].tolist() == list(range(8))


def test_prefaulter_leads_the_writer_by_what_it_filled_within_its_bounds():
    keys, scratch = fresh(8 << 20), fresh(8 << 20)
    with Prefaulter([keys, scratch], ahead=1 << 20) as faults:
        faults.advance(10)  # a small fill: the lead is MIN_LEAD, not ``ahead``
        wait_until(lambda: faults.populated == 10 + MIN_LEAD)
        time.sleep(0.05)
        assert faults.populated == 10 + MIN_LEAD
        assert resident_pages(keys, 10 + MIN_LEAD) == 0
        keys[: 3 << 20] = 7  # the writer fills while the thread works
        faults.advance(3 << 20)  # the lead is ``ahead`` now
        wait_until(lambda: faults.populated == 4 << 20)
        assert resident_pages(scratch, 0, 4 << 20) == whole_pages(scratch, 0, 4 << 20)[1]
        assert resident_pages(scratch, 4 << 20) == 0
        faults.advance(8 << 20)  # never past the arrays
        wait_until(lambda: faults.populated == 8 << 20)
    assert (keys[: 3 << 20] == 7).all()
    faults.close()  # idempotent


def test_prefaulter_refuses_arrays_it_cannot_walk():
    with pytest.raises(ValueError, match="one length"):
        Prefaulter([np.empty(4), np.empty(5)], 4)
    with pytest.raises(ValueError, match="C-contiguous"):
        Prefaulter([np.empty(8)[::2]], 4)


def test_without_the_kernel_call_the_writer_faults_its_own_pages(monkeypatch):
    monkeypatch.setattr(prefault, "_madvise", lambda: None)
    array = fresh(1 << 20)
    with Prefaulter([array], ahead=1 << 20) as faults:
        faults.advance(1000)
        time.sleep(0.05)
        assert faults.populated == 0
    assert resident_pages(array) == 0


def test_key_sorter_faults_its_buffer_and_scratch_in_ahead_of_the_keys(tmp_path):
    before = prefault_threads()
    sorter = KeySorter(tmp_path, "canon", budget_bytes=PREFAULT_MIN_KEYS * 16 * 4)
    rng = np.random.default_rng(0)
    n = PREFAULT_MIN_KEYS
    src, dst = rng.integers(0, 1 << 20, n), rng.integers(0, 1 << 20, n)
    kept = sorter.add_edges(src, dst, unordered=True)
    assert prefault_threads() == before + 1
    scratch = sorter.scratch
    assert scratch is not None and len(scratch) == 4 * PREFAULT_MIN_KEYS
    lead = min(kept, PREFAULT_AHEAD_KEYS)
    ahead = whole_pages(scratch, 0, kept + lead)[1]
    wait_until(lambda: resident_pages(scratch, 0, kept + lead) == ahead)
    loops = src == dst
    a, b = np.minimum(src, dst)[~loops], np.maximum(src, dst)[~loops]
    expected = np.unique((a << 32 | b).astype(np.uint64))
    assert sorter.finish() == len(expected)
    assert prefault_threads() == before  # stopped before the sort
    np.testing.assert_array_equal(np.concatenate(list(sorter.blocks(1 << 16))), expected)


def test_a_small_key_sorter_starts_no_thread(tmp_path):
    before = prefault_threads()
    sorter = KeySorter(tmp_path, "canon", budget_bytes=(PREFAULT_MIN_KEYS - 1) * 16)
    sorter.add_edges(np.arange(10), np.arange(1, 11), unordered=True)
    assert prefault_threads() == before and sorter.scratch is None
    assert sorter.finish() == 10


def test_a_key_sorter_dropped_unfinished_stops_its_thread(tmp_path):
    before = prefault_threads()
    sorter = KeySorter(tmp_path, "canon", budget_bytes=PREFAULT_MIN_KEYS * 16)
    sorter.add_edges(np.arange(1000), np.arange(1, 1001), unordered=True)
    assert prefault_threads() == before + 1
    del sorter  # as when the parse raises: no finish(), no release()
    gc.collect()
    wait_until(lambda: prefault_threads() == before)


def test_a_released_key_sorter_frees_its_buffers(tmp_path):
    """release() drops the keys and the scratch: nothing of the prefault (its
    thread, the finalizer that stops it) keeps them alive."""
    sorter = KeySorter(tmp_path, "canon", budget_bytes=PREFAULT_MIN_KEYS * 16)
    sorter.add_edges(np.arange(1000), np.arange(1, 1001), unordered=True)
    buffer = weakref.ref(sorter._buffer())
    scratch = weakref.ref(sorter.scratch)
    sorter.finish()
    sorter.release()
    gc.collect()
    assert buffer() is None and scratch() is None
