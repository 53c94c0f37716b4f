r"""Where an epoch's time goes: sampling, waiting, host-to-device transfer, compute.

*Sampling* is the time spent preparing mini-batches (the sampler plus the
feature join). *Waiting* is the time the training loop spent blocked on the
next batch. Iterating a loader synchronously the two are the same; with a
:class:`~gnncore.train.core.prefetch.Prefetcher` sampling runs in worker threads
(summed over the workers, so it can exceed the wall time) and waiting is what
was not hidden behind compute. *Transfer* is ``batch.to(device)`` (plus, when
a prefetcher copies batches on its own CUDA stream, those copies); *compute*
is forward, backward and the optimiser step. On a CPU the phases are timed
with :func:`time.perf_counter`. On CUDA, where copies and kernels run
asynchronously, transfer and compute are timed with CUDA events recorded on
the stream they run on and read once at the end of the epoch, so measuring
adds no synchronisation per batch.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

PHASES = ("sample", "wait", "transfer", "compute")


@dataclass
class EpochTimer:
    r"""Accumulates per-phase seconds and batch sizes over one epoch.

    Args:
        device (torch.device): The training device; CUDA devices get event timing.
    """

    device: torch.device
    batches: int = 0
    nodes: int = 0
    edges: int = 0
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    _events: list[tuple[str, Any, Any]] = field(default_factory=list)
    _started: float = field(default_factory=time.perf_counter)

    @property
    def uses_events(self) -> bool:
        return self.device.type == "cuda"

    def count(self, batch: Any) -> None:
        """Record one sampled mini-batch (its node and edge counts)."""
        self.batches += 1
        n_id = getattr(batch, "n_id", None)
        self.nodes += int(n_id.numel()) if n_id is not None else int(batch.num_nodes)
        edge_index = getattr(batch, "edge_index", None)
        self.edges += int(edge_index.size(1)) if edge_index is not None else 0

    def next_batch(self, iterator: Iterator[Any]) -> Any | None:
        """``next(iterator)`` (``None`` when exhausted), timed as waiting.

        When the iterator reports how the batch was made (the ``last_timing``
        of a :class:`~gnncore.train.core.prefetch.PrefetchIterator` in threaded
        mode), its preparation counts as sampling and its copy as transfer;
        otherwise the wait was the sampling.
        """
        start = time.perf_counter()
        batch = next(iterator, None)
        waited = time.perf_counter() - start
        self.seconds["wait"] += waited
        timing = getattr(iterator, "last_timing", None)
        if timing is None:
            self.seconds["sample"] += waited
        elif batch is not None:
            self.seconds["sample"] += timing.prepare_s
            if timing.transfer is not None:
                self._events.append(("transfer", *timing.transfer))
        return batch

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block as ``name`` (``"transfer"`` or ``"compute"``)."""
        if self.uses_events:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
            self._events.append((name, start, end))
        else:
            begin = time.perf_counter()
            yield
            self.seconds[name] += time.perf_counter() - begin

    def summary(self) -> dict[str, float]:
        """Per-epoch figures (synchronises the device once on CUDA).

        ``batches``, ``batches_per_s`` (over the epoch's wall time),
        ``nodes_per_batch`` / ``edges_per_batch`` (mean sampled subgraph size),
        ``sample_s`` (batch preparation), ``wait_s`` (the loop blocked on the
        next batch: the *stall*), ``transfer_s``, ``compute_s``, ``train_s``
        (wall time) and ``stall_fraction`` (``wait_s / train_s``: the share of the
        epoch the model waited for batches).
        """
        if self._events:
            torch.cuda.synchronize(self.device)
            for name, start, end in self._events:
                self.seconds[name] += start.elapsed_time(end) / 1000.0
            self._events.clear()
        wall = time.perf_counter() - self._started
        batches = max(self.batches, 1)
        return {
            "batches": float(self.batches),
            "batches_per_s": self.batches / wall if wall > 0 else 0.0,
            "nodes_per_batch": self.nodes / batches,
            "edges_per_batch": self.edges / batches,
            "sample_s": self.seconds["sample"],
            "wait_s": self.seconds["wait"],
            "transfer_s": self.seconds["transfer"],
            "compute_s": self.seconds["compute"],
            "train_s": wall,
            "stall_fraction": self.seconds["wait"] / wall if wall > 0 else 0.0,
        }


def stall_figures(epochs: list[dict[str, float]]) -> dict[str, float]:
    """Totals over ``epochs`` (per-epoch :meth:`EpochTimer.summary` figures):
    ``stall_s`` (the loop waiting for batches), ``sample_s``, ``compute_s``,
    ``train_s``, ``stall_fraction`` (``stall_s / train_s``), and, when the
    epochs report it (distributed training), ``exchange_s``."""

    def total(key: str) -> float:
        return sum(float(e.get(key, 0.0)) for e in epochs)

    out = {
        "stall_s": total("wait_s"),
        "sample_s": total("sample_s"),
        "compute_s": total("compute_s"),
        "train_s": total("train_s"),
    }
    out["stall_fraction"] = out["stall_s"] / out["train_s"] if out["train_s"] > 0 else 0.0
    if any("dist_exchange_s" in e for e in epochs):
        out["exchange_s"] = total("dist_exchange_s")
    return out


#: The per-epoch timing keys of :func:`epoch_timing` (``dist_exchange_s`` only
#: in distributed training).
TIMING_KEYS = (
    "train_s",
    "wait_s",
    "stall_fraction",
    "sample_s",
    "transfer_s",
    "compute_s",
    "dist_exchange_s",
)


def epoch_timing(epochs: list[dict[str, float]]) -> list[dict[str, float]]:
    """Each epoch's timing figures (:data:`TIMING_KEYS` that it reports)."""
    return [{k: float(e[k]) for k in TIMING_KEYS if k in e} for e in epochs]


def mean_throughput(epochs: list[dict[str, float]]) -> dict[str, float]:
    """The mean of each figure over ``epochs`` (empty dict when there are none)."""
    if not epochs:
        return {}
    keys = epochs[0].keys()
    return {key: sum(e.get(key, 0.0) for e in epochs) / len(epochs) for key in keys}
