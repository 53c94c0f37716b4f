"""KaMinPar (Gottesbüren, Heuer, Sanders, Schulz, Seemaier), the shared-memory
multilevel partitioner, through the ``kaminpar`` Python package.

The package builds its graph only from a file (``kaminpar.load_graph``: METIS
text or ParHIP binary), so :meth:`KaMinParPartitioner.assign` writes the
symmetric CSR as a ParHIP file in a temporary directory (streamed a chunk at a
time from the graph's ``indptr.npy``/``indices.npy``), loads it, partitions it
under the same node cap as every other method,
``ceil((1 + imbalance) · N / p)`` per part
(:func:`~gnncore.partition.metrics.max_part_size`, passed as KaMinPar's
maximum block weights), and removes the file.

ParHIP binary layout (KaMinPar's ``apps/io/parhip_parser``): a header of three
``uint64`` (a version word of flags, ``n``, ``m`` = adjacency entries, both
directions), then ``n + 1`` offsets, each the *byte* position of the node's
first neighbour in the file, then the ``m`` neighbour ids. A flag bit set in
the version word means "absent" (weights) or "32-bit" (ids, weights).

    from gnncore.partition.kaminpar import KaMinParPartitioner
    labels = KaMinParPartitioner(threads=2).assign(graph, PartitionOptions(parts=8))
"""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from gnncore.partition.base import Partitioner, PartitionOptions, symmetric_graph
from gnncore.partition.metrics import max_part_size
from gnncore.store import GraphDir
from gnncore.store.scratch import scratch

#: ParHIP version flags (a set bit means absent / 32-bit).
_NO_EDGE_WEIGHTS, _NO_NODE_WEIGHTS = 1, 2
_EDGE_ID_32, _NODE_ID_32, _NODE_WEIGHT_32, _EDGE_WEIGHT_32 = 4, 8, 16, 32
PARHIP_HEADER_BYTES = 24
#: Array entries converted and written at a time.
WRITE_CHUNK = 1 << 22


def _chunks(array: np.ndarray, chunk: int) -> Iterator[np.ndarray]:
    """A 1-D array a chunk at a time. A memory-mapped ``.npy`` array is read
    with plain file reads, so the pages do not stay mapped (and resident) in
    this process as they would through the map."""
    # only a map's own array: a view of it keeps the map's offset, not its own
    mapped = array if isinstance(array, np.memmap) and isinstance(array.base, mmap.mmap) else None
    for begin in range(0, len(array), chunk):
        count = min(chunk, len(array) - begin)
        if mapped is not None:
            offset = int(mapped.offset) + begin * array.itemsize
            yield np.fromfile(str(mapped.filename), dtype=array.dtype, count=count, offset=offset)
        else:
            yield np.asarray(array[begin : begin + count])


def write_parhip(
    indptr: np.ndarray,
    indices: np.ndarray,
    path: str | os.PathLike[str],
    chunk: int = WRITE_CHUNK,
) -> int:
    """Write the symmetric CSR ``(indptr, indices)`` as an unweighted ParHIP
    binary graph at ``path``; return the bytes written.

    Node ids are stored in 32 bits when they fit (KaMinPar's 64-bit builds
    widen them on load), offsets in 64 bits. Memory: ``chunk`` entries of
    each array at a time.

    Raises:
        ValueError: ``indptr`` does not start at 0, end at ``len(indices)``,
            or a neighbour id is outside ``[0, n)``.
    """
    n, m = len(indptr) - 1, len(indices)
    if n < 0 or int(indptr[0]) != 0 or int(indptr[-1]) != m:
        raise ValueError(
            f"indptr must run from 0 to len(indices) = {m}, got "
            f"{int(indptr[0]) if len(indptr) else None}..{int(indptr[-1]) if len(indptr) else None}"
        )
    narrow = n <= np.iinfo(np.uint32).max
    id_type = np.dtype(np.uint32 if narrow else np.uint64)
    version = (
        _NO_EDGE_WEIGHTS
        | _NO_NODE_WEIGHTS
        | _NODE_WEIGHT_32
        | _EDGE_WEIGHT_32
        | (_NODE_ID_32 if narrow else 0)
    )
    first_neighbour = PARHIP_HEADER_BYTES + (n + 1) * 8
    with open(path, "wb") as out:
        np.array([version, n, m], dtype="<u8").tofile(out)
        for rows in _chunks(indptr, chunk):
            (first_neighbour + rows.astype(np.uint64) * id_type.itemsize).astype("<u8").tofile(out)
        for ids in _chunks(indices, chunk):
            if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= n):
                bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
                raise ValueError(f"neighbour id {bad} is outside [0, {n})")
            ids.astype(id_type.newbyteorder("<"), copy=False).tofile(out)
        return out.tell()


def resolve_threads(threads: int) -> int:
    """``threads`` > 0 as is; 0: every CPU this process may run on."""
    if threads < 0:
        raise ValueError(f"threads must be >= 0, got {threads}")
    return threads or len(os.sched_getaffinity(0))


class KaMinParPartitioner(Partitioner):
    """KaMinPar's multilevel k-way partitioning (its ``default`` preset).

    Args:
        threads (int): Threads KaMinPar runs (default: 1, deterministic for a
            seed; 0: every CPU this process may use). More threads are faster;
            the labels may then differ from run to run.
        preset (str): A context name from ``kaminpar.context_names()``
            (default: ``"default"``).
    """

    name = "kaminpar"

    def __init__(self, threads: int = 1, preset: str = "default") -> None:
        self.threads = resolve_threads(threads)
        self.preset = preset
        #: Seconds of the last :meth:`assign`: ``write`` (the ParHIP file),
        #: ``load`` (KaMinPar reads it) and ``partition``.
        self.phase_seconds: dict[str, float] = {}

    def assign(self, graph: GraphDir, options: PartitionOptions) -> np.ndarray:
        import kaminpar

        options.validate(graph.num_nodes)
        n = graph.num_nodes
        if options.parts == 1:
            return np.zeros(n, dtype=np.int64)
        if self.preset not in kaminpar.context_names():
            raise ValueError(
                f"unknown KaMinPar preset {self.preset!r}; choose from "
                f"{', '.join(sorted(kaminpar.context_names()))}"
            )
        say = self.progress or (lambda message: None)
        cap = max_part_size(n, options.parts, options.imbalance)
        started = time.perf_counter()
        with scratch("gnncore-kaminpar-") as tmp:
            path = Path(tmp) / "graph.parhip"
            sym = symmetric_graph(graph)
            size = write_parhip(sym.indptr, sym.indices, path)
            del sym
            wrote = time.perf_counter()
            say(
                f"kaminpar: wrote the ParHIP graph ({size / 2**20:,.0f} MiB) "
                f"in {wrote - started:.2f} s"
            )
            loaded_graph = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP)
        loaded = time.perf_counter()
        kaminpar.reseed(options.seed)
        solver = kaminpar.KaMinPar(self.threads, kaminpar.context_by_name(self.preset))
        labels = solver.compute_partition(loaded_graph, [cap] * options.parts)
        del loaded_graph
        assignment = np.fromiter(labels, dtype=np.int64, count=n)
        done = time.perf_counter()
        self.phase_seconds = {
            "write": wrote - started,
            "load": loaded - wrote,
            "partition": done - loaded,
        }
        say(
            f"kaminpar: loaded in {loaded - wrote:.2f} s, partitioned with "
            f"{self.threads} thread(s) in {done - loaded:.2f} s"
        )
        return assignment
