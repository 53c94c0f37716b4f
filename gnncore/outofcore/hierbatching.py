r"""HierBatching (ALGORITHMS.md §7): out-of-core node classification by mega-batches.

Memory holds a **static cache** (features and in-neighbour lists of the
``r_s·|V|`` highest-degree nodes, read once) and a **dynamic cache**: one
mega-batch of ``N_d`` partitions ``T`` of a :class:`PartitionedStore`. Each
epoch shuffles the partitions into groups of ``N_d`` (each partition once per
epoch); for each group the loader reads, in a background thread while the
previous mega-batch trains, the features of ``T`` and the in-edges of ``T``
(one sequential range each: the store is destination-major), and builds the
cached graph ``G_cache``: the subgraph induced on ``T ∪ (N(T) ∩ static)``.
Training then makes ``passes`` passes over the training nodes of ``T``,
shuffled into mini-batches sampled from ``G_cache`` with the project's
sampler.

Memory: two mega-batches (the one in use and the one loading) and the static
cache, ``2·(r_s + r_d)·data`` with ``r_d = N_d / N_p`` and ``data`` the bytes of
features plus edges (:func:`~gnncore.outofcore.megabatch.mega_batch_parts`
picks ``N_d`` from a budget; the mega-batches themselves:
:mod:`gnncore.outofcore.megabatch`).

Evaluation reads the same way (:meth:`HierBatchSource.eval_batches`): the
partitions that hold nodes of the split, grouped into mega-batches, each seed
sampled from its mega-batch's ``G_cache``. Its neighbourhoods are therefore
those training sees, not the whole graph's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
from torch_geometric.loader import NodeLoader

from gnncore.outofcore.megabatch import (
    MegaBatch,
    PartitionData,
    StaticCache,
    load_mega_batch,
)
from gnncore.outofcore.stats import StepStats
from gnncore.outofcore.store import PartitionedStore

if TYPE_CHECKING:
    from gnncore.train.core.prefetch import BatchTiming, PrefetchIterator


def split_nodes_in(
    store_split: np.ndarray, store: PartitionedStore, parts: Sequence[int]
) -> np.ndarray:
    """The (ascending) store ids of ``store_split`` lying in partitions ``parts``."""
    offsets = store.offsets
    chunks = []
    for p in sorted(parts):
        lo, hi = np.searchsorted(store_split, [offsets[p], offsets[p + 1]])
        chunks.append(store_split[lo:hi])
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)


#: Builds a batch sampler over a mega-batch's CSC ``(indptr, indices)`` with a seed.
SamplerFactory = Callable[[tuple[np.ndarray, np.ndarray], int], Any]

#: How an epoch walks the partitions: disjoint shuffled ``groups`` of ``N_d``
#: (HierBatching), or a ``buffer`` of ``c`` that swaps one partition at a time
#: (MariusGNN's Alg. 7: a random initial buffer, then each other partition once).
Schedule = Literal["groups", "buffer"]


@dataclass(frozen=True)
class Step:
    """One mega-batch or buffer state of an epoch: the partitions in memory, those
    whose split nodes are trained (or evaluated) in it, and its seeds (sampler,
    then one shuffle per pass)."""

    parts: tuple[int, ...]
    targets: tuple[int, ...]
    seeds: tuple[int, ...]


def epoch_steps(
    schedule: Schedule, parts: int, n_d: int, passes: int, generator: torch.Generator
) -> list[Step]:
    """The steps of one epoch, every random choice drawn from ``generator``.

    ``groups``: a random permutation cut into groups of ``n_d``; each group
    trains its own nodes. ``buffer``: Alg. 7 with ``c = n_d``
    (:func:`~gnncore.outofcore.ordering.node_classification_states`); the first
    state trains the nodes of all its partitions, each later one those of the
    partition it swapped in, so every partition is read and trained once."""
    from gnncore.outofcore.ordering import node_classification_states

    def seeds() -> tuple[int, ...]:
        return tuple(torch.randint(0, 2**62, (passes + 1,), generator=generator).tolist())

    if schedule == "groups" or n_d >= parts:
        order = torch.randperm(parts, generator=generator).tolist()
        groups = [tuple(order[i : i + n_d]) for i in range(0, parts, n_d)]
        return [Step(g, g, seeds()) for g in groups]
    rng = np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=generator)))
    states = node_classification_states(parts, n_d, rng)
    steps = [Step(states[0], states[0], seeds())]
    for before, after in zip(states, states[1:], strict=False):
        steps.append(Step(after, tuple(sorted(set(after) - set(before))), seeds()))
    return steps


class HierBatchSource:
    """Mega-batches (HierBatching) or buffer states (partition buffer, Alg. 7) as a
    :class:`~gnncore.train.core.batches.BatchSource`.

    Args:
        store: The partitioned store (features, labels and splits in its ids).
        n_d: Partitions in memory at once
            (:func:`~gnncore.outofcore.megabatch.mega_batch_parts`): ``N_d`` of
            a mega-batch, or the buffer's ``c``.
        passes: Passes over each step's training nodes (``p``).
        batch_size: Seed nodes per mini-batch.
        make_sampler: ``f((indptr, indices), seed)`` -> a sampler over ``G_cache``
            (e.g. ``lambda g, s: build_sampler("dense", g, fanouts, seed=s)``).
        generator: Shuffles partitions and mini-batches and seeds the samplers;
            a checkpoint records it, so a resumed run draws the same batches.
        prefetch: Load the next step's partitions while the current one trains.
        log: Called with one line per step (progress in CLI / Dagster logs).
        schedule: ``"groups"`` (HierBatching) or ``"buffer"`` (see :data:`Schedule`).
        batch_workers, batch_depth: Threads that sample a step's mini-batches
            ahead of training, and how far ahead
            (:class:`~gnncore.train.core.prefetch.Prefetcher`; 0 samples in the
            training thread). The batches are the same either way.
        device: Where batches are used: on CUDA the sampling threads pin them
            and copy them there on a side stream.
    """

    def __init__(
        self,
        store: PartitionedStore,
        n_d: int,
        passes: int,
        batch_size: int,
        make_sampler: SamplerFactory,
        generator: torch.Generator,
        prefetch: bool = True,
        log: Callable[[str], None] | None = None,
        schedule: Schedule = "groups",
        batch_workers: int = 0,
        batch_depth: int = 4,
        device: torch.device | None = None,
    ) -> None:
        from gnncore.store.feature_store import TensorFeatureStore

        if n_d < 1 or passes < 1 or batch_size < 1:
            raise ValueError(f"n_d={n_d}, passes={passes}, batch_size={batch_size}: must be >= 1")
        if schedule not in ("groups", "buffer"):
            raise ValueError(f"schedule must be 'groups' or 'buffer', not {schedule!r}")
        self.store = store
        self.n_d = min(n_d, store.parts)
        self.passes = passes
        self.batch_size = batch_size
        self.make_sampler = make_sampler
        self.generator = generator
        self.prefetch = prefetch
        self.log = log
        self.schedule = schedule
        self.batch_prefetch = _BatchPrefetch(batch_workers, batch_depth, device)
        #: Evaluation batches are prepared one ahead at most: with every
        #: neighbour (exact evaluation) one batch of 1,024 seeds can hold most of
        #: a mega-batch's nodes (hubs), so ``batch_depth`` of them would not fit
        #: the budget the mega-batches were sized from.
        self.eval_prefetch = _BatchPrefetch(batch_workers, min(batch_depth, 1), device)
        self.static = StaticCache.read(store)
        self.labels = torch.from_numpy(np.array(store.array("labels"))).long()
        self.splits = {
            s: np.array(store.array(f"{s}_idx"))
            for s in ("train", "val", "test")
            if store.has(f"{s}_idx")
        }
        width = store.info.get("num_features") or 0
        #: Serves nothing directly (batches carry their rows); sized like the data.
        self.feature_store = TensorFeatureStore(
            {"x": torch.zeros((0, int(width)), dtype=torch.float32), "y": self.labels[:0]}
        )
        self.stats = StepStats()
        self._plan: list[Step] = []

    # BatchSource -----------------------------------------------------------

    def __len__(self) -> int:
        train = len(self.splits.get("train", ()))
        parts = self.store.parts
        steps = -(-parts // self.n_d) if self.schedule == "groups" else parts - self.n_d + 1
        return self.passes * (-(-train // self.batch_size) + steps)

    def start_epoch(self, epoch: int) -> None:
        """Draw the epoch's steps and every seed they use (in this thread, so the
        background loader never touches the generator)."""
        self._plan = epoch_steps(
            self.schedule, self.store.parts, self.n_d, self.passes, self.generator
        )
        self.stats = StepStats()

    def batches(self) -> AbstractContextManager[Iterator[Any]]:
        return self._iterate(self._plan, "train", self.passes, shuffle=True)

    def end_epoch(self, epoch: int) -> None:
        """Nothing to release: the last mega-batch goes with the iterator."""

    def random_state(self) -> tuple[torch.Generator, dict[str, Any]]:
        return self.generator, {}

    def adapt(self, epoch: int, throughput: dict[str, float]) -> dict[str, float]:
        """The epoch's read figures, logged with it (nothing is adapted)."""
        return self.stats.figures("hb_", "mega_batches", reads_timed=True)

    # Evaluation ------------------------------------------------------------

    def eval_batches(
        self, split: str, batch_size: int, make_sampler: SamplerFactory
    ) -> EvalBatches:
        """An iterable of ``split``'s mini-batches, mega-batch by mega-batch over
        the partitions holding its nodes (fixed order and seeds)."""
        return EvalBatches(self, split, batch_size, make_sampler)

    # Internals -------------------------------------------------------------

    @contextmanager
    def _iterate(
        self,
        plan: Sequence[Step],
        split: str,
        passes: int,
        shuffle: bool,
        batch_size: int | None = None,
        make_sampler: SamplerFactory | None = None,
        batch_prefetch: _BatchPrefetch | None = None,
    ) -> Iterator[Iterator[Any]]:
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gnncore-megabatch")
        batches = _EpochBatches()
        try:
            batches.steps = self._generate(
                pool,
                plan,
                split,
                passes,
                shuffle,
                batch_size or self.batch_size,
                make_sampler or self.make_sampler,
                batch_prefetch or self.batch_prefetch,
                batches,
            )
            yield batches
        finally:
            batches.close()
            pool.shutdown(wait=True, cancel_futures=True)

    def _load(
        self, pool: ThreadPoolExecutor, step: Step, resident: dict[int, PartitionData]
    ) -> Future[MegaBatch]:
        keep = self.schedule == "buffer"
        return pool.submit(load_mega_batch, self.store, step.parts, self.static, resident, keep)

    def _generate(
        self,
        pool: ThreadPoolExecutor,
        plan: Sequence[Step],
        split: str,
        passes: int,
        shuffle: bool,
        batch_size: int,
        make_sampler: SamplerFactory,
        batch_prefetch: _BatchPrefetch,
        batches: _EpochBatches,
    ) -> Iterator[Any]:
        nodes = self.splits.get(split, np.zeros(0, dtype=np.int64))
        pending: Future[MegaBatch] | None = self._load(pool, plan[0], {}) if plan else None
        for k, step in enumerate(plan):
            assert pending is not None
            waited = time.perf_counter()
            mega = pending.result()
            wait = time.perf_counter() - waited
            pending = None
            if k + 1 < len(plan) and self.prefetch:
                pending = self._load(pool, plan[k + 1], mega.pieces)
            self._count(mega, wait, split)
            targets = split_nodes_in(nodes, self.store, step.targets)
            if len(targets):
                yield from _step_batches(
                    mega,
                    step,
                    targets,
                    self.labels,
                    passes,
                    shuffle,
                    batch_size,
                    make_sampler,
                    batch_prefetch,
                    batches,
                )
            if k + 1 < len(plan) and not self.prefetch:
                pending = self._load(pool, plan[k + 1], mega.pieces)
            del mega  # with the loaders' cycles broken, this frees the step's data

    def _count(self, mega: MegaBatch, wait: float, split: str) -> None:
        self.stats.record(
            mega.partitions_read, mega.nbytes_read, mega.seconds, wait, mega.read_seconds
        )
        if self.log is not None:
            what = "mega-batch" if self.schedule == "groups" else "buffer state"
            self.log(
                f"{split} {what} {self.stats.steps}: partitions {list(mega.parts)} "
                f"({mega.partitions_read} read), {len(mega.nodes)} nodes cached, "
                f"{len(mega.indices)} edges, {mega.nbytes_read / 2**20:.1f} MiB read in "
                f"{mega.seconds:.2f} s, waited {wait:.2f} s"
            )


