"""run_task_tree: the same tree of results in one process or over spawned workers."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from gnncore.errors import GnnCoreError
from gnncore.partition.task_tree import WorkerError, check_workers, run_task_tree


def halve(context: int, task: tuple[int, int]) -> tuple[int, int, int]:
    """Split the range ``[lo, hi)`` at its middle; which process did it."""
    lo, hi = task
    if lo == context:
        raise ValueError(f"task {task} fails on purpose")
    return (lo + hi) // 2, os.getpid(), hi - lo


def die(context: None, task: int) -> int:
    if task > 0:
        os._exit(3)  # a worker killed without returning
    return task


def tree(workers: int, fail_at: int = -1) -> tuple[list[tuple[int, int]], set[int]]:
    seen: list[tuple[int, int]] = []
    pids: set[int] = set()

    def expand(task: tuple[int, int], result: tuple[int, int, int]) -> list[tuple[int, int]]:
        mid, pid, size = result
        assert size == task[1] - task[0]
        seen.append(task)
        pids.add(pid)
        return [t for t in ((task[0], mid), (mid, task[1])) if t[1] - t[0] > 1]

    run_task_tree([(0, 16), (100, 103)], halve, expand, fail_at, workers=workers)
    return seen, pids


def test_one_worker_runs_depth_first_in_this_process():
    seen, pids = tree(1)
    assert seen[:5] == [(0, 16), (0, 8), (0, 4), (0, 2), (2, 4)]
    assert seen[-2:] == [(100, 103), (101, 103)]
    assert pids == {os.getpid()}


def test_workers_run_the_same_tasks_in_other_processes():
    serial, _ = tree(1)
    parallel, pids = tree(2)
    assert sorted(parallel) == sorted(serial) and len(parallel) == 15 + 2
    assert parallel[0] == (0, 16)  # the first root runs here while the workers start
    assert os.getpid() in pids and len(pids - {os.getpid()}) >= 1


@pytest.mark.parametrize("workers", [1, 2])
def test_a_task_error_propagates(workers):
    # with workers, (4, 8) runs in a worker: only the first root runs here
    with pytest.raises(ValueError, match=r"task \(4, \d+\) fails on purpose"):
        tree(workers, fail_at=4)
    assert multiprocessing.active_children() == []


def test_a_dead_worker_is_reported_and_no_worker_is_left():
    with pytest.raises(WorkerError, match="worker process died") as raised:
        run_task_tree([0], die, lambda task, result: [1, 2], workers=2)
    assert isinstance(raised.value, GnnCoreError)  # the CLI prints it as one line
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_worker_counts_raise(bad):
    with pytest.raises(ValueError, match="workers must be an integer >= 1"):
        check_workers(bad)
