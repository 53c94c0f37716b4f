"""A stage started under a memory budget hands freed buffers back to the system.

glibc raises its mmap threshold after a large block is freed, so the next
buffers of that size come from the heap, and blocks freed below a live one stay
there: out-of-core training grew by hundreds of MiB over an epoch that way
(gnncore/heap.py). :meth:`gnncore.usage.StageBudget.start` with a budget fixes
the threshold; each case runs in a fresh interpreter (a clean heap)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="the mmap threshold is glibc's"
)

CHILD = """
import json, sys
import numpy as np
from gnncore.usage import StageBudget, current_rss_bytes

StageBudget.start(int(sys.argv[1]) or None)
first = np.ones(4 << 20, dtype=np.uint8)  # mapped, then freed: glibc raises its threshold
del first
before = current_rss_bytes()
blocks = [np.ones(3 << 20, dtype=np.uint8) for _ in range(4)]
del blocks[:3]  # freed below the live fourth block
print(json.dumps({"kept": current_rss_bytes() - before}))
"""


def _kept_after_frees(budget: int) -> int:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(budget)], capture_output=True, text=True, check=True
    )
    return int(json.loads(out.stdout.strip().splitlines()[-1])["kept"])


def test_a_budgeted_stage_returns_freed_buffers_that_an_unbudgeted_one_keeps() -> None:
    mib = 1 << 20
    budgeted = _kept_after_frees(1 << 30)
    unbudgeted = _kept_after_frees(0)
    # One live 3 MiB block either way; without the budget the three freed ones stay too.
    assert budgeted < 5 * mib, budgeted
    assert unbudgeted > 8 * mib, unbudgeted
