"""Fresh pages faulted in ahead of their writer, on another core.

The first write to a page of fresh memory costs a page fault. On a virtual
machine whose balloon driver reports freed memory back to the host (free page
reporting: Firecracker, many cloud VMs), the host faults it in too: on the
development VM of docs/BENCHMARKS.md the first touch of 512 MiB took 1.5-2.1 s
of system time, against 0.1 s for memory the guest had freed a moment before.
A sort that writes a fresh 160 MB scratch spends as long faulting it as
sorting.

:class:`Prefaulter` moves that cost off the writer's thread: a thread of its
own populates the pages of a set of arrays up to a mark kept a little ahead of
what the writer has filled (``madvise(MADV_POPULATE_WRITE)``, Linux 5.14+, the
GIL released), so the faults run on a core the writer leaves idle (a parse
waiting on its reader, a sort's serial parts). Contents are never changed,
and pages already present are left alone, so the writer and the thread may
touch the same range at once. Where the kernel lacks the call the thread
stops at its first try and the writer faults its pages itself, as before.

Most of that cost was huge pages'. NumPy advises ``MADV_HUGEPAGE`` on every
array of 4 MiB or more, and a 2 MiB page comes from the high-order free blocks
that the balloon reports to the host (order 11 on that VM), so the host faults
in all of it: 2.1 ms a MiB on the first touch, against 0.31 ms for 4 KiB pages
taken from the same free memory (``benchmarks/first_touch.py``).
:func:`small_pages` turns NumPy's advice off around a stage whose arrays are
read and written in sequence (ingestion's key buffers, sort scratch and
shuffle), which gain nothing from a larger TLB reach to pay that with.
"""

from __future__ import annotations

import ctypes
import mmap
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any

import numpy as np

from gnncore.heap import libc_function

#: ``madvise`` advice: fault the range in for writing (Linux ``mman-common.h``).
MADV_POPULATE_WRITE = 23
#: Elements populated ahead of the writer however little it has filled.
MIN_LEAD = 1 << 16
#: Bytes populated per call: the thread notices :meth:`Prefaulter.close` between calls.
POPULATE_STEP = 8 << 20


@cache
def _madvise() -> Any:
    """libc's ``madvise`` with its argument types (the GIL is released during the
    call), or ``None`` where this process has no such symbol."""
    fn = libc_function("madvise")
    if fn is not None:
        fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        fn.restype = ctypes.c_int
    return fn


