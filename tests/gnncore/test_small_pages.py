"""``gnncore.prefault.small_pages``: NumPy arrays allocated inside it are not
advised ``MADV_HUGEPAGE`` (ingestion runs in it: its buffers are read in
sequence, and a huge page's first touch costs seven times more on a VM that
reports free memory to its host). Read from the mapping's ``VmFlags`` in
``/proc/self/smaps`` (``hg``: advised huge pages)."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from gnncore.prefault import small_pages

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads smaps")

#: Past glibc's largest mmap threshold (32 MiB): each array is a mapping of its
#: own, never heap memory an earlier array's advice still covers. Never touched.
SIZE = 64 << 20


def _advised_huge(array: np.ndarray) -> bool:
    """Whether the mapping holding the middle of ``array`` is advised huge pages
    (NumPy advises from the first page boundary inside the array on)."""
    address = array.ctypes.data + array.nbytes // 2
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(None, 1)[0]
            if not head.endswith(":"):  # a mapping's header: start-end perms ...
                start, end = (int(x, 16) for x in head.split("-"))
                inside = start <= address < end
            elif inside and head == "VmFlags:":
                return "hg" in line.split()[1:]
    raise AssertionError("the array's mapping is not in smaps")


def _numpy_advises() -> bool:
    return _advised_huge(np.empty(SIZE, np.uint8))


def test_arrays_inside_are_not_advised_and_numpys_setting_comes_back():
    if not _numpy_advises():
        pytest.skip("NumPy does not advise huge pages here (kernel or NUMPY_MADVISE_HUGEPAGE)")
    with small_pages():
        assert not _advised_huge(np.empty(SIZE, np.uint8))
        with small_pages():  # nested: still off, and still off after it
            assert not _advised_huge(np.empty(SIZE, np.uint8))
        assert not _advised_huge(np.empty(SIZE, np.uint8))
    assert _numpy_advises()


def test_overlapping_blocks_on_threads_restore_when_the_last_ends():
    if not _numpy_advises():
        pytest.skip("NumPy does not advise huge pages here (kernel or NUMPY_MADVISE_HUGEPAGE)")
    entered, release = threading.Event(), threading.Event()

    def other() -> None:
        with small_pages():
            entered.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    with small_pages():
        thread.start()
        assert entered.wait(10)
    # this block ended first: the other thread's is still open
    assert not _advised_huge(np.empty(SIZE, np.uint8))
    release.set()
    thread.join()
    assert _numpy_advises()


def test_huge_page_arrays_are_advised_inside_small_pages_too():
    from gnncore.prefault import huge_page_array

    with small_pages():
        array = huge_page_array(SIZE // 8, np.uint64)
        assert array.shape == (SIZE // 8,) and array.dtype == np.uint64
        assert _advised_huge(array)  # a shuffle's buffer: random swaps over all of it
        assert not _advised_huge(np.empty(SIZE, np.uint8))