@dataclass(frozen=True)
class _BatchPrefetch:
    """How a step's mini-batches are prepared (see :class:`HierBatchSource`)."""

    workers: int
    depth: int
    device: torch.device | None


class _EpochBatches(Iterator[Any]):
    """An epoch's (or an evaluation's) batches across its steps. ``last_timing``
    is that of the batch just returned, from the step's prefetcher, so the
    loop's timer counts the sampling done in its threads; ``None`` when the
    batches are sampled in the training thread."""

    def __init__(self) -> None:
        self.steps: Iterator[Any] = iter(())
        self.current: PrefetchIterator | None = None

    def __next__(self) -> Any:
        return next(self.steps)

    @property
    def last_timing(self) -> BatchTiming | None:
        return None if self.current is None else self.current.last_timing

    def close(self) -> None:
        """Stop the step in progress (its sampling threads) and the steps."""
        close = getattr(self.steps, "close", None)
        if close is not None:
            close()


def _step_batches(
    mega: MegaBatch,
    step: Step,
    targets: np.ndarray,
    labels: torch.Tensor,
    passes: int,
    shuffle: bool,
    batch_size: int,
    make_sampler: SamplerFactory,
    prefetch: _BatchPrefetch,
    holder: _EpochBatches,
) -> Iterator[Any]:
    """The mini-batches of one step: ``passes`` passes over ``targets`` (store
    ids) sampled from the step's cached subgraph, through a prefetcher whose
    iterator ``holder`` shows while it runs."""
    from gnncore.store.feature_store import TensorFeatureStore
    from gnncore.store.graph_store import CSCGraphStore
    from gnncore.train.core.prefetch import Prefetcher

    tensors = {"y": labels[torch.from_numpy(mega.nodes)]}
    if mega.x is not None:
        tensors["x"] = torch.from_numpy(mega.x)
    data = (TensorFeatureStore(tensors), CSCGraphStore(mega.indptr, mega.indices))
    sampler = make_sampler((mega.indptr, mega.indices), int(step.seeds[0]))
    local = torch.from_numpy(mega.local_ids(targets))
    for p in range(passes):
        shuffler = torch.Generator().manual_seed(int(step.seeds[1 + p]))
        loader = NodeLoader(
            data=data,
            node_sampler=sampler,
            input_nodes=local,
            batch_size=batch_size,
            shuffle=shuffle,
            generator=shuffler if shuffle else None,
        )
        try:
            with iter(
                Prefetcher(loader, prefetch.workers, prefetch.depth, prefetch.device)
            ) as batches:
                holder.current = batches
                yield from batches
        finally:
            holder.current = None
            # A PyG loader holds itself in a reference cycle (its collate_fn is its
            # own bound method), and through it this step's cached subgraph. Break
            # the cycle so that reference counting frees the step as soon as it
            # ends: left to the cyclic collector, mega-batches pile up past the
            # memory budget, and a full collection per step costs 0.2-0.4 s in a
            # process that has loaded torch and MLflow.
            loader.collate_fn = None


