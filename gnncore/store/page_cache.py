"""Keeping a written or read file out of the page cache.

Under a memory cgroup the page cache is charged to the process: a stage that
streams a file many times its budget writes back and drops the pages it is
done with, so the cache of one file does not push the stage over its limit.
The out-of-core store writer, bounded node-table ingestion, layer-wise
inference's layer files and its part reads all do it through these two calls.
"""

from __future__ import annotations

import os


def drop_cache(fd: int, offset: int = 0, length: int = 0) -> None:
    """Ask the kernel to drop the cached clean pages of ``fd`` in
    ``[offset, offset + length)`` (``length`` 0: to the end); a no-op where
    ``posix_fadvise`` is missing."""
    if hasattr(os, "posix_fadvise"):
        try:
            os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
        except OSError:
            pass


def drop_written(fd: int) -> None:
    """Write ``fd``'s dirty pages back (``fdatasync``), then drop its cached pages."""
    os.fdatasync(fd)
    drop_cache(fd)


__all__ = ["drop_cache", "drop_written"]
