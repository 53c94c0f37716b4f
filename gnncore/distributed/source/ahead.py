r"""A rank's next training batches, sampled and exchanged in a thread beside compute.

In a distributed epoch each batch is drawn by
:class:`~gnncore.distributed.sampler.DistNeighborSampler` and its rows fetched
by :class:`~gnncore.distributed.feature_store.DistFeatureStore`, both through
collectives that every rank makes in the same order. :class:`AheadBatches`
runs that whole sequence (the epoch's batch plan, in order) in one background
thread that stays up to ``depth`` batches ahead of the training loop, so the
exchanges of batch ``i + 1`` overlap the forward and backward pass of batch
``i``. The thread's collectives go over a group of their own
(:func:`side_group`): the training thread's gradient all-reduces stay on the
run's group, and a group is never used by two threads at once. The batches,
and so the trained model, are the ones the synchronous path makes: the same
plan, the same sampler state advancing batch by batch, the same rows.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
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
    """Iterates ``make()`` (a generator of batches) in a background thread, at
    most ``depth`` batches ahead; a context manager whose exit stops the thread.

    What the generator raises is raised here, at the batch it failed on.
    ``device``: on CUDA the thread makes it its current device (the current
    device is per thread).
    """

    def __init__(
        self,
        make: Callable[[], Iterator[Any]],
        depth: int,
        device: torch.device | None = None,
    ) -> None:
        if depth < 1:
            raise ValueError(f"depth={depth}: must be >= 1")
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(
            target=self._run, args=(make, device), name="gnncore-dist-ahead", daemon=True
        )
        self._thread.start()

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, make: Callable[[], Iterator[Any]], device: torch.device | None) -> None:
        try:
            if device is not None and device.type == "cuda":
                torch.cuda.set_device(device)
            for batch in make():
                if not self._put(batch):
                    return
            self._put(_END)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            exc.add_note("(raised in the thread sampling the next distributed batches)")
            self._put(exc)

    def __iter__(self) -> AheadBatches:
        return self

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        item = self._queue.get()
        if item is _END:
            self._done = True
            self._thread.join()
            raise StopIteration
        if isinstance(item, BaseException):
            self._done = True
            raise item
        return item

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread and join it (within ``timeout`` seconds: a thread held
        in a collective its peers left is a daemon, and ends with the process)."""
        self._done = True
        self._stop.set()
        while True:  # free a thread blocked on a full queue
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._thread.join(timeout)

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
