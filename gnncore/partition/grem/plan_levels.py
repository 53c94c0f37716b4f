"""The plan's METIS below its top split, in a background process.

The plan's METIS is a recursive bisection of the cluster graph, and GREM's top
bisection only needs its first split: which side each cluster is planned on.
At a billion edges (a 3.1M-cluster, 9.5M-edge cluster graph, p = 16) the whole
recursion took 113 s on one core while the other waited, and the top GREM
bisection that follows it 154 s on one process. With worker processes
(``workers > 1``), :func:`split_plan` makes the top split here, hands the two
halves to a spawned process (METIS on each half's subgraph, into its share of
the parts) and returns at once: GREM's top bisection runs beside it, and
:meth:`ClusterPlan.completed` collects the halves before the bisections below.

It is the recursion METIS itself runs (each bisection's sides become
subgraphs without the cut edges, split again into their shares of the parts,
with the same balance factor per bisection), with GREM's halving of the parts
(``⌊q/2⌋`` below, ``⌈q/2⌉`` above, METIS's too), not the same random draws:
the plan differs from the one-process plan, and is used only where the
cluster graph has at least :data:`PLAN_SPLIT_MIN_EDGES` edges.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from multiprocessing.connection import Connection

import numpy as np

from gnncore.partition.grem.bisect import halves
from gnncore.partition.task_tree import WorkerError

#: Cluster graphs with fewer edges are planned in one METIS call in this
#: process (the 20M-edge graph's has at most 2^18: METIS takes under a second).
PLAN_SPLIT_MIN_EDGES = 1 << 21

Csr = tuple[np.ndarray, np.ndarray, np.ndarray]


class LowerLevels:
    """The two halves' METIS, running in a spawned process (see the module).

    The halves' subgraphs are sent to it through a pipe by a thread of this
    process, which drops them once sent: they are not held here while the top
    bisection runs (an executor keeps a task's arguments until its result
    comes back: 330 MB at the billion). The process sends back the parts, or
    the exception it raised."""

    def __init__(
        self, payload: tuple[object, ...], low: np.ndarray, high: np.ndarray, first_high: int
    ) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=_halves_process, args=(child,), name="gnncore-plan-levels", daemon=True
        )
        self._process.start()
        child.close()
        self._sender = threading.Thread(
            target=_send, args=(self._conn, payload), name="gnncore-plan-send", daemon=True
        )
        self._sender.start()
        self.low = low
        """Clusters planned below the top split (increasing ids)."""
        self.high = high
        """Clusters planned above it."""
        self.first_high = first_high
        """The first part of the upper side (``⌊p/2⌋``)."""

    def collect(self, clusters: int) -> tuple[np.ndarray, dict[str, float]]:
        """Every one of the ``clusters`` clusters' part, once the halves are done
        (waits), and the background process ended; with the seconds of ``lower
        levels`` (METIS on the halves, in the background) and of ``waited``
        (this call). Raises what the process raised, or :class:`WorkerError`
        when it died."""
        start = time.perf_counter()
        try:
            self._sender.join()
            try:
                result = self._conn.recv()
            except EOFError as error:
                raise WorkerError(
                    "the plan's background METIS process died (killed for memory?)"
                ) from error
        finally:
            self.close()
        if isinstance(result, BaseException):
            raise result
        part_low, part_high, seconds = result
        part = np.empty(clusters, dtype=np.int64)
        part[self.low] = part_low
        part[self.high] = self.first_high + part_high
        return part, {"lower levels": seconds, "waited": time.perf_counter() - start}

    def close(self) -> None:
        """End the background process (stopped if still running); idempotent."""
        if self._process.is_alive():
            self._process.terminate()
        self._process.join()
        self._sender.join()
        self._conn.close()


def _send(conn: Connection, payload: object) -> None:
    """Send ``payload``; a process stopped before it read it ends the send
    (:meth:`LowerLevels.collect` then finds the pipe closed)."""
    try:
        conn.send(payload)
    except OSError:
        pass


def _halves_process(conn: Connection) -> None:
    """The background process: receive the halves, send back their parts."""
    try:
        low, high, seed, imbalance, ncuts = conn.recv()
        result: object = _plan_halves(low, high, seed, imbalance, ncuts)
    except Exception as error:  # sent back and raised by collect()
        result = error
    conn.send(result)
    conn.close()


def split_plan(
    k: int,
    sizes: np.ndarray,
    csr: Csr,
    parts: int,
    seed: int,
    imbalance: float,
    ncuts: int,
) -> tuple[np.ndarray, LowerLevels]:
    """The top split of the cluster graph ``csr`` (METIS, here) and the halves
    handed to a background process: a provisional part per cluster (``0``
    below the split, ``⌊p/2⌋`` above: the top bisection's sides, supports and
    counts as the whole plan's) and the :class:`LowerLevels` that completes it."""
    q0, q1 = halves(parts)
    top = metis_parts(k, sizes, csr, 2, seed, imbalance, ncuts, shares=(q0, q1))
    high_side = top == 1
    low, high = np.flatnonzero(~high_side), np.flatnonzero(high_side)
    sub_low = side_subgraph(csr, high_side, False, low)
    sub_high = side_subgraph(csr, high_side, True, high)
    payload = ((sizes[low], sub_low, q0), (sizes[high], sub_high, q1), seed, imbalance, ncuts)
    del sub_low, sub_high
    lower = LowerLevels(payload, low, high, q0)
    del payload  # the sender thread drops it once sent
    provisional = np.where(high_side, q0, 0).astype(np.int64)
    return provisional, lower


def metis_parts(
    k: int,
    sizes: np.ndarray,
    csr: Csr | None,
    parts: int,
    seed: int,
    imbalance: float,
    ncuts: int,
    shares: tuple[int, ...] | None = None,
) -> np.ndarray:
    """A part per cluster: METIS recursive bisection of the cluster graph
    (vertex weights = cluster sizes, edge weights = edge counts, the best of
    ``ncuts`` tries) given as :func:`~gnncore.partition.grem.plan.cluster_csr`'s
    arrays (``None`` when ``k <= parts``). ``shares``: the parts' relative
    target weights (default: equal)."""
    if csr is None or k <= parts:  # tiny graphs: one cluster per part, spread over the range
        return np.arange(k, dtype=np.int64) * parts // max(k, 1)
    import pymetis

    xadj, adjncy, weights = csr
    options = pymetis.Options()
    options.seed = seed
    options.ufactor = int(round(imbalance * 1000))
    options.ncuts = ncuts
    tpwgts = None if shares is None else [share / sum(shares) for share in shares]
    result = pymetis.part_graph(
        parts,
        pymetis.CSRAdjacency(xadj, adjncy),
        vweights=np.maximum(sizes, 1),
        eweights=weights,
        tpwgts=tpwgts,
        recursive=True,
        options=options,
    )
    return np.asarray(result.vertex_part, dtype=np.int64)


def side_subgraph(csr: Csr, high_side: np.ndarray, side: bool, members: np.ndarray) -> Csr:
    """The subgraph of ``csr`` on the clusters of one side (``members``,
    increasing), in their ranks: the edges with both ends on that side, each
    row's neighbours in the same order, weights kept."""
    xadj, adjncy, weights = csr
    rows = np.repeat(np.arange(len(xadj) - 1), np.diff(xadj))
    keep = (high_side[rows] == side) & (high_side[adjncy] == side)
    rank = np.full(len(high_side), -1, dtype=np.int64)
    rank[members] = np.arange(len(members))
    sub_rows = rank[rows[keep]]
    del rows
    sub_xadj = np.zeros(len(members) + 1, dtype=np.int64)
    np.cumsum(np.bincount(sub_rows, minlength=len(members)), out=sub_xadj[1:])
    return sub_xadj, rank[adjncy[keep]], np.ascontiguousarray(weights[keep])


def _plan_halves(
    low: tuple[np.ndarray, Csr, int],
    high: tuple[np.ndarray, Csr, int],
    seed: int,
    imbalance: float,
    ncuts: int,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Each half's parts (``[0, share)``) by METIS, in the background process."""
    start = time.perf_counter()
    out = []
    for sizes, csr, share in (low, high):
        out.append(metis_parts(len(sizes), sizes, csr, share, seed, imbalance, ncuts))
    return out[0], out[1], time.perf_counter() - start


__all__ = ["PLAN_SPLIT_MIN_EDGES", "LowerLevels", "metis_parts", "side_subgraph", "split_plan"]
