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
features plus edges (:func:`mega_batch_parts` picks ``N_d`` from a budget).

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

from gnncore.errors import InputError
from gnncore.outofcore.stats import StepStats
from gnncore.outofcore.store import PartitionedStore

if TYPE_CHECKING:
    from gnncore.train.core.prefetch import BatchTiming, PrefetchIterator

#: ``r_s``: the static fraction HierBatching's paper uses.
DEFAULT_STATIC_FRACTION = 0.01
#: ``p``: passes over each mega-batch's training nodes.
DEFAULT_PASSES = 2
#: ``r_d`` when neither a budget nor ``N_d`` is given.
DEFAULT_DYNAMIC_FRACTION = 1 / 8


def data_bytes(store: PartitionedStore) -> int:
    """Bytes of the store's features plus edges (the ``data`` of the memory
    bound; array payloads, without file headers)."""
    total = 0
    for name in ("features.npy", "edges.npy"):
        entry = store.info["files"].get(name)
        if entry is not None:
            count = int(np.prod(entry["shape"], dtype=np.int64))
            total += count * np.dtype(entry["dtype"]).itemsize
    return total


def mega_batch_parts(
    store: PartitionedStore, budget_bytes: int | None = None, parts: int = 0
) -> int:
    """``N_d``: ``parts`` when given (> 0), else the most partitions with
    ``2·(r_s + N_d/N_p)·data ≤ budget`` (at least 1), else ``N_p / 8``.

    Raises:
        InputError: The budget cannot hold the static cache and one partition.
    """
    n_p = store.parts
    if parts > 0:
        return min(parts, n_p)
    if budget_bytes is None:
        return max(1, round(DEFAULT_DYNAMIC_FRACTION * n_p))
    data = data_bytes(store)
    r_s = store.num_static / max(store.num_nodes, 1)
    r_d = budget_bytes / (2.0 * max(data, 1)) - r_s
    n_d = min(n_p, int(r_d * n_p))
    if n_d < 1:
        need = 2 * (r_s + 1 / n_p) * data
        raise InputError(
            f"memory budget {budget_bytes} bytes cannot hold the static cache and one "
            f"partition twice (needs about {int(need)} bytes for {n_p} partitions); raise "
            "the budget or write the store with more partitions or a smaller static fraction",
            store.path,
        )
    return n_d


@dataclass(frozen=True)
class StaticCache:
    """The static set in memory: its ids (ascending), features and in-lists."""

    nodes: np.ndarray
    features: np.ndarray | None
    indptr: np.ndarray
    indices: np.ndarray

    @classmethod
    def read(cls, store: PartitionedStore) -> StaticCache:
        features = (
            np.array(store.array("static_features")) if store.has("static_features") else None
        )
        return cls(
            np.array(store.array("static_nodes")),
            features,
            np.array(store.array("static_indptr")),
            np.array(store.array("static_indices")),
        )

    @property
    def nbytes(self) -> int:
        arrays = (self.nodes, self.features, self.indptr, self.indices)
        return sum(a.nbytes for a in arrays if a is not None)

    def positions(self, ids: np.ndarray) -> np.ndarray:
        """Position of each id in the static set, ``-1`` where it is not static."""
        if len(self.nodes) == 0:
            return np.full(len(ids), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.nodes, ids), len(self.nodes) - 1)
        return np.where(self.nodes[pos] == ids, pos, -1)


@dataclass(frozen=True)
class PartitionData:
    """One partition in memory: its features (``None`` without features) and its
    in-edges (int64 ``[E, 2]``, store ids)."""

    features: np.ndarray | None
    in_edges: np.ndarray


def _read_in_edges(
    store: PartitionedStore, parts: list[int]
) -> tuple[dict[int, np.ndarray], float]:
    """In-edges of ``parts``, all ranges in one call (views of one array), and the
    seconds the read took."""
    if not parts:
        return {}, 0.0
    ranges = [store.in_edge_range(p) for p in parts]
    started = time.perf_counter()
    edges = store.read_rows("edges", ranges)
    seconds = time.perf_counter() - started
    cuts = np.cumsum([hi - lo for lo, hi in ranges])[:-1]
    return dict(zip(parts, np.split(edges, cuts), strict=True)), seconds


@dataclass
class MegaBatch:
    """One mega-batch (or buffer state) in memory: ``G_cache`` over local ids.

    Attributes:
        parts: The partitions ``T`` in memory (ascending).
        nodes: Store id of each local id: ``T``'s nodes, then the static
            neighbours of ``T`` outside it (ascending within each).
        indptr, indices: In-neighbour CSC of the induced subgraph (local ids).
        x: Features by local id (``None`` for a store without features).
        pieces: Each partition's data (views of ``x`` and of the edges read),
            handed to the next buffer state so it is not read again; empty
            unless asked for.
        nbytes_read: Bytes read from disk for it; ``partitions_read``: the
            partitions read (not those already in memory); ``seconds``: its
            load time; ``read_seconds``: the part of it spent in the store's
            reads (the rest builds ``G_cache``).
    """

    parts: tuple[int, ...]
    nodes: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    x: np.ndarray | None
    pieces: dict[int, PartitionData]
    nbytes_read: int
    partitions_read: int
    seconds: float
    read_seconds: float

    def local_ids(self, store_ids: np.ndarray) -> np.ndarray:
        """Local ids of store ids among :attr:`nodes` (which must hold them)."""
        order = np.argsort(self.nodes, kind="stable")
        return order[np.searchsorted(self.nodes[order], store_ids)]


