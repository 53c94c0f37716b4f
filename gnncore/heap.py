"""Freed memory goes back to the system: a bounded stage's heap does not keep it.

glibc's ``malloc`` keeps freed blocks for reuse, and after a large block is
freed it raises its own mmap threshold (up to 32 MiB), so the next buffers of
that size come from the heap and stay there once freed too. On ``gnncore
partition`` of the 20M-edge graph (p = 8, GREM, 1% chunks) the process held
65 MiB of such free heap after the clusters plan, under every later phase's
peak.

* :func:`trim_heap` hands the free heap back (``malloc_trim(0)``: a walk of
  the heap, well under a millisecond here) between phases;
* :func:`fix_mmap_threshold` keeps every block of at least 1 MiB out of the
  heap for good (``mallopt(M_MMAP_THRESHOLD)``, which also stops the dynamic
  threshold): such a block is unmapped when freed, inside a C++ call too. The
  ``gnncore partition`` verb sets it, and so does every stage that starts under
  a memory budget (:meth:`gnncore.usage.StageBudget.start`): out-of-core
  training (HierBatching, 4 of 64 partitions per mega-batch, batch 1,024,
  fan-outs 15,10, a prefetch thread) grew from 1.5 to 2.1 GiB over one epoch
  with glibc's dynamic threshold, its batches' freed tensors kept in the
  threads' heaps, and stayed at 1.47 GiB with the threshold fixed.

Both are no-ops where the C library lacks them (not glibc).
"""

from __future__ import annotations

import ctypes
from functools import cache
from typing import Any


@cache
def libc_function(name: str) -> Any:
    """The C library function ``name`` among the symbols this process has loaded
    (glibc's ``malloc_trim``, ``mallopt``, ``madvise``, ``prctl``,
    ``renameat2``), a ctypes function that releases the GIL while it runs and
    keeps ``errno`` for :func:`ctypes.get_errno`, or ``None`` where it is absent.
    The process's own symbols: no search for the library (``find_library`` runs
    ``ldconfig``)."""
    try:
        return getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError, TypeError):
        return None


#: ``mallopt``'s parameter number of the mmap threshold (glibc's malloc.h).
M_MMAP_THRESHOLD = -3
#: :func:`fix_mmap_threshold`'s default: blocks of at least 1 MiB are mapped.
MMAP_THRESHOLD = 1 << 20


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD) -> bool:
    """Serve every later allocation of at least ``threshold`` bytes by its own
    mapping, returned to the system when freed (glibc
    ``mallopt(M_MMAP_THRESHOLD, threshold)``; it also stops glibc from raising
    the threshold after large frees). Process-wide: for a process that runs a
    stage under a memory budget.

    Returns:
        ``True`` when the C library took the setting.
    """
    if not 0 < threshold <= 1 << 25:  # glibc's own bound: HEAP_MAX / 2 on 64 bits
        raise ValueError(f"threshold must be in (0, 32 MiB], got {threshold}")
    mallopt = libc_function("mallopt")
    return mallopt is not None and bool(mallopt(M_MMAP_THRESHOLD, int(threshold)))


def trim_heap() -> bool:
    """Return the C heap's free memory to the system (glibc ``malloc_trim(0)``).

    Returns:
        ``True`` when the C library has ``malloc_trim`` (whether or not it
        found memory to release), ``False`` where it is absent.
    """
    trim = libc_function("malloc_trim")
    if trim is None:
        return False
    trim(0)
    return True


__all__ = ["MMAP_THRESHOLD", "fix_mmap_threshold", "libc_function", "trim_heap"]
