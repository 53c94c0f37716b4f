"""``gnncore partition`` keeps out of its process what partitioning does not use
(issue 28, item 2): Polars, PyArrow, torch, PyG, MLflow and pandas are tens of
MiB of RSS each, every one of them on the whole command's peak."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gnncore.heap import fix_mmap_threshold, trim_heap
from gnncore.partition.grem import plan as grem_plan
from gnncore.partition.grem.plan import cluster_csr
from tests.conftest import planted_graph

HEAVY = ("polars", "pyarrow", "torch", "torch_geometric", "mlflow", "pandas")


def test_the_partition_verb_imports_none_of_the_heavy_libraries(tmp_path: Path) -> None:
    graph = planted_graph(tmp_path / "g", num_nodes=300)
    code = (
        "import json, sys\n"
        "from gnncore.cli.main import main\n"
        f"rc = main(['partition', {str(graph)!r}, {str(tmp_path / 'out')!r}, "
        "'--method', 'grem', '--parts', '4', '--chunk', '0.2', '--no-progress'])\n"
        "print(json.dumps([rc, sorted(m for m in sys.modules "
        f"if m.split('.')[0] in {HEAVY!r})]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    rc, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert rc == 0, done.stderr
    assert (tmp_path / "out" / "assignment.npy").exists()
    assert loaded == [], f"the partition verb imported {loaded}"


def _lexsort_csr(keys: np.ndarray, counts: np.ndarray, k: int) -> list[np.ndarray]:
    """The plan's CSR as NumPy built it before (concatenate, lexsort, gathers)."""
    a, b = keys // k, keys % k
    src, dst = np.concatenate([a, b]), np.concatenate([b, a])
    order = np.lexsort((dst, src))
    xadj = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=k), out=xadj[1:])
    return [xadj, dst[order], np.concatenate([counts, counts])[order]]


def test_the_plans_cluster_csr_is_the_lexsorted_one_metis_got_before() -> None:
    rng = np.random.default_rng(3)
    k = 500
    a, b = rng.integers(0, k, 4000), rng.integers(0, k, 4000)
    keys = np.unique(np.minimum(a, b)[a != b] * k + np.maximum(a, b)[a != b])
    counts = rng.integers(1, 50, len(keys))
    got = cluster_csr(keys, counts, k)
    for mine, reference in zip(got, _lexsort_csr(keys, counts, k), strict=True):
        assert mine.dtype == np.int64 and np.array_equal(mine, reference)


def test_trimming_in_blocks_keeps_what_one_block_kept(monkeypatch) -> None:
    rng = np.random.default_rng(5)
    k = 300
    a, b = rng.integers(0, k, 6000), rng.integers(0, k, 6000)
    keys = np.unique(np.minimum(a, b)[a != b] * k + np.maximum(a, b)[a != b])
    counts, sizes = rng.integers(1, 9, len(keys)), rng.integers(1, 40, k)
    whole = grem_plan.trim_cluster_graph(keys, counts, sizes, len(keys) // 3)
    monkeypatch.setattr(grem_plan, "TRIM_BLOCK", 7)
    blocked = grem_plan.trim_cluster_graph(keys, counts, sizes, len(keys) // 3)
    assert len(whole[0]) <= len(keys) // 3 < len(keys)
    for x, y in zip(whole, blocked, strict=True):
        assert np.array_equal(x, y)


_HEAP_PROBE = """
import json
import numpy as np
from gnncore.heap import fix_mmap_threshold

def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) << 10 for l in f if l.startswith("VmRSS:"))

def held_after_frees():
    big = np.ones(16 << 17)  # 16 MiB: freeing it raises glibc's own threshold to 16 MiB
    del big
    base = rss()
    blocks = [np.ones(3 << 17) for _ in range(40)]  # 40 blocks of 3 MiB
    last = blocks[-1]  # all but the last freed
    del blocks
    held = rss() - base
    del last
    return held

default = held_after_frees()
fixed = fix_mmap_threshold()
print(json.dumps([default, fixed, held_after_frees()]))
"""


def test_a_fixed_mmap_threshold_returns_freed_blocks_to_the_system() -> None:
    if not sys.platform.startswith("linux") or not trim_heap():
        pytest.skip("glibc's malloc_trim/mallopt are absent here")
    done = subprocess.run(
        [sys.executable, "-c", _HEAP_PROBE], capture_output=True, text=True, check=True
    )
    held_default, fixed, held_fixed = json.loads(done.stdout)
    assert fixed is True
    # glibc's raised threshold kept the 39 freed 3 MiB blocks in the heap (117 MiB);
    # mapped one by one, they went back: the last block alone is held
    assert held_default > 64 << 20
    assert held_fixed < 16 << 20


def test_fix_mmap_threshold_refuses_a_threshold_glibc_would_not_take() -> None:
    with pytest.raises(ValueError):
        fix_mmap_threshold(0)
    with pytest.raises(ValueError):
        fix_mmap_threshold(64 << 20)
