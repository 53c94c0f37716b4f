r"""Link prediction through a partition buffer (MariusGNN, ALGORITHMS.md §6).

The node embeddings and their Adagrad sums live on disk
(:class:`DiskEmbeddings`), nodes split at random into ``p`` partitions of
(nearly) equal size, each one contiguous block of rows. The model's embedding
table is the **buffer**: ``c`` partition slots (:attr:`LinkBufferSource.embedding_rows`
rows). An epoch walks a sequence of buffer states (BETA, or COMET's random
logical partitions, :mod:`gnncore.outofcore.ordering`): at each state the
partitions leaving the buffer are written back (rows and Adagrad sums), those
entering are read (the next state's in a background thread while the current
one trains), and the training triples of the edge buckets assigned to the
state are trained, every one exactly once per epoch, each mini-batch's
negatives drawn uniformly from the nodes in the buffer.

Evaluation reads the whole table from disk (:meth:`LinkBufferSource.node_embeddings`),
so it needs ``N·dim`` floats in memory; the returned model carries the table of
the best epoch (:meth:`LinkBufferSource.keep_best`).

Checkpoints: the table on disk is not in the checkpoint file, so before each
checkpoint is written the source snapshots it beside it
(:meth:`LinkBufferSource.checkpoint_files`): ``epoch-<k>.embeddings.npy``,
``epoch-<k>.adagrad.npy`` and, when the best epoch is an earlier one,
``epoch-<k>.best.npy`` (a hard link to the earlier snapshot), each written
atomically and recorded in the checkpoint by name, size and sha256. A resumed
run copies the snapshot of its checkpoint over the live files, checking every
byte (:meth:`LinkBufferSource.restore_files`): the live files of a killed run
may hold a half-trained epoch and are never read.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from gnncore.outofcore.ordering import (
    BufferPlan,
    beta_states,
    comet_epoch,
    first_cover_buckets,
    swap_count,
)
from gnncore.outofcore.reader import read_rows
from gnncore.outofcore.stats import StepStats
from gnncore.train.core.checkpoint import Checkpoint, CheckpointDir, CheckpointError

_ROWS = 1 << 16


@dataclass(frozen=True)
class NodePartitions:
    """Nodes split into ``parts`` ranges of the new ids: ``order[new] = old``,
    ``node_map[old] = new``, partition ``i`` holds ``offsets[i]:offsets[i+1]``."""

    order: np.ndarray
    node_map: np.ndarray
    offsets: np.ndarray

    @classmethod
    def random(cls, num_nodes: int, parts: int, seed: int) -> NodePartitions:
        """A seeded random split into ``parts`` sizes differing by at most one."""
        if not 1 <= parts <= max(num_nodes, 1):
            raise ValueError(f"cannot split {num_nodes} nodes into {parts} partitions")
        order = np.random.default_rng([seed, 0x4255]).permutation(num_nodes).astype(np.int64)
        node_map = np.empty(num_nodes, dtype=np.int64)
        node_map[order] = np.arange(num_nodes, dtype=np.int64)
        sizes = np.full(parts, num_nodes // parts, dtype=np.int64)
        sizes[: num_nodes % parts] += 1
        offsets = np.zeros(parts + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        return cls(order, node_map, offsets)

    @property
    def parts(self) -> int:
        return len(self.offsets) - 1

    def part_of(self, new_ids: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.offsets, new_ids, side="right") - 1


class DiskEmbeddings:
    """Embeddings ``[N, dim]`` and Adagrad sums of the new ids, as two ``.npy``
    files in ``directory``; partitions are read with sequential ``pread`` and
    written back with ``pwrite`` (both release the GIL).

    Initialised like ``torch.nn.init.xavier_normal_`` on an ``[N, dim]`` table
    (seeded), the sums at zero (Adagrad's default)."""

    def __init__(self, directory: Path, partitions: NodePartitions, dim: int, seed: int) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.partitions, self.dim = partitions, dim
        n = len(partitions.order)
        std = (2.0 / (n + dim)) ** 0.5
        rng = np.random.default_rng([seed, 0x454D42])
        self.paths = {
            "weight": self.directory / "embeddings.npy",
            "sum": self.directory / "adagrad.npy",
        }
        for name, path in self.paths.items():
            table = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, dim))
            for start in range(0, n, _ROWS):
                stop = min(n, start + _ROWS)
                block = table[start:stop]
                block[...] = rng.normal(0.0, std, block.shape) if name == "weight" else 0.0
            table.flush()
            del table
        self.header = {name: _header_bytes(path, n, dim) for name, path in self.paths.items()}

    def rows(self, part: int) -> tuple[int, int]:
        offsets = self.partitions.offsets
        return int(offsets[part]), int(offsets[part + 1])

    def read(self, part: int) -> dict[str, np.ndarray]:
        """The partition's embedding rows and Adagrad sums."""
        lo, hi = self.rows(part)
        return {
            name: read_rows(path, self.header[name], np.float32, (self.dim,), lo, hi)
            for name, path in self.paths.items()
        }

    def write(self, part: int, arrays: dict[str, np.ndarray]) -> None:
        """Write a partition's rows back (``arrays``: as :meth:`read` returns)."""
        lo, _ = self.rows(part)
        for name, path in self.paths.items():
            data = np.ascontiguousarray(arrays[name], dtype=np.float32)
            offset = self.header[name] + lo * self.dim * 4
            view, done = data.data.cast("B"), 0
            with path.open("r+b") as f:
                while done < len(view):  # pwrite may write less than asked
                    written = os.pwrite(f.fileno(), view[done:], offset + done)
                    if written <= 0:
                        raise OSError(f"{path}: write failed at byte {offset + done}")
                    done += written

    def check(self, name: str, origin: Path) -> None:
        """Raise :class:`CheckpointError` (naming ``origin``, where the file came
        from) unless the ``name`` file is a float32 ``[N, dim]`` table with the
        header this table was made with."""
        n = len(self.partitions.order)
        try:
            table = np.load(self.paths[name], mmap_mode="r", allow_pickle=False)
            good = table.dtype == np.float32 and table.shape == (n, self.dim)
            good = good and _header_bytes(self.paths[name], n, self.dim) == self.header[name]
        except (OSError, ValueError):
            good = False
        if not good:
            raise CheckpointError(f"{origin}: not a float32 [{n}, {self.dim}] table")

    def table(self, name: str = "weight") -> np.ndarray:
        """The whole table (memory-mapped, read-only), rows in new-id order."""
        return np.load(self.paths[name], mmap_mode="r", allow_pickle=False)


