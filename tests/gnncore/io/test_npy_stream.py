"""``.npy`` files written sequentially (``gnncore.io.bounded.npy_stream``): the
bytes numpy writes, and a checksum hashed while writing that equals the file's."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from gnncore.io.bounded.npy_stream import HashedNpyWriter, npy_writer


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_hashed_writer_gives_numpy_bytes_and_their_sha256(tmp_path, dtype):
    rng = np.random.default_rng(0)
    pairs = rng.integers(0, 1000, (10_001, 2)).astype(dtype)
    expected = tmp_path / "expected.npy"
    np.save(expected, pairs)
    out = tmp_path / "edges_shuffled.npy"
    # blocks of uneven sizes; a tiny lag makes writes wait for the hashing
    with HashedNpyWriter(out, dtype, pairs.shape, lag_bytes=4096) as writer:
        for start, stop in ((0, 1), (1, 4000), (4000, 4000)):
            writer.write(pairs[start:stop])
        writer.drain()  # all hashed so far: the arrays may change now
        last = pairs[4000:].copy()
        writer.write(last)
        writer.drain()
        last[:] = -1  # hashed already: no effect on the digest
        digest = writer.close().result()
    assert out.read_bytes() == expected.read_bytes()
    assert digest == hashlib.sha256(out.read_bytes()).hexdigest()
    plain = tmp_path / "plain.npy"
    with npy_writer(plain, dtype, pairs.shape) as fh:
        pairs.tofile(fh)
    assert plain.read_bytes() == expected.read_bytes()


def test_an_error_while_writing_stops_the_hashing(tmp_path):
    out = tmp_path / "partial.npy"
    with pytest.raises(RuntimeError, match="stop"):
        with HashedNpyWriter(out, np.int64, (10,)) as writer:
            writer.write(np.arange(5, dtype=np.int64))
            raise RuntimeError("stop")
    assert writer._fh.closed
