"""``spawn_local``'s ranks fork from a fork server that has imported torch and PyG
once, and run with the launching process's environment, working directory and
thread count, as spawned ranks would."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gnncore.distributed.launch.spawn import RANK_PRELOAD, spawn_local, start_rank_server


def _probe(rank: int, world: int, name: str) -> tuple[str | None, int, str, list[bool]]:
    import torch

    # Before this function imported anything heavy: what the rank came with.
    preloaded = [module in sys.modules for module in RANK_PRELOAD]
    return os.environ.get(name), torch.get_num_threads(), os.getcwd(), preloaded


def test_ranks_take_the_launching_environment_not_the_servers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    start_rank_server()  # its environment is the one before the changes below
    monkeypatch.setenv("GNNCORE_TEST_PROBE", "set after the server started")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.chdir(tmp_path)
    ranks = spawn_local(_probe, 2, ("GNNCORE_TEST_PROBE",), run_timeout=120)
    for value, threads, cwd, preloaded in ranks:
        assert value == "set after the server started"
        assert threads == 2
        assert cwd == str(tmp_path)
        assert all(preloaded), dict(zip(RANK_PRELOAD, preloaded, strict=True))