def _header_bytes(path: Path, rows: int, dim: int) -> int:
    return path.stat().st_size - rows * dim * 4


def buffer_plan(ordering: str, parts: int, capacity: int, rng: np.random.Generator) -> BufferPlan:
    """One epoch's states and buckets: BETA over ``parts`` with ``capacity``, or
    COMET with ``l = 2·parts/capacity`` logical partitions, two in the buffer
    (so the buffer holds about ``capacity`` physical partitions)."""
    if ordering == "beta":
        states = beta_states(parts, capacity, rng)
        return BufferPlan(states, first_cover_buckets(states, parts), None, swap_count(states))
    if ordering == "comet":
        logical = max(2, min(parts, round(2 * parts / capacity)))
        return comet_epoch(parts, logical, 2, rng)
    raise ValueError(f"ordering must be 'beta' or 'comet', not {ordering!r}")


def slots_needed(ordering: str, parts: int, capacity: int) -> int:
    """Partition slots the buffer needs (COMET's logical groups differ by one)."""
    if ordering == "comet":
        logical = max(2, min(parts, round(2 * parts / capacity)))
        return 2 * -(-parts // logical)
    return capacity


class LinkBufferSource:
    """Link-prediction batches through a partition buffer, as a
    :class:`~gnncore.train.core.batches.BatchSource` for
    :func:`~gnncore.train.fit` of a :class:`~gnncore.train.LinkTask` (learned
    embeddings, ``model="none"``).

    Args:
        heads, tails: The training edges as the loop indexes them (``input_id``
            of a batch is a row of these, and the loop looks its relation up by
            it; reciprocal forms included).
        num_nodes: Nodes of the graph.
        dim: Embedding width.
        work_dir: Where the on-disk tables go (created; removed by :meth:`close`).
        parts, capacity, ordering: ``p`` partitions, buffer of ``c``, ``"beta"``
            or ``"comet"``.
        batch_size, num_negatives: Triples per mini-batch; negatives per batch,
            uniform over the nodes in the buffer.
        generator: Draws the orderings, bucket shuffles and negatives; a
            checkpoint records it.
        seed: Seeds the partition split and the initial embeddings.
        log: One line per buffer state (CLI / Dagster progress).
    """

    def __init__(
        self,
        heads: np.ndarray,
        tails: np.ndarray,
        num_nodes: int,
        dim: int,
        work_dir: str | os.PathLike[str],
        parts: int,
        capacity: int,
        ordering: str,
        batch_size: int,
        num_negatives: int,
        generator: torch.Generator,
        seed: int = 0,
        log: Callable[[str], None] | None = None,
    ) -> None:
        from gnncore.store.feature_store import EmptyFeatureStore

        if not 2 <= capacity <= parts:
            raise ValueError(f"the buffer needs 2 <= capacity <= parts; got {capacity}, {parts}")
        self.work_dir = Path(work_dir)
        self.partitions = NodePartitions.random(num_nodes, parts, seed)
        self.disk = DiskEmbeddings(self.work_dir, self.partitions, dim, seed)
        self.ordering, self.capacity = ordering, capacity
        self.batch_size, self.num_negatives = batch_size, num_negatives
        self.generator, self.log = generator, log
        self.feature_store = EmptyFeatureStore()
        self.slots = slots_needed(ordering, parts, capacity)
        sizes = np.diff(self.partitions.offsets)
        self.slot_rows = int(sizes.max())
        #: Rows of the model's embedding table: the buffer.
        self.embedding_rows = self.slots * self.slot_rows
        new_heads = self.partitions.node_map[np.asarray(heads, dtype=np.int64)]
        new_tails = self.partitions.node_map[np.asarray(tails, dtype=np.int64)]
        bucket = self.partitions.part_of(new_heads) * parts + self.partitions.part_of(new_tails)
        self._by_bucket = np.argsort(bucket, kind="stable")
        self._bucket_offsets = np.zeros(parts * parts + 1, dtype=np.int64)
        np.cumsum(np.bincount(bucket, minlength=parts * parts), out=self._bucket_offsets[1:])
        self._heads, self._tails = new_heads, new_tails
        self.num_edges = len(new_heads)
        self.stats = StepStats()
        self._weight: torch.Tensor | None = None
        self._optimizer: torch.optim.Optimizer | None = None
        self._slot_of: dict[int, int] = {}
        self._base = np.zeros(parts, dtype=np.int64)
        self._rows = np.zeros(0, dtype=np.int64)
        self._plan: BufferPlan | None = None
        self._best = self.work_dir / "best_embeddings.npy"
        self._use_best = False
        # The snapshot file holding the best epoch's table (checkpointed runs).
        self._best_record: dict[str, Any] | None = None

    # Hooks the link loop calls --------------------------------------------

    def bind(self, model: Any, optimizer: torch.optim.Optimizer) -> None:
        """Take the model's embedding table (the buffer) and its Adagrad sums."""
        weight = model.embedding.weight
        if weight.size(0) != self.embedding_rows:
            raise ValueError(
                f"the model's table has {weight.size(0)} rows, the buffer {self.embedding_rows}"
            )
        self._weight, self._optimizer = weight, optimizer
        self._sums()  # Adagrad keeps its sums from the start

    def __len__(self) -> int:
        return -(-self.num_edges // self.batch_size) + self.partitions.parts**2

    def start_epoch(self, epoch: int) -> None:
        seed = int(torch.randint(0, 2**62, (1,), generator=self.generator))
        self._plan = buffer_plan(
            self.ordering, self.partitions.parts, self.capacity, np.random.default_rng(seed)
        )
        self.stats = StepStats()
        self._use_best = False

    def batches(self) -> AbstractContextManager[Iterator[Any]]:
        return self._epoch()

    def end_epoch(self, epoch: int) -> None:
        """Write every partition in the buffer back, so the table on disk is whole."""
        for part in list(self._slot_of):
            self._evict(part)

    def random_state(self) -> tuple[torch.Generator, dict[str, Any]]:
        return self.generator, {}

    def adapt(self, epoch: int, throughput: dict[str, float]) -> dict[str, float]:
        """The epoch's buffer figures, logged with it."""
        return self.stats.figures("buffer_", "states", written=True)

    def node_embeddings(self) -> torch.Tensor:
        """Every node's embedding ``[N, dim]`` in original ids, from disk (the
        best epoch's after :meth:`restore_best`)."""
        path = self._best if self._use_best else self.disk.paths["weight"]
        table = np.load(path, mmap_mode="r", allow_pickle=False)
        return torch.from_numpy(np.asarray(table[self.partitions.node_map]))

    def keep_best(self) -> None:
        """Copy the table on disk as the best epoch's (called after an epoch that
        improved the validation metric, once :meth:`end_epoch` wrote it back)."""
        shutil.copyfile(self.disk.paths["weight"], self._best)

    def restore_best(self) -> None:
        """Evaluate from the best epoch's table from now on."""
        self._use_best = self._best.is_file()

    def checkpoint_files(
        self, store: CheckpointDir, epoch: int, progress: dict[str, Any]
    ) -> dict[str, Any]:
        """Snapshot the table on disk (whole after :meth:`end_epoch`) beside epoch
        ``epoch``'s checkpoint, before it is written; the records it keeps. The
        best epoch's table (``progress["best_epoch"]``) is this snapshot, or the
        one an earlier checkpoint recorded (hard-linked)."""
        files: dict[str, Any] = {
            "weight": store.attach(epoch, "embeddings.npy", self.disk.paths["weight"]),
            "sum": store.attach(epoch, "adagrad.npy", self.disk.paths["sum"]),
        }
        best_epoch = int(progress["best_epoch"])
        if best_epoch == epoch:
            best = files["weight"]
        elif self._best_record is not None:
            best = store.attach_link(epoch, "best.npy", self._best_record)
        elif self._best.is_file():  # checkpoints began after the best epoch
            best = store.attach(epoch, "best.npy", self._best)
        else:
            best = None
        files["best"], files["best_epoch"] = best, best_epoch
        self._best_record = best
        return files

    def restore_files(self, store: CheckpointDir, checkpoint: Checkpoint) -> None:
        """Resuming from ``checkpoint``: copy its snapshot over the live table,
        Adagrad sums and best table (never trusting what a killed run left there).

        Raises:
            CheckpointError: When the checkpoint records no snapshot, or a
                snapshot file is missing or damaged (naming the file).
        """
        files = checkpoint.state.get("files")
        if not isinstance(files, dict) or not {"weight", "sum", "best"} <= files.keys():
            raise CheckpointError(
                f"{checkpoint.path}: records no snapshot of the partition buffer's tables "
                "(written before gnncore kept them), so it cannot be resumed: start afresh"
            )
        self._slot_of = {}  # the buffer is empty between epochs
        for name, path in self.disk.paths.items():
            store.restore_file(files[name], path)
            self.disk.check(name, store.directory / files[name]["name"])
        if files["best"] is not None:
            store.restore_file(files["best"], self._best)
        else:
            self._best.unlink(missing_ok=True)
        self._best_record = files["best"]
        self._use_best = False

    def close(self) -> None:
        """Remove the on-disk tables."""
        shutil.rmtree(self.work_dir, ignore_errors=True)

    # The epoch ---------------------------------------------------------------

    def _sums(self) -> torch.Tensor:
        """Adagrad's sums of the buffer (looked up each time: loading a
        checkpoint's optimizer state replaces the tensor)."""
        assert self._weight is not None and self._optimizer is not None, "bind first"
        return self._optimizer.state[self._weight]["sum"]

    def _evict(self, part: int) -> None:
        assert self._weight is not None
        slot = self._slot_of.pop(part)
        lo, hi = self.disk.rows(part)
        rows = slice(slot * self.slot_rows, slot * self.slot_rows + hi - lo)
        with torch.no_grad():
            arrays = {
                "weight": self._weight[rows].detach().cpu().numpy(),
                "sum": self._sums()[rows].detach().cpu().numpy(),
            }
        self.disk.write(part, arrays)
        self.stats.bytes_written += sum(a.nbytes for a in arrays.values())

    def _admit(self, part: int, arrays: dict[str, np.ndarray]) -> None:
        assert self._weight is not None
        free = sorted(set(range(self.slots)) - set(self._slot_of.values()))[0]
        self._slot_of[part] = free
        start = free * self.slot_rows
        rows = slice(start, start + len(arrays["weight"]))
        with torch.no_grad():
            self._weight[rows] = torch.from_numpy(arrays["weight"]).to(self._weight.device)
            sums = self._sums()
            sums[rows] = torch.from_numpy(arrays["sum"]).to(sums.device)

    def _read(self, parts: Sequence[int]) -> tuple[dict[int, dict[str, np.ndarray]], float, int]:
        started = time.perf_counter()
        read = {p: self.disk.read(p) for p in parts}
        nbytes = sum(a.nbytes for arrays in read.values() for a in arrays.values())
        return read, time.perf_counter() - started, nbytes

    @contextmanager
    def _epoch(self) -> Iterator[Iterator[Any]]:
        if self._weight is None:
            raise RuntimeError("bind(model, optimizer) before iterating the buffer")
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gnncore-linkbuffer")
        try:
            yield self._generate(pool)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _generate(self, pool: ThreadPoolExecutor) -> Iterator[Any]:
        plan = self._plan
        assert plan is not None, "start_epoch first"
        states = [tuple(sorted(set(s))) for s in plan.states]
        seeds = torch.randint(0, 2**62, (len(states),), generator=self.generator).tolist()

        def incoming(k: int, held: set[int]) -> list[int]:
            return [p for p in states[k] if p not in held]

        pending: Future[Any] | None = pool.submit(self._read, incoming(0, set(self._slot_of)))
        for k, state in enumerate(states):
            assert pending is not None
            waited = time.perf_counter()
            read, seconds, nbytes = pending.result()
            wait = time.perf_counter() - waited
            for part in [p for p in self._slot_of if p not in state]:
                self._evict(part)  # synchronous: a later read sees the written rows
            for part, arrays in read.items():
                self._admit(part, arrays)
            self._place()
            pending = None
            if k + 1 < len(states):
                pending = pool.submit(self._read, incoming(k + 1, set(state)))
            self._count(k, state, len(read), seconds, nbytes, wait)
            yield from self._state_batches(plan.buckets[k], int(seeds[k]))

    def _count(
        self, k: int, state: tuple[int, ...], read: int, seconds: float, nbytes: int, wait: float
    ) -> None:
        self.stats.record(read, nbytes, seconds, wait)
        if self.log is not None:
            self.log(
                f"buffer state {k + 1}: partitions {list(state)} ({read} read, "
                f"{nbytes / 2**20:.1f} MiB in {seconds:.2f} s, waited {wait:.2f} s)"
            )

    def _local(self, new_ids: np.ndarray) -> np.ndarray:
        """Buffer rows of new ids (their partitions must be in the buffer)."""
        return self._base[self.partitions.part_of(new_ids)] + new_ids

    def _place(self) -> None:
        """After a swap: each buffered partition's row offset in the buffer (0 for
        partitions on disk, never indexed) and the rows in use."""
        base = np.zeros(self.partitions.parts, dtype=np.int64)
        for p, s in self._slot_of.items():
            base[p] = s * self.slot_rows - self.partitions.offsets[p]
        self._base = base
        self._rows = self._buffer_rows()

    def _buffer_rows(self) -> np.ndarray:
        return np.concatenate(
            [
                np.arange(s * self.slot_rows, s * self.slot_rows + hi - lo, dtype=np.int64)
                for p, s in sorted(self._slot_of.items())
                for lo, hi in [self.disk.rows(p)]
            ]
        )

    def _state_batches(self, buckets: Sequence[tuple[int, int]], seed: int) -> Iterator[Any]:
        p = self.partitions.parts
        edges = np.concatenate(
            [
                self._by_bucket[
                    self._bucket_offsets[i * p + j] : self._bucket_offsets[i * p + j + 1]
                ]
                for i, j in buckets
            ]
            or [np.zeros(0, dtype=np.int64)]
        )
        if not len(edges):
            return
        rng = np.random.default_rng(seed)
        edges = edges[rng.permutation(len(edges))]
        rows = self._rows
        for start in range(0, len(edges), self.batch_size):
            ids = edges[start : start + self.batch_size]
            heads, tails = self._local(self._heads[ids]), self._local(self._tails[ids])
            negatives = rows[rng.integers(0, len(rows), self.num_negatives)]
            b, k = len(ids), self.num_negatives
            yield Data(
                n_id=torch.from_numpy(np.concatenate([heads, tails, negatives])),
                edge_index=torch.zeros((2, 0), dtype=torch.long),
                src_index=torch.arange(b),
                dst_pos_index=torch.arange(b, 2 * b),
                dst_neg_index=torch.arange(2 * b, 2 * b + k),
                input_id=torch.from_numpy(ids),
                num_nodes=2 * b + k,
            )


def link_buffer_source(
    splits: Any,
    config: Any,
    work_dir: str | os.PathLike[str],
    log: Callable[[str], None] | None = None,
) -> LinkBufferSource:
    """The partition buffer of a :class:`~gnncore.train.LinkTrainConfig` with
    ``mode="partition_buffer"`` over ``splits``' training triples (reciprocal
    forms included as the loop trains them), its tables under ``work_dir``."""
    from gnncore.train.link.loop import training_edges

    reciprocal = config.reciprocal and not splits.symmetric
    edge_index, _ = training_edges(splits, reciprocal)
    return LinkBufferSource(
        edge_index[0].numpy(),
        edge_index[1].numpy(),
        splits.num_nodes,
        config.dim,
        work_dir,
        config.buffer_partitions,
        config.buffer_capacity,
        config.buffer_ordering,
        config.batch_size,
        config.num_negatives,
        torch.Generator().manual_seed(config.seed),
        seed=config.seed,
        log=log,
    )
