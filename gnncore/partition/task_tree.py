"""Run a tree of tasks, each one's result making its children, over processes.

GREM's recursive bisection is such a tree: a bisection's sides are the next
level's sub-problems, and siblings are independent. METIS (pymetis) holds the
GIL, so siblings only overlap in separate processes. Workers are *spawned*
(no inherited threads, OpenMP pools or open files) and started at once, so
their start-up (importing numpy and gnncore, ~0.5 s) overlaps the root task,
which this process runs itself.

    run_task_tree([root], run=bisect, expand=apply_sides, context=shared, workers=2)
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from gnncore.errors import GnnCoreError

Task = TypeVar("Task")
Result = TypeVar("Result")

#: ``(run, context)`` of a worker process, set once by :func:`_start_worker`.
_WORKER: tuple[Callable[[Any, Any], Any], Any] | None = None


def _start_worker(
    run: Callable[[Any, Any], Any], context: Any, setup: Callable[[Any], None] | None
) -> None:
    global _WORKER
    _WORKER = (run, context)
    if setup is not None:
        setup(context)


def _run_in_worker(task: Any) -> Any:
    if _WORKER is None:  # pragma: no cover - the pool always runs the initializer
        raise RuntimeError("worker process started without its context")
    run, context = _WORKER
    return run(context, task)


def _worker_pid() -> int:
    return os.getpid()


def check_workers(workers: Any) -> int:
    """``workers`` as an int >= 1, else ``ValueError``."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    return workers


def run_task_tree(
    roots: Iterable[Task],
    run: Callable[[Any, Task], Result],
    expand: Callable[[Task, Result], list[Task]],
    context: Any = None,
    *,
    workers: int = 1,
    worker_setup: Callable[[Any], None] | None = None,
    run_first_here: bool = True,
) -> None:
    """Run every task of a tree, up to ``workers`` at a time.

    Args:
        roots: The first tasks.
        run: ``run(context, task) -> result`` does one task, in this process or
            in a worker process. With ``workers > 1``, ``run`` must be a
            module-level function, and ``context``, the tasks and the results
            picklable; ``context`` is sent once per worker.
        expand: ``expand(task, result) -> children`` applies a result; always
            called in this process, one at a time, in completion order.
        context: What every task shares (read-only).
        workers (int): Tasks run at once (1: all in this process, depth first,
            children in order). Else ``workers`` spawned processes run them:
            this process runs the first root itself while they start, then
            only hands out tasks, each as soon as its parent is done.
        worker_setup: ``worker_setup(context)`` runs once in each worker
            process as it starts (a module-level function), e.g. to size
            its thread pools.
        run_first_here (bool): With ``workers > 1``: this process runs the
            first root while the workers start (default), or hands every root
            to them at once (several roots of equal size).

    A task's exception propagates once the tasks already handed to workers
    have finished (up to ``workers + 1`` of them may be queued there already;
    on a large graph that can take as long as a bisection); the tasks not yet
    handed out are dropped. A worker that dies
    (killed for memory, or a calling script without the
    ``if __name__ == "__main__":`` guard that spawned processes need) raises
    :class:`WorkerError`.
    """
    workers = check_workers(workers)
    ready = list(roots)[::-1]  # a stack: the first root on top
    if workers == 1:
        while ready:
            task = ready.pop()
            ready.extend(reversed(expand(task, run(context, task))))
        return
    if not ready:
        return
    pool = ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(run, context, worker_setup),
    )
    try:
        for _ in range(workers):  # start every worker now, while the first root runs here
            pool.submit(_worker_pid)
        if run_first_here:
            task = ready.pop()
            ready.extend(reversed(expand(task, run(context, task))))
        pending: dict[Future[Result], Task] = {}
        while ready or pending:
            while ready:
                task = ready.pop()
                pending[pool.submit(_run_in_worker, task)] = task
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                task = pending.pop(future)
                ready.extend(reversed(expand(task, future.result())))
    except BrokenProcessPool as error:
        raise WorkerError(
            "a worker process died: killed (out of memory?), or the calling script "
            'lacks the `if __name__ == "__main__":` guard that spawned worker '
            "processes need"
        ) from error
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


class WorkerError(GnnCoreError, RuntimeError):
    """A worker process of :func:`run_task_tree` died before returning its result."""


__all__ = ["WorkerError", "check_workers", "run_task_tree"]
