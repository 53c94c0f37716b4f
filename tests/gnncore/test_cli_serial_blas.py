"""Verbs with no BLAS work start NumPy without OpenBLAS's thread pool, whose idle
threads spin on the cores the verb's own threads want (gnncore.cli.main.serial_blas)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = """
import os, sys
from gnncore.cli.main import serial_blas
serial_blas(sys.argv[1])
import numpy
print(os.environ.get("OPENBLAS_NUM_THREADS"), len(os.listdir("/proc/self/task")))
"""


def _fresh_process(verb: str, **env: str) -> tuple[str, int]:
    """``(OPENBLAS_NUM_THREADS, threads)`` of a new process once NumPy is imported."""
    # OpenBLAS also takes its thread count from these (the suite sets OMP_NUM_THREADS)
    limits = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
    environ = {k: v for k, v in os.environ.items() if k not in limits}
    environ.update(env)
    out = subprocess.run(
        [sys.executable, "-c", PROBE, verb], env=environ, capture_output=True, text=True, check=True
    ).stdout.split()
    return out[0], int(out[1])


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc")
def test_ingest_starts_numpy_without_the_blas_threads_training_gets() -> None:
    setting, ingest_threads = _fresh_process("ingest")
    assert setting == "1"
    setting, train_threads = _fresh_process("train")
    assert setting == "None"  # training's NumPy keeps its threads
    if (os.cpu_count() or 1) > 1:
        assert ingest_threads < train_threads


def test_a_users_own_setting_wins() -> None:
    assert _fresh_process("ingest", OPENBLAS_NUM_THREADS="2")[0] == "2"
