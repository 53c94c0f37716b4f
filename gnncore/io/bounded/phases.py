"""Seconds per phase of a bounded-memory run (the report's ``phases``)."""

from __future__ import annotations

import time
from collections.abc import Iterable

PHASES = ("parse", "remap", "sort/dedup", "csr", "shuffle", "write", "checksums")


class Phases:
    """Seconds per phase (accumulated), in the order of ``names`` (:data:`PHASES`)."""

    def __init__(self, names: Iterable[str] = PHASES) -> None:
        self.seconds: dict[str, float] = {name: 0.0 for name in names}
        self._name: str | None = None
        self._since = 0.0

    def start(self, name: str) -> None:
        """End the running phase and start ``name``."""
        self.stop()
        self._name, self._since = name, time.perf_counter()

    def stop(self) -> None:
        if self._name is not None:
            self.seconds[self._name] += time.perf_counter() - self._since
            self._name = None

    def rounded(self) -> dict[str, float]:
        return {k: round(v, 3) for k, v in self.seconds.items()}
