"""The sha256 of a large file read past the page cache (``O_DIRECT``).

A file written by :class:`~gnncore.store.direct_write.DirectWriter` is not in
the page cache, so hashing it afterwards reads it from the device anyway. A
buffered read would copy every byte into fresh page-cache pages (costly on a
VM whose free memory goes back to the hypervisor) and, under a memory cgroup,
push out pages that are still wanted; a direct read lands in two reused,
aligned buffers, the next block read on a thread while this one is hashed.
"""

from __future__ import annotations

import hashlib
import mmap
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gnncore.store.direct_write import ALIGNMENT, STAGING_BYTES, direct_write_enabled
from gnncore.store.manifest import sha256_of


def sha256_past_cache(path: str | os.PathLike[str], block_bytes: int = STAGING_BYTES) -> str:
    """Hex sha256 of the file ``path``, read with ``O_DIRECT`` in blocks of
    ``block_bytes`` (rounded to the alignment); through the page cache
    (:func:`~gnncore.store.manifest.sha256_of`) where the filesystem refuses
    direct reads or ``GNNCORE_DIRECT_WRITE=0``. Same digest either way."""
    path = Path(path)
    if not direct_write_enabled():
        return sha256_of(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError:  # EINVAL: no direct I/O on this filesystem
        return sha256_of(path)
    try:
        return _hash_direct(fd, path, max(block_bytes // ALIGNMENT, 1) * ALIGNMENT)
    finally:
        os.close(fd)


def _hash_direct(fd: int, path: Path, size: int) -> str:
    """The digest of the open ``fd``, block after block: block ``k + 1`` is read
    on a thread while block ``k`` is hashed (hashlib releases the GIL)."""
    length = os.fstat(fd).st_size
    digest = hashlib.sha256()
    buffers = [mmap.mmap(-1, size) for _ in range(2)]  # page-aligned
    offset = 0
    try:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="gnncore-direct-read") as io:
            try:
                pending = io.submit(os.preadv, fd, [buffers[0]], 0)
                got = pending.result() if length else 0
            except OSError:  # some filesystems open O_DIRECT but refuse the reads
                return sha256_of(path)
            turn = 0
            while got > 0:
                offset += got
                # a short read ends the file: no aligned offset is left to read at
                more = got == size and offset < length
                if more:
                    pending = io.submit(os.preadv, fd, [buffers[turn ^ 1]], offset)
                with memoryview(buffers[turn])[:got] as view:
                    digest.update(view)
                got = pending.result() if more else 0
                turn ^= 1
    finally:
        for buffer in buffers:
            buffer.close()
    if offset != length:  # the file grew or shrank while it was read
        raise OSError(f"{path}: read {offset} bytes of a {length}-byte file while hashing it")
    return digest.hexdigest()


__all__ = ["sha256_past_cache"]
