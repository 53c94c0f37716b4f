r"""Pipelined mini-batches: prepare batches in threads while the model computes.

A :class:`Prefetcher` wraps a PyG :class:`~torch_geometric.loader.NodeLoader`
or :class:`~torch_geometric.loader.LinkLoader` (any map-style
:class:`~torch.utils.data.DataLoader` with ``num_workers=0``, in fact) and
yields the batches that iterating the loader yields, in the same order, while
``workers`` background threads prepare up to ``depth`` batches ahead: the
loader's ``collate_fn`` (sampling, whose C++ kernels release the GIL, and the
feature join) and, for PyG loaders with ``filter_per_worker=False``, its
``filter_fn``. The main thread keeps drawing everything random in the order
plain iteration does: the DataLoader's base seed, the shuffled index batches,
and, for gnncore samplers, the per-batch sampling seeds
(:meth:`~gnncore.sampler.NeighborSampler.reserve_batch_seeds`). Batches are
therefore bit-identical to plain iteration for any number of workers (samplers
that draw from global RNGs in ``sample_from_*`` are not covered).

On CUDA the worker also pins the batch's host tensors and copies them with
``non_blocking=True`` on its own :class:`torch.cuda.Stream`; the consumer's
stream waits on an event recorded after the copy, and every device tensor is
``record_stream``-ed on the consumer's stream so the allocator does not reuse
its memory early.

With ``workers=0``, with a loader that runs worker processes
(``num_workers > 0``) or one without the DataLoader structure, the prefetcher
iterates the loader itself (synchronously). Leaving the loop early (``break``,
an exception, ``KeyboardInterrupt``) stops and joins the threads: close the
iterator (``with iter(prefetcher) as batches``), or drop it.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset


@dataclass
class BatchTiming:
    """How one prefetched batch was made: ``prepare_s`` seconds in a worker
    (sampling and feature join), and the CUDA events around its host-to-device
    copy (``None`` off CUDA)."""

    prepare_s: float
    transfer: tuple[torch.cuda.Event, torch.cuda.Event] | None = None


def supports_threads(loader: Any) -> bool:
    """Whether :class:`Prefetcher` can prepare ``loader``'s batches in threads: a
    map-style :class:`~torch.utils.data.DataLoader` with a batch sampler and no
    worker processes."""
    return (
        isinstance(loader, DataLoader)
        and loader.num_workers == 0
        and loader.batch_sampler is not None
        and not isinstance(loader.dataset, IterableDataset)
    )


def _sampler_of(loader: Any) -> Any | None:
    """The loader's sampler if it takes batch-seed reservations (gnncore samplers)."""
    for name in ("node_sampler", "link_sampler"):
        sampler = getattr(loader, name, None)
        if callable(getattr(sampler, "reserve_batch_seeds", None)):
            return sampler
    return None


def _preparer(loader: DataLoader) -> Callable[[list[int]], Any]:
    """What plain iteration does with one index batch, as a function: the
    dataset fetch, ``collate_fn``, and PyG's main-process ``filter_fn``."""
    dataset, collate = loader.dataset, loader.collate_fn
    getitems = getattr(dataset, "__getitems__", None)
    post: Callable[[Any], Any] | None = None
    filter_fn = getattr(loader, "filter_fn", None)
    if getattr(loader, "filter_per_worker", True) is False and callable(filter_fn):
        post = filter_fn  # PyG's DataLoaderIterator applies it in the main process

    def prepare(index: list[int]) -> Any:
        items = getitems(index) if callable(getitems) else [dataset[i] for i in index]
        batch = collate(items)
        return post(batch) if post is not None else batch

    return prepare


