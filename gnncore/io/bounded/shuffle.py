"""``edges_shuffled.npy`` from sorted canonical keys: numpy's permutation of
the seed when the pairs fit, else the bounded bucket shuffle."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from gnncore.io.bounded.npy_stream import HashedNpyWriter
from gnncore.store.edge_keys import (
    KEY_SHIFT,
    MINOR_MASK,
    KeySorter,
    bucket_shuffle,
    shuffle_buckets,
    shuffle_keys,
    split_keys,
)
from gnncore.store.write_checks import WrittenCheck, pairs_ok
from gnncore.store.writer import GraphDirWriter, index_dtype

EXACT_SHUFFLE_BYTES = 32 << 20
"""Pairs up to this size (4M) are shuffled by numpy's exact permutation in
memory whatever the budget, as small graphs always were (tests force tiny
budgets and compare with the in-memory path byte for byte); larger ones only
within half the budget, else by the bounded bucket shuffle."""


@dataclass
class Shuffle:
    """The distinct unordered pairs as keys in shuffled order, array after array:
    ``buckets`` is 0 for numpy's permutation of the seed, else the number of
    buckets of :func:`~gnncore.store.edge_keys.bucket_shuffle`."""

    count: int
    arrays: Iterator[np.ndarray]
    buckets: int
    pairs: KeySorter | None
    """The directed graph's own pair sorter, released once the arrays are read."""


def _bucket_shuffled(pairs: KeySorter, budget: int) -> bool:
    """Whether the finished ``pairs`` take the bounded bucket shuffle: on disk,
    and too many for numpy's permutation within half the budget."""
    return pairs.keys is None and pairs.count * 8 > max(budget // 2, EXACT_SHUFFLE_BYTES)


def scatters_from_run(canon: KeySorter, directed: bool, budget: int) -> bool:
    """Whether :func:`shuffle_pairs` takes the bounded bucket shuffle straight
    from ``canon``'s run on disk: undirected keys (no pair sorter of its own)
    too many for numpy's permutation. That pass holds a block and a write
    buffer a bucket, and reads the run through a reader of its own, so it can
    run beside the CSR."""
    return not directed and _bucket_shuffled(canon, budget)


def shuffle_pairs(
    canon: KeySorter, scratch: Path, directed: bool, seed: int, budget: int, rows: int,
    max_fan_in: int,
) -> Shuffle:  # fmt: skip
    """The order of ``edges_shuffled.npy``. Numpy's permutation of ``seed``
    (:func:`shuffle_keys`, the in-memory path's order) when the pairs are in
    memory or fit half the budget (or :data:`EXACT_SHUFFLE_BYTES`): shuffled in
    a copy (edges.parquet may still be reading the canonical keys; the copy goes
    into the sort's scratch, free once the CSR is built). Otherwise the bounded
    scatter shuffle of :func:`bucket_shuffle`, whose buckets are written here
    (the pairs read once, sequentially) and read back as the arrays are taken.
    ``canon`` is left as it is."""
    if directed:
        pairs = KeySorter(scratch, "pairs", budget // 4, max_fan_in)
        for block in canon.blocks(rows):
            a, b = split_keys(block)
            pairs.add_edges(a, b, unordered=True)
        pairs.finish()
    else:
        pairs = canon
    num_pairs = pairs.count
    own = pairs if pairs is not canon else None
    if _bucket_shuffled(pairs, budget):
        arrays = bucket_shuffle(pairs.blocks(rows), num_pairs, seed, budget, scratch, "shuffle")
        return Shuffle(num_pairs, arrays, shuffle_buckets(num_pairs, budget), own)
    keys: np.ndarray
    if pairs.keys is not None and own is not None:  # the directed pairs: in place
        keys = pairs.keys
    else:
        spare = canon.scratch
        if spare is not None and len(spare) >= num_pairs:
            keys = spare[:num_pairs]
        else:
            keys = np.empty(num_pairs, dtype=np.uint64)
        at = 0
        for block in pairs.blocks(rows):
            keys[at : at + len(block)] = block
            at += len(block)
    shuffle_keys(keys, seed)
    return Shuffle(num_pairs, iter([keys]), 0, own)


def write_shuffled(writer: GraphDirWriter, shuffle: Shuffle, num_nodes: int, rows: int) -> int:
    """Write ``edges_shuffled.npy`` (``[count, 2]`` pairs) from the shuffled keys
    (rotated in place into int32 pairs when the ids fit); returns the pair count."""

    int_dtype = index_dtype(num_nodes)
    path = writer.file_path("edges_shuffled.npy", "npy")
    # hashed from the blocks as they are written (each is left as it is): the
    # file is not read back for its checksum after the last one
    # and checked as they are hashed (pairs u < v of node ids): the validation
    # does not read the file back either
    check = partial(pairs_ok, num_nodes=num_nodes)
    with HashedNpyWriter(path, int_dtype, (shuffle.count, 2), check=check) as out:
        for keys in shuffle.arrays:
            _write_pairs(out, keys, int_dtype, rows)
            out.drain()  # a bucket's keys are dropped before the next is read
            del keys
        writer.set_digest("edges_shuffled.npy", out.close())
        checked = out.checked()
        if checked is not None and checked == 2 * shuffle.count:
            writer.record_check(WrittenCheck("edges_shuffled.npy", shuffle.count, num_nodes))
    if shuffle.pairs is not None:
        shuffle.pairs.release()
    return shuffle.count


def _write_pairs(out: HashedNpyWriter, keys: np.ndarray, int_dtype: np.dtype, rows: int) -> None:
    """Queue ``keys`` as ``[len(keys), 2]`` pairs on ``out``, ``rows`` at a time
    (rotated in place into int32 pairs when the ids fit). A function of its
    own so that no view of ``keys`` outlives the call: the caller drops the
    array (a bucket) before the next is read."""
    from gnncore import _C  # lazy: the compiled extension is optional (require_csrc)

    for start in range(0, len(keys), rows):
        block = keys[start : start + rows]
        if int_dtype == np.int32 and np.little_endian:
            # b << 32 | a is the int32 pair (a, b) in memory: rotated in place
            _C.transpose_keys(block, block)
            out.write(block.view(np.int32))
            continue
        pairs = np.empty((len(block), 2), dtype=int_dtype)
        pairs[:, 0] = block >> KEY_SHIFT
        pairs[:, 1] = block & MINOR_MASK
        out.write(pairs)
