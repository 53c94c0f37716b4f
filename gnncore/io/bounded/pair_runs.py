"""Run files of int64 pairs: sorted, deduplicated, merged (the path of node
ids past ``2**32``, and the distinct ids of :mod:`gnncore.io.bounded.ids`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gnncore.store.edge_keys import run_count
from gnncore.store.external_sort import BYTES_PER_PAIR, merge_runs_down

RUN_HEADER_BYTES = 32


def run_pairs(path: Path | None) -> np.ndarray:
    """A run file's pairs as a read-only ``[count, 2]`` int64 memory map."""
    count = 0 if path is None else run_count(path)
    if count == 0 or path is None:
        return np.zeros((0, 2), dtype=np.int64)
    return np.memmap(path, dtype=np.int64, mode="r", offset=RUN_HEADER_BYTES, shape=(count, 2))


class RunSorter:
    """Pairs buffered, spilled as sorted deduplicated runs and merged into one run file.

    ``key_order`` is ``"src_dst"`` (sorted by ``(a, b)``) or ``"dst_src"``.
    """

    def __init__(
        self, directory: Path, name: str, budget_bytes: int, key_order: str, max_fan_in: int = 64
    ) -> None:
        self.directory = directory
        self.name = name
        self.budget_bytes = int(budget_bytes)
        self.key_order = key_order
        self.max_fan_in = max(int(max_fan_in), 2)
        self._capacity = max(self.budget_bytes // BYTES_PER_PAIR, 2)
        self._a: np.ndarray | None = np.empty(self._capacity, dtype=np.int64)
        self._b: np.ndarray | None = np.empty(self._capacity, dtype=np.int64)
        self._fill = 0
        self._serial = 0
        self.runs: list[Path] = []
        self.runs_written = 0

    def _path(self) -> Path:
        path = self.directory / f"{self.name}-{self._serial:06d}.run"
        self._serial += 1
        return path

    def add(self, a: np.ndarray, b: np.ndarray) -> None:
        assert self._a is not None and self._b is not None
        start = 0
        while start < len(a):
            room = self._capacity - self._fill
            if room == 0:
                self._spill()
                continue
            n = min(room, len(a) - start)
            self._a[self._fill : self._fill + n] = a[start : start + n]
            self._b[self._fill : self._fill + n] = b[start : start + n]
            self._fill += n
            start += n

    def _spill(self) -> None:
        from gnncore import _C  # lazy: the compiled extension is optional (require_csrc)

        if self._fill == 0 or self._a is None or self._b is None:
            return
        path = self._path()
        _C.write_run(self._a[: self._fill], self._b[: self._fill], str(path), self.key_order)
        self.runs.append(path)
        self.runs_written += 1
        self._fill = 0

    def finish(self) -> Path | None:
        """Merge everything into one run file (``None`` when no pair was added)."""
        self._spill()
        self._a = self._b = None
        self.runs = merge_runs_down(self.runs, 1, self.max_fan_in, self.budget_bytes, self._path)
        return self.runs[0] if self.runs else None
