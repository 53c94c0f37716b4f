r"""A rank's next training batches, sampled and exchanged in a thread beside compute.

In a distributed epoch each batch is drawn by
:class:`~gnncore.distributed.sampler.DistNeighborSampler` and its rows fetched
by :class:`~gnncore.distributed.feature_store.DistFeatureStore`, both through
collectives that every rank makes in the same order. :class:`AheadBatches`
runs that sequence (the epoch's batch plan, in order) in background threads
that stay up to ``depth`` batches ahead of the training loop, so the
exchanges of batch ``i + 1`` overlap the forward and backward pass of batch
``i``. With ``k`` threads (``prefetch_workers``), thread ``w`` makes batches
``w, w + k, ...`` on a process group of its own (:func:`side_group`, one per
thread, created in the same order on every rank), so every rank makes batch
``i``'s collectives on the same group, in the same order, and ``k`` batches
are sampled at once: the sampler's C++ draws and the row copies release the
GIL. The training thread's gradient all-reduces stay on the run's group, and
a group is never used by two threads at once. The batches, and so the
trained model, are the ones the synchronous path makes: the same plan, batch
``i`` drawn with the sampler's counter ``i`` of the epoch, the same rows.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import Any

import torch
import torch.distributed as dist

_END = object()


def side_group(group: Any = None) -> Any:
    """A new gloo process group of ``group``'s ranks, for the collectives a second
    thread makes. Every rank of the default group must call it, in the same order
    (it is a collective).

    Always gloo, whatever the training's backend: a second NCCL communicator
    used while the first runs DDP's all-reduce can deadlock (NCCL's guide,
    "Using multiple NCCL communicators concurrently", asks that operations on
    different communicators never overlap), and the exchanged rows are host
    rows that the loop copies to the device anyway."""
    ranks = None if group is None else dist.get_process_group_ranks(group)
    return dist.new_group(ranks=ranks, backend="gloo")


class AheadBatches(Iterator[Any]):
    """Iterates the batches of ``lanes`` (generator factories) in background
    threads, one thread a lane; a context manager whose exit stops the threads.
    Each lane queues at most ``max(1, depth // len(lanes))`` finished batches
    and makes one more, so ``max(depth, len(lanes))`` wait in all, plus one in
    each thread's hands.

    The batches come out round-robin: lane 0's first, lane 1's first, ...,
    lane 0's second, ... A lane that ends drops out of the turn. So lane ``w``
    of ``k`` making batches ``w, w + k, w + 2k, ...`` of a plan gives the
    plan's order back, while ``k`` threads make batches at once. A single
    callable is one lane. What a lane raises is raised here, at the batch it
    failed on.
    ``device``: on CUDA each thread makes it its current device (the current
    device is per thread).
    """

    def __init__(
        self,
        lanes: Callable[[], Iterator[Any]] | Sequence[Callable[[], Iterator[Any]]],
        depth: int,
        device: torch.device | None = None,
    ) -> None:
        if depth < 1:
            raise ValueError(f"depth={depth}: must be >= 1")
        makers = [lanes] if callable(lanes) else list(lanes)
        if not makers:
            raise ValueError("AheadBatches needs at least one lane")
        per_lane = max(1, depth // len(makers))
        self._queues: list[queue.Queue[Any]] = [queue.Queue(maxsize=per_lane) for _ in makers]
        self._live = list(range(len(makers)))  # lanes not yet ended, in turn order
        self._turn = 0
        self._stop = threading.Event()
        self._done = False
        self._threads = [
            threading.Thread(
                target=self._run,
                args=(make, q, device),
                name=f"gnncore-dist-ahead-{w}",
                daemon=True,
            )
            for w, (make, q) in enumerate(zip(makers, self._queues))
        ]
        for thread in self._threads:
            thread.start()

    def _put(self, lane: queue.Queue[Any], item: Any) -> bool:
        while not self._stop.is_set():
            try:
                lane.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(
        self,
        make: Callable[[], Iterator[Any]],
        lane: queue.Queue[Any],
        device: torch.device | None,
    ) -> None:
        try:
            if device is not None and device.type == "cuda":
                torch.cuda.set_device(device)
            for batch in make():
                if not self._put(lane, batch):
                    return
            self._put(lane, _END)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            exc.add_note("(raised in the thread sampling the next distributed batches)")
            self._put(lane, exc)

    def __iter__(self) -> AheadBatches:
        return self

    def __next__(self) -> Any:
        while not self._done:
            if not self._live:
                self._done = True
                for thread in self._threads:
                    thread.join()
                break
            self._turn %= len(self._live)
            lane = self._live[self._turn]
            item = self._queues[lane].get()
            if item is _END:
                del self._live[self._turn]
                continue
            if isinstance(item, BaseException):
                self._done = True
                raise item
            self._turn += 1
            return item
        raise StopIteration

    def close(self, timeout: float = 10.0) -> None:
        """Stop the threads and join them (within ``timeout`` seconds each: a
        thread held in a collective its peers left is a daemon, and ends with the
        process)."""
        self._done = True
        self._stop.set()
        for lane in self._queues:  # free threads blocked on a full queue
            while True:
                try:
                    lane.get_nowait()
                except queue.Empty:
                    break
        for thread in self._threads:
            thread.join(timeout)

    def __enter__(self) -> AheadBatches:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


__all__ = ["AheadBatches", "side_group"]
