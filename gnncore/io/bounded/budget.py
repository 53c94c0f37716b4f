"""How a bounded-memory run sizes its buffers from the memory budget."""

from __future__ import annotations

MIN_MEMORY_BUDGET = 64 << 10
"""The smallest budget accepted (tests use tiny ones to force many runs)."""
MAX_BATCH_ROWS = 1 << 21
MIN_BATCH_ROWS = 1024


def batch_rows(budget: int) -> int:
    """Rows of a parse batch / edge chunk / block of the later passes under ``budget``."""
    return int(min(max(budget // 96, MIN_BATCH_ROWS), MAX_BATCH_ROWS))