class EvalBatches(Iterable[Any]):
    """One split's evaluation mini-batches through mega-batches (see
    :meth:`HierBatchSource.eval_batches`); iterate it once per evaluation. The
    partitions holding the split's nodes are read in groups of ``N_d``."""

    def __init__(
        self, source: HierBatchSource, split: str, batch_size: int, make_sampler: SamplerFactory
    ) -> None:
        self.source, self.split = source, split
        self.batch_size, self.make_sampler = batch_size, make_sampler
        nodes = source.splits.get(split, np.zeros(0, dtype=np.int64))
        holding = np.unique(np.searchsorted(source.store.offsets, nodes, side="right") - 1)
        parts = holding.tolist()
        groups = [tuple(parts[i : i + source.n_d]) for i in range(0, len(parts), source.n_d)]
        self.plan = [Step(g, g, (k, k)) for k, g in enumerate(groups)]
        self.count = int(len(nodes))

    def __len__(self) -> int:
        return -(-self.count // self.batch_size) + len(self.plan)

    def __iter__(self) -> Iterator[Any]:
        saved = self.source.stats
        self.source.stats = StepStats()
        try:
            with self.source._iterate(
                self.plan,
                self.split,
                1,
                False,
                self.batch_size,
                self.make_sampler,
                self.source.eval_prefetch,
            ) as batches:
                yield from batches
        finally:
            self.source.stats = saved
