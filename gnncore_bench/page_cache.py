"""Drop files' page cache, so that the next read of a benchmark comes from storage
(a cgroup is charged only for the pages its processes bring in: a file cached by
an earlier run is free). :func:`gnncore_bench.limits.run_limited` evicts its
``evict`` paths with :func:`evict_page_cache` before the command starts."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

StrPath = str | os.PathLike[str]


def evict_page_cache(paths: Iterable[StrPath]) -> int:
    """Drop the page cache of files, so the next read comes from storage.

    Each path is a file or a directory (all regular files under it,
    recursively). Each file is flushed (``fdatasync``: dirty pages cannot be
    dropped) and advised ``POSIX_FADV_DONTNEED``. Returns the number of files.
    Pages mapped by a running process stay; tmpfs files cannot be evicted.
    """
    count = 0
    for path in _regular_files(paths):
        _evict_file(path)
        count += 1
    return count


def _regular_files(paths: Iterable[StrPath]) -> Iterator[Path]:
    for path in map(Path, paths):
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if _is_regular(p))
        elif _is_regular(path):
            yield path
        elif not path.exists():
            raise FileNotFoundError(f"cannot evict {path}: no such file or directory")


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def _evict_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            os.fdatasync(fd)
        except OSError:  # some filesystems refuse a sync on a read-only descriptor
            pass
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
