"""The node ids of endpoint names through one range of the sorted names
(:class:`RangeLookup`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gnncore.io.bounded.names import NAME_COLUMN
from gnncore.lazy import lazy_module

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")

HASH_SEED = 0x9E3779B9


class RangeLookup:
    """The node ids of endpoint names, through one range of the sorted names.

    A hash join on 64-bit hashes of the names (Polars' ``Series.hash``: about
    twice as fast as joining the strings) when the range's hashes are distinct,
    else on the names themselves. Exact either way: every endpoint is one of the
    sorted names, and only endpoints between the range's first and last name --
    names of this range -- are looked up, so equal hashes are equal names.

    Args:
        table (pl.DataFrame): The range (:meth:`SortedNames.range_table`).
        whole (bool): The range holds every name (no bounds to check).
        by_hash (bool, optional): Join on hashes (``True``; refused when two of
            the range's names share a hash) or on names (``False``); default:
            on hashes when they are distinct.
    """

    def __init__(self, table: pl.DataFrame, whole: bool, by_hash: bool | None = None) -> None:
        names = table[NAME_COLUMN]
        hashes = names.hash(HASH_SEED)
        distinct = hashes.n_unique() == len(hashes)
        if by_hash and not distinct:
            raise ValueError("two names of the range share a hash: join on the names")
        self.by_hash = distinct if by_hash is None else by_hash
        key = hashes if self.by_hash else names
        self.table = pl.DataFrame({"key": key, "id": table["id"]})
        self.bounds = None if whole or len(names) == 0 else (names[0], names[-1])

    def _keys(self, names: pl.Series) -> pl.DataFrame:
        return (names.hash(HASH_SEED) if self.by_hash else names).to_frame("key")

    def ids(self, names: pl.Series) -> np.ndarray:
        """int64 node ids of ``names``, ``-1`` for names outside the range."""
        if self.bounds is None:
            found = self._keys(names).join(self.table, on="key", how="left",
                                           maintain_order="left")["id"]  # fmt: skip
            return found.fill_null(-1).to_numpy(writable=True)
        first, last = self.bounds
        inside = ((names >= first) & (names <= last)).to_numpy()
        ids = np.full(len(names), -1, dtype=np.int64)
        part = self._keys(names.filter(pl.Series(inside)))
        found = part.join(self.table, on="key", how="left", maintain_order="left")["id"]
        ids[inside] = found.fill_null(-1).to_numpy()
        return ids