def populate(array: np.ndarray, start: int, stop: int) -> bool:
    """Fault in for writing the pages under elements ``[start, stop)`` of the
    C-contiguous ``array`` (its contents unchanged): whole pages, so a range's
    first and last pages are populated too, as far as they hold ``array``.

    Returns:
        ``False`` where the kernel or C library cannot (then nothing was done).
    """
    madvise = _madvise()
    if madvise is None or stop <= start:
        return madvise is not None
    page = mmap.PAGESIZE
    base = array.ctypes.data
    first = (base + start * array.itemsize) // page * page
    last = -(-(base + stop * array.itemsize) // page) * page
    return madvise(first, last - first, MADV_POPULATE_WRITE) == 0


class Prefaulter:
    """Keeps the pages of ``arrays`` (C-contiguous, the same length) populated
    ahead of the mark :meth:`advance` gives, on a thread of its own.

    The lead is as many elements as are filled, at least ``MIN_LEAD`` and at
    most ``ahead``: it bounds the memory touched before it is needed (a small
    input is not given ``ahead`` elements of pages it never uses), and the
    thread never passes the arrays' length. :meth:`close` stops it (the pages
    it populated stay). Use as a context manager or call :meth:`close`.
    """

    def __init__(self, arrays: Sequence[np.ndarray], ahead: int) -> None:
        if not arrays or len({len(a) for a in arrays}) != 1:
            raise ValueError("Prefaulter takes arrays of one length")
        if any(not a.flags.c_contiguous for a in arrays):
            raise ValueError("Prefaulter takes C-contiguous arrays")
        self._arrays = list(arrays)
        self._length = len(arrays[0])
        self._step = max(POPULATE_STEP // max(a.itemsize for a in arrays), 1)
        self._ahead = max(int(ahead), 0)
        self._target = 0
        self._done = 0
        self._closed = False
        self._wake = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="gnncore-prefault", daemon=True)
        self._thread.start()

    @property
    def populated(self) -> int:
        """Elements of every array populated so far."""
        return self._done

    def advance(self, filled: int) -> None:
        """The writer has filled ``filled`` elements: populate ahead of them."""
        filled = int(filled)
        target = min(filled + min(max(filled, MIN_LEAD), self._ahead), self._length)
        with self._wake:
            if target > self._target:
                self._target = target
                self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._closed and self._target <= self._done:
                    self._wake.wait()
                if self._closed:
                    return
                target = self._target
            while self._done < target and not self._closed:
                stop = min(self._done + self._step, target)
                if not all(populate(a, self._done, stop) for a in self._arrays):
                    self._closed = True  # the kernel cannot: the writer faults its own pages
                    return
                self._done = stop

    def close(self) -> None:
        """Stop the thread (after the call it is in) and wait for it; idempotent."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join()
        self._arrays = []  # their memory is the caller's to free

    def __enter__(self) -> Prefaulter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: ``madvise`` advice: back the range with transparent huge pages.
MADV_HUGEPAGE = 14
#: :func:`huge_page_array` advises huge pages from this size up: past the
#: reach of a second-level TLB in 4 KiB pages (2,048 entries: 8 MiB) many times over.
HUGE_PAGE_MIN_BYTES = 64 << 20


def huge_page_array(length: int, dtype: np.dtype | type) -> np.ndarray:
    """A fresh, untouched 1-D array advised ``MADV_HUGEPAGE`` whatever
    :func:`small_pages` says, from :data:`HUGE_PAGE_MIN_BYTES` up: for an array
    read and written at random many times over (the bounded shuffle's bucket
    buffer), where 2 MiB pages save a TLB miss an access and their first touch
    is paid once. A smaller one stays in 4 KiB pages (within the TLB's reach there,
    a huge page's dearer first touch buys nothing). Advisory: where the kernel
    or C library cannot, the array is in 4 KiB pages."""
    array = np.empty(length, dtype=dtype)
    madvise = _madvise()
    if madvise is not None and array.nbytes >= HUGE_PAGE_MIN_BYTES:
        start = -(-array.ctypes.data // mmap.PAGESIZE) * mmap.PAGESIZE
        stop = (array.ctypes.data + array.nbytes) // mmap.PAGESIZE * mmap.PAGESIZE
        madvise(start, stop - start, MADV_HUGEPAGE)
    return array


_small_pages_lock = threading.Lock()
_small_pages_depth = 0
_small_pages_saved = True


@contextmanager
def small_pages() -> Iterator[None]:
    """NumPy arrays allocated inside are not advised ``MADV_HUGEPAGE`` (NumPy's
    default for arrays of 4 MiB or more): their memory is faulted in 4 KiB pages.
    Process-wide while any such block is open (nested and concurrent blocks
    are counted); NumPy's setting is restored when the last one ends. A no-op
    where NumPy lacks the switch."""
    global _small_pages_depth, _small_pages_saved
    multiarray = getattr(getattr(np, "_core", None), "multiarray", None)
    switch = getattr(multiarray, "_set_madvise_hugepage", None)
    if switch is None:
        yield
        return
    with _small_pages_lock:
        if _small_pages_depth == 0:
            _small_pages_saved = bool(switch(False))
        _small_pages_depth += 1
    try:
        yield
    finally:
        with _small_pages_lock:
            _small_pages_depth -= 1
            if _small_pages_depth == 0:
                switch(_small_pages_saved)


__all__ = [
    "MADV_HUGEPAGE",
    "MADV_POPULATE_WRITE",
    "Prefaulter",
    "huge_page_array",
    "populate",
    "small_pages",
]