def _apply(batch: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """``fn`` on every tensor of a PyG batch, tensor, or list / tuple / dict of them."""
    if isinstance(batch, torch.Tensor):
        return fn(batch)
    if callable(getattr(batch, "apply", None)) and hasattr(batch, "stores"):
        return batch.apply(fn)  # PyG Data / HeteroData
    if isinstance(batch, (list, tuple)):
        return type(batch)(_apply(b, fn) for b in batch)
    if isinstance(batch, dict):
        return {key: _apply(value, fn) for key, value in batch.items()}
    return batch


class Prefetcher:
    r"""Iterates ``loader`` with batch preparation in background threads.

    Each ``iter(prefetcher)`` is one pass (an epoch) and returns a
    :class:`PrefetchIterator`.

    Args:
        loader (DataLoader): A PyG ``NodeLoader`` / ``LinkLoader`` or another
            map-style loader; see :func:`supports_threads`.
        workers (int, optional): Preparing threads; ``0`` iterates the loader
            synchronously. (default: :obj:`1`)
        depth (int, optional): Most batches dispatched ahead of the consumer
            (being prepared or ready); at most ``min(workers, depth)`` are
            prepared at once. (default: :obj:`4`)
        device (torch.device, optional): On CUDA, workers pin batches and copy
            them to this device on their own stream. (default: :obj:`None`)
    """

    def __init__(
        self,
        loader: Any,
        workers: int = 1,
        depth: int = 4,
        device: torch.device | str | None = None,
    ) -> None:
        if int(workers) < 0:
            raise ValueError(f"workers={workers}: must be >= 0")
        if int(depth) < 1:
            raise ValueError(f"depth={depth}: must be >= 1")
        self.loader = loader
        self.workers = int(workers)
        self.depth = int(depth)
        self.device = torch.device(device) if device is not None else None

    @property
    def threaded(self) -> bool:
        """Whether batches are prepared in threads (else plain iteration)."""
        return self.workers > 0 and supports_threads(self.loader)

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> PrefetchIterator:
        if not self.threaded:
            return PrefetchIterator(iter(self.loader))
        return PrefetchIterator(_Pipeline(self.loader, self.workers, self.depth, self.device))


class PrefetchIterator(Iterator[Any]):
    """One pass of a :class:`Prefetcher`; a context manager that :meth:`close`\\ s.

    ``last_timing`` is the :class:`BatchTiming` of the batch just returned
    (``None`` when iterating synchronously); ``prepare_s`` and ``wait_s`` sum
    the workers' preparation and the consumer's waiting over the pass.
    """

    def __init__(self, source: Iterator[Any] | _Pipeline) -> None:
        self._source = source
        self.last_timing: BatchTiming | None = None
        self.prepare_s = 0.0
        self.wait_s = 0.0

    def __iter__(self) -> PrefetchIterator:
        return self

    def __next__(self) -> Any:
        start = time.perf_counter()
        try:
            if isinstance(self._source, _Pipeline):
                batch, self.last_timing = self._source.next()
                self.prepare_s += self.last_timing.prepare_s
            else:
                batch = next(self._source)
        finally:
            self.wait_s += time.perf_counter() - start
        if self.last_timing is None:
            self.prepare_s = self.wait_s
        return batch

    def close(self) -> None:
        """Stop and join the worker threads (idempotent)."""
        if isinstance(self._source, _Pipeline):
            self._source.close()

    def __enter__(self) -> PrefetchIterator:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


class _Pipeline:
    """The threads of one threaded pass: the consumer dispatches index batches
    (with reserved sampling seeds) to a task queue; workers post results by
    batch number; the consumer takes them in order."""

    def __init__(
        self, loader: DataLoader, workers: int, depth: int, device: torch.device | None
    ) -> None:
        assert loader.batch_sampler is not None  # supports_threads() checked it
        self._indices = iter(loader.batch_sampler)
        # DataLoader.__iter__ draws a base seed from the loader's generator (the
        # global one when it has none); draw it too so every RNG stream matches.
        torch.empty((), dtype=torch.int64).random_(generator=loader.generator)
        self._sampler = _sampler_of(loader)
        self._depth = depth
        self._tasks: queue.SimpleQueue[tuple[int, list[int], range | None] | None] = (
            queue.SimpleQueue()
        )
        self._done: dict[int, tuple[Any, BaseException | None, BatchTiming]] = {}
        self._ready = threading.Condition()
        self._stop = threading.Event()
        self._reserved: dict[int, range | None] = {}
        self._dispatched = self._delivered = 0
        self._exhausted = self._closed = False
        cuda = device is not None and device.type == "cuda"
        if device is not None and cuda and device.index is None:  # threads start on device 0
            device = torch.device("cuda", torch.cuda.current_device())
        work = _Worker(
            _preparer(loader),
            self._sampler,
            device if cuda else None,
            self._tasks,
            self._done,
            self._ready,
            self._stop,
        )
        self._threads = [
            threading.Thread(target=work.run, name=f"gnncore-prefetch-{i}", daemon=True)
            for i in range(workers)
        ]
        self._device = device if cuda else None
        for thread in self._threads:
            thread.start()
        try:
            self._fill()
        except BaseException:
            self.close()
            raise

    def _fill(self) -> None:
        while not self._exhausted and self._dispatched - self._delivered < self._depth:
            index = next(self._indices, None)
            if index is None:
                self._exhausted = True
                break
            seeds = self._sampler.reserve_batch_seeds(1) if self._sampler is not None else None
            self._reserved[self._dispatched] = seeds
            self._tasks.put((self._dispatched, index, seeds))
            self._dispatched += 1

    def next(self) -> tuple[Any, BatchTiming]:
        """The next batch in order and its timing; raises what its worker raised."""
        if self._closed or self._delivered == self._dispatched:
            self.close()
            raise StopIteration
        k = self._delivered
        with self._ready:
            while k not in self._done:
                if not self._ready.wait(timeout=1.0) and not any(
                    t.is_alive() for t in self._threads
                ):
                    raise RuntimeError(f"prefetch threads ended without delivering batch {k}")
            batch, error, timing = self._done.pop(k)
        self._delivered += 1
        self._reserved.pop(k, None)
        if error is not None:
            self.close()
            raise error
        self._fill()
        if self._device is not None and timing.transfer is not None:
            stream = torch.cuda.current_stream(self._device)
            stream.wait_event(timing.transfer[1])
            batch = _apply(batch, lambda t: _record(t, stream))
        return batch, timing

    def close(self) -> None:
        """Stop the workers, join them, and give back the sampling seeds of
        batches never delivered (newest first), as if they had never been drawn."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        for _ in self._threads:
            self._tasks.put(None)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join()
        if self._sampler is not None:
            for k in sorted(self._reserved, reverse=True):
                seeds = self._reserved[k]
                if seeds is not None:
                    self._sampler.release_batch_seeds(seeds)
        self._reserved.clear()
        self._done.clear()


def _record(tensor: torch.Tensor, stream: torch.cuda.Stream) -> torch.Tensor:
    if tensor.is_cuda:
        tensor.record_stream(stream)
    return tensor


@dataclass
class _Worker:
    """The loop of one preparing thread (holds no reference to the iterator,
    so dropping the iterator closes it)."""

    prepare: Callable[[list[int]], Any]
    sampler: Any | None
    device: torch.device | None
    tasks: queue.SimpleQueue[tuple[int, list[int], range | None] | None]
    done: dict[int, tuple[Any, BaseException | None, BatchTiming]]
    ready: threading.Condition
    stop: threading.Event

    def run(self) -> None:
        stream = torch.cuda.Stream(self.device) if self.device is not None else None
        while (task := self.tasks.get()) is not None:
            if self.stop.is_set():
                continue
            k, index, seeds = task
            start = time.perf_counter()
            batch, error, transfer = None, None, None
            try:
                batch = self._prepare(index, seeds)
                prepared = time.perf_counter() - start
                if stream is not None:
                    batch, transfer = self._to_device(batch, stream)
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer
                exc.add_note(
                    f"(raised in {threading.current_thread().name} while preparing batch {k})"
                )
                error, prepared = exc, time.perf_counter() - start
            with self.ready:
                self.done[k] = (batch, error, BatchTiming(prepared, transfer))
                self.ready.notify_all()

    def _prepare(self, index: list[int], seeds: range | None) -> Any:
        if seeds is None or self.sampler is None:
            return self.prepare(index)
        with self.sampler.use_batch_seeds(seeds):
            return self.prepare(index)

    def _to_device(
        self, batch: Any, stream: torch.cuda.Stream
    ) -> tuple[Any, tuple[torch.cuda.Event, torch.cuda.Event]]:
        """Pin, then copy on ``stream`` between two timing events."""
        batch = _apply(batch, lambda t: t if t.is_cuda else t.pin_memory())
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(stream):
            start.record(stream)
            batch = _apply(batch, lambda t: t.to(self.device, non_blocking=True))
            end.record(stream)
        return batch, (start, end)
