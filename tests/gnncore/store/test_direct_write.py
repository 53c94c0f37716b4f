"""Output files written past the page cache (:mod:`gnncore.store.direct_write`): the
same bytes as a plain write whatever the sizes of the pieces, and the page cache
taken over where the filesystem or the device refuses direct I/O."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest

from gnncore.store import direct_write
from gnncore.store.direct_write import ALIGNMENT, DIRECT_ENV, DirectWriter

STAGING = 4 * ALIGNMENT  # small turns, so that a test crosses many of them


def _pieces(seed: int, sizes: list[int]) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size, dtype=np.uint8).tobytes() for size in sizes]


@pytest.mark.parametrize(
    "sizes",
    [
        [],  # an empty file
        [1],
        [ALIGNMENT - 1],
        [ALIGNMENT],
        [ALIGNMENT + 1],
        [STAGING],  # exactly one turn: nothing left for the padded tail
        [STAGING * 2 + 17],
        [128, 3 * STAGING + 5, 0, 7, STAGING - 128, 1],  # a header, then odd pieces
    ],
)
def test_the_file_holds_exactly_what_was_written(tmp_path: Path, sizes: list[int]) -> None:
    pieces = _pieces(len(sizes), sizes)
    path = tmp_path / "out.bin"
    with DirectWriter(path, staging_bytes=STAGING) as out:
        for piece in pieces:
            out.write(piece)
        assert out.written == sum(sizes)
    assert path.read_bytes() == b"".join(pieces)


def test_arrays_are_written_as_their_bytes(tmp_path: Path) -> None:
    pairs = np.arange(3 * STAGING, dtype=np.int32).reshape(-1, 2)  # 2-D, C-ordered
    with DirectWriter(tmp_path / "pairs.bin", staging_bytes=STAGING) as out:
        out.write(pairs)
        out.write(pairs[:3])
    got = np.fromfile(tmp_path / "pairs.bin", dtype=np.int32).reshape(-1, 2)
    np.testing.assert_array_equal(got, np.concatenate([pairs, pairs[:3]]))


@pytest.mark.usefixtures("direct_io")
def test_direct_io_is_used_where_the_filesystem_has_it(tmp_path: Path) -> None:
    with DirectWriter(tmp_path / "out.bin", staging_bytes=STAGING) as out:
        assert out.direct
        out.write(b"x" * (STAGING + 3))
    assert (tmp_path / "out.bin").read_bytes() == b"x" * (STAGING + 3)


def test_switched_off_it_writes_through_the_page_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(DIRECT_ENV, "0")
    with DirectWriter(tmp_path / "out.bin", staging_bytes=STAGING) as out:
        assert not out.direct
        out.write(b"abc")
    assert (tmp_path / "out.bin").read_bytes() == b"abc"


@pytest.mark.usefixtures("refuse_direct_opens")
def test_a_filesystem_refusing_direct_io_at_open_gets_plain_writes(tmp_path: Path) -> None:
    pieces = _pieces(3, [100, STAGING, 9])
    with DirectWriter(tmp_path / "out.bin", staging_bytes=STAGING) as out:
        assert not out.direct
        for piece in pieces:
            out.write(piece)
    assert (tmp_path / "out.bin").read_bytes() == b"".join(pieces)


@pytest.mark.usefixtures("direct_io")
def test_a_device_refusing_the_first_direct_write_gets_the_rest_buffered(
    tmp_path: Path, monkeypatch
) -> None:
    real_write = os.write
    refused: list[int] = []

    def refuse_once(fd: int, data) -> int:  # the first write is a direct one
        if not refused:
            refused.append(fd)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, data)

    monkeypatch.setattr(direct_write.os, "write", refuse_once)
    pieces = _pieces(4, [STAGING + 1, 2 * STAGING, 5])
    with DirectWriter(tmp_path / "out.bin", staging_bytes=STAGING) as out:
        for piece in pieces:
            out.write(piece)
    assert refused and not out.direct
    assert (tmp_path / "out.bin").read_bytes() == b"".join(pieces)


def test_a_failed_write_is_raised_to_the_writer(tmp_path: Path, monkeypatch) -> None:
    def full(fd: int, data) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(direct_write.os, "write", full)
    out = DirectWriter(tmp_path / "out.bin", staging_bytes=STAGING)
    with pytest.raises(OSError, match="No space left"):
        with out:
            out.write(b"y" * (3 * STAGING))  # the error of a turn surfaces at a later one
    out.abort()  # idempotent after the error closed it


def test_a_writer_asked_for_plain_writes_uses_the_page_cache(tmp_path: Path) -> None:
    with DirectWriter(tmp_path / "out.bin", staging_bytes=STAGING, direct=False) as out:
        assert not out.direct
        out.write(b"plain")
    assert (tmp_path / "out.bin").read_bytes() == b"plain"
