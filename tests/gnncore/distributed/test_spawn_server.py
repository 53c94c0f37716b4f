"""Both launchers fork their ranks from a fork server that has imported torch and
PyG once; each rank runs with the launching process's environment, working
directory, thread count and output, as a spawned rank would, and names itself
for ``ps``."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gnncore.distributed.launch import elastic_run, spawn_local
from gnncore.distributed.launch.forked import RANK_NAME, RANK_PRELOAD, start_rank_server


def _spawned(fn: Callable[..., Any], args: tuple[Any, ...]) -> list[Any]:
    return spawn_local(fn, 2, args, run_timeout=120)


def _elastic(fn: Callable[..., Any], args: tuple[Any, ...]) -> list[Any]:
    results = elastic_run(fn, 2, args, run_timeout=120)
    return [results[rank] for rank in sorted(results)]


LAUNCHERS = pytest.mark.parametrize("launch", [_spawned, _elastic], ids=["spawn", "torchrun"])


def _probe(rank: int, world: int, name: str) -> tuple[str | None, int, str, list[bool], str]:
    import torch

    # Before this function imported anything heavy: what the rank came with.
    preloaded = [module in sys.modules for module in RANK_PRELOAD]
    comm = Path("/proc/self/comm").read_text().strip()
    return os.environ.get(name), torch.get_num_threads(), os.getcwd(), preloaded, comm


@LAUNCHERS
def test_ranks_take_the_launching_environment_not_the_servers(
    launch: Callable[..., list[Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    start_rank_server()  # its environment is the one before the changes below
    monkeypatch.setenv("GNNCORE_TEST_PROBE", "set after the server started")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.chdir(tmp_path)
    ranks = launch(_probe, ("GNNCORE_TEST_PROBE",))
    for rank, (value, threads, cwd, preloaded, comm) in enumerate(ranks):
        assert value == "set after the server started"
        assert threads == 2
        assert cwd == str(tmp_path)
        assert all(preloaded), dict(zip(RANK_PRELOAD, preloaded, strict=True))
        assert comm == RANK_NAME.format(rank=rank)


def _say(rank: int, world: int) -> int:
    # print writes the text and the newline apart: whole lines need the line buffer
    print(f"rank {rank} of {world} says hello")
    print(f"rank {rank} of {world} warns", file=sys.stderr)
    return rank


@LAUNCHERS
def test_rank_output_goes_where_the_launchers_goes_now(
    launch: Callable[..., list[Any]], capfd: pytest.CaptureFixture[str]
) -> None:
    start_rank_server()  # started before this test's capture: its output is elsewhere
    assert launch(_say, ()) == [0, 1]
    out, err = capfd.readouterr()
    assert {"rank 0 of 2 says hello", "rank 1 of 2 says hello"} <= set(out.splitlines()), out
    assert {"rank 0 of 2 warns", "rank 1 of 2 warns"} <= set(err.splitlines())