def load_mega_batch(
    store: PartitionedStore,
    parts: Sequence[int],
    static: StaticCache,
    resident: dict[int, PartitionData] | None = None,
    keep_pieces: bool = False,
) -> MegaBatch:
    """Read partitions ``parts`` (those in ``resident`` are in memory already and
    are not read again) and build ``G_cache`` on ``T ∪ (N(T) ∩ static)``: every
    stored edge whose both ends lie in that set. Features are read straight
    into the mega-batch's feature matrix (no second copy)."""
    started = time.perf_counter()
    parts = tuple(sorted(int(p) for p in parts))
    resident = {p: d for p, d in (resident or {}).items() if p in parts}
    missing = [p for p in parts if p not in resident]
    read, read_seconds = _read_in_edges(store, missing)
    in_edges = {**{p: d.in_edges for p, d in resident.items()}, **read}
    nbytes = sum(in_edges[p].nbytes for p in missing)
    offsets = store.offsets
    sizes = np.array([offsets[p + 1] - offsets[p] for p in parts], dtype=np.int64)
    t_nodes = np.concatenate([np.arange(offsets[p], offsets[p + 1], dtype=np.int64) for p in parts])
    in_t = np.zeros(store.parts, dtype=bool)
    in_t[list(parts)] = True
    # Local id of a node of T: its store id shifted by its partition's base.
    base = np.zeros(store.parts, dtype=np.int64)
    base[list(parts)] = np.concatenate([[0], np.cumsum(sizes)[:-1]]) - offsets[list(parts)]
    edges = np.concatenate([in_edges[p] for p in parts])
    src, dst = edges[:, 0], edges[:, 1]
    src_part = np.searchsorted(offsets, src, side="right") - 1
    src_in_t = in_t[src_part]
    keep = src_in_t.copy()  # and the static sources outside T (looked up for those only)
    keep[~src_in_t] = static.positions(src[~src_in_t]) >= 0
    src, dst, src_part, src_in_t = src[keep], dst[keep], src_part[keep], src_in_t[keep]
    extra = np.unique(src[~src_in_t])  # N(T) ∩ static, outside T
    extra_pos = static.positions(extra)
    n_t = len(t_nodes)

    def local(ids: np.ndarray, part: np.ndarray, inside: np.ndarray) -> np.ndarray:
        out = np.empty(len(ids), dtype=np.int64)
        out[inside] = ids[inside] + base[part[inside]]
        out[~inside] = n_t + np.searchsorted(extra, ids[~inside])
        return out

    # Edges into T (every destination in T, partitions ascending).
    dst_part = np.repeat(np.asarray(parts), [len(in_edges[p]) for p in parts])[keep]
    t_src = local(src, src_part, src_in_t)
    t_dst = dst + base[dst_part]
    # In-edges of the extra static nodes, from the static cache, kept when their
    # source lies in T or among the extra nodes.
    lengths = static.indptr[extra_pos + 1] - static.indptr[extra_pos]
    s_src = (
        np.concatenate([static.indices[static.indptr[k] : static.indptr[k + 1]] for k in extra_pos])
        if len(extra_pos)
        else np.zeros(0, dtype=np.int64)
    )
    s_dst = np.repeat(np.arange(n_t, n_t + len(extra), dtype=np.int64), lengths)
    s_part = np.searchsorted(offsets, s_src, side="right") - 1
    s_in_t = in_t[s_part]
    s_keep = s_in_t | np.isin(s_src, extra)
    s_local = local(s_src[s_keep], s_part[s_keep], s_in_t[s_keep])
    nodes = np.concatenate([t_nodes, extra])
    all_src = np.concatenate([t_src, s_local])
    all_dst = np.concatenate([t_dst, s_dst[s_keep]])
    # Destinations come in sorted runs (one per source partition): a stable sort
    # by destination is nearly linear and keeps each row's sources in order.
    by = np.argsort(all_dst, kind="stable")
    indices = all_src[by]
    indptr = np.zeros(len(nodes) + 1, dtype=np.int64)
    np.cumsum(np.bincount(all_dst, minlength=len(nodes)), out=indptr[1:])
    x = None
    slots: dict[int, np.ndarray] = {}
    if store.has("features"):
        if static.features is None:
            raise InputError("has features but no static_features.npy", store.path)
        x = np.empty((len(nodes), static.features.shape[1]), dtype=static.features.dtype)
        row = 0
        for p in parts:
            size = int(offsets[p + 1] - offsets[p])
            slots[p] = x[row : row + size]
            row += size
            if p in resident:
                slots[p][...] = resident[p].features
            else:
                began = time.perf_counter()
                store.read_rows("features", [(int(offsets[p]), int(offsets[p + 1]))], slots[p])
                read_seconds += time.perf_counter() - began
                nbytes += slots[p].nbytes
        x[row:] = static.features[extra_pos]
    pieces = {p: PartitionData(slots.get(p), in_edges[p]) for p in parts} if keep_pieces else {}
    return MegaBatch(
        parts,
        nodes,
        indptr,
        indices,
        x,
        pieces,
        nbytes,
        len(missing),
        time.perf_counter() - started,
        read_seconds,
    )


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
        n_d: Partitions in memory at once (:func:`mega_batch_parts`): ``N_d`` of
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
                    self.batch_prefetch,
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
                self.plan, self.split, 1, False, self.batch_size, self.make_sampler
            ) as batches:
                yield from batches
        finally:
            self.source.stats = saved
