"""Files hashed past the page cache (:mod:`gnncore.store.direct_read`): the digest
of the bytes whatever the file's size against the blocks, and the page cache
taken over where the filesystem refuses direct reads."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from gnncore.store import direct_read
from gnncore.store.direct_read import sha256_past_cache
from gnncore.store.direct_write import ALIGNMENT, DIRECT_ENV, DirectWriter

BLOCK = 4 * ALIGNMENT  # small blocks, so that a file crosses many turns


def _file(path: Path, size: int, seed: int = 0) -> bytes:
    data = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()
    path.write_bytes(data)
    return data


@pytest.mark.parametrize(
    "size",
    [0, 1, ALIGNMENT - 1, ALIGNMENT, ALIGNMENT + 1, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 5],
)
def test_the_digest_is_the_files_sha256(tmp_path: Path, size: int) -> None:
    data = _file(tmp_path / "data.bin", size, seed=size)
    got = sha256_past_cache(tmp_path / "data.bin", block_bytes=BLOCK)
    assert got == hashlib.sha256(data).hexdigest()


@pytest.mark.usefixtures("direct_io")
def test_a_file_written_past_the_cache_is_read_past_it(tmp_path: Path, monkeypatch) -> None:
    data = np.arange(5 * BLOCK, dtype=np.uint8).tobytes() + b"tail"
    with DirectWriter(tmp_path / "out.bin", staging_bytes=BLOCK) as out:
        out.write(data)

    def buffered(path):  # the fallback must not be taken
        raise AssertionError(f"{path} was read through the page cache")

    monkeypatch.setattr(direct_read, "sha256_of", buffered)
    got = sha256_past_cache(tmp_path / "out.bin", block_bytes=BLOCK)
    assert got == hashlib.sha256(data).hexdigest()


def test_switched_off_it_reads_through_the_page_cache(tmp_path: Path, monkeypatch) -> None:
    data = _file(tmp_path / "data.bin", BLOCK + 7)
    monkeypatch.setenv(DIRECT_ENV, "0")
    real_open = os.open

    def no_direct_expected(path, flags, *args):
        assert not flags & getattr(os, "O_DIRECT", 0), "a direct read was tried"
        return real_open(path, flags, *args)

    monkeypatch.setattr(direct_read.os, "open", no_direct_expected)
    assert sha256_past_cache(tmp_path / "data.bin") == hashlib.sha256(data).hexdigest()


@pytest.mark.usefixtures("refuse_direct_opens")
def test_a_filesystem_refusing_direct_opens_gets_plain_reads(tmp_path: Path) -> None:
    data = _file(tmp_path / "data.bin", 2 * BLOCK + 3)
    got = sha256_past_cache(tmp_path / "data.bin", block_bytes=BLOCK)
    assert got == hashlib.sha256(data).hexdigest()


@pytest.mark.usefixtures("direct_io")
def test_a_device_refusing_direct_reads_gets_plain_reads(tmp_path: Path, monkeypatch) -> None:
    data = _file(tmp_path / "data.bin", 3 * BLOCK)

    def refuse(fd, buffers, offset):  # some filesystems open O_DIRECT, then refuse
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(direct_read.os, "preadv", refuse)
    got = sha256_past_cache(tmp_path / "data.bin", block_bytes=BLOCK)
    assert got == hashlib.sha256(data).hexdigest()


@pytest.mark.usefixtures("direct_io")
def test_a_failed_read_past_the_first_is_raised(tmp_path: Path, monkeypatch) -> None:
    _file(tmp_path / "data.bin", 4 * BLOCK)
    real_preadv = os.preadv

    def fail_later(fd, buffers, offset):
        if offset > 0:
            raise OSError(errno.EIO, "Input/output error")
        return real_preadv(fd, buffers, offset)

    monkeypatch.setattr(direct_read.os, "preadv", fail_later)
    with pytest.raises(OSError, match="Input/output error"):
        sha256_past_cache(tmp_path / "data.bin", block_bytes=BLOCK)
