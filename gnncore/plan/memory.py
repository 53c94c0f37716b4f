"""How much memory the planners need, and the refusal when a budget is below it.

Both planners hold O(N) arrays and stream the CSR (memory-mapped) in blocks, so
their peak is a few bytes per node plus fixed buffers:

* placement (``spmv``), the largest of three phases: the streaming passes (the
  two path-count vectors and the training ids, ``24 N``, and one block of
  :data:`SPMV_BLOCK_IDS` ids with its weights and the scatter's buffers); the
  ranking of the ``lim = min(N, devices · slots)`` hottest nodes (frequencies,
  training ids and the kernel's copy, ``24 N``, plus ``48 lim``); the
  caches, their sorted lookup tables and the cost masks (``16 N`` and ``36``
  bytes per slot);
* replication: degrees, the degree order, owners and list lengths (``8 N``
  each) plus the sort's scratch (``8 N``).

``reach`` and ``presample`` read the CSR at random through the page cache;
their figure adds a per-thread ``N``-byte mark vector (reach) or the sampler's
buffers (presample), which this estimate does not bound.

The estimates are meant to be safe rather than tight: on a 50M-node graph they
say 2.3 GiB (replication) and 2.5 GiB (placement), and both planners finished
under a 2 GiB cgroup limit (docs/BENCHMARKS.md).
"""

from __future__ import annotations

from gnncore.plan.estimators import SPMV_BLOCK_IDS
from gnncore.plan.store import PlanError
from gnncore.sizes import format_size
from gnncore.usage import peak_rss_bytes

#: The interpreter, numpy and the project's modules: resident before any array.
BASE_BYTES = 450 << 20


def placement_memory_bytes(num_nodes: int, devices: int, slots: int) -> int:
    """Estimated peak bytes of :func:`~gnncore.plan.placement.plan_placement`
    with the ``spmv`` estimator (see the module docstring)."""
    width = min(slots, num_nodes)
    lim = min(num_nodes, devices * width)
    spmv = 24 * num_nodes + 40 * SPMV_BLOCK_IDS
    rank = 24 * num_nodes + 48 * lim
    tables = 16 * num_nodes + 36 * devices * width
    return BASE_BYTES + max(spmv, rank, tables)


def replication_memory_bytes(num_nodes: int) -> int:
    """Estimated peak bytes of :func:`~gnncore.plan.replication.plan_replication`."""
    return BASE_BYTES + 40 * num_nodes


def check_budget(what: str, needed: int, budget: int | None) -> str:
    """A progress line with the estimate; raises :class:`PlanError` naming the
    budget and the minimum when ``budget`` (bytes) is below ``needed``."""
    if budget is not None and budget < needed:
        raise PlanError(
            "memory_budget",
            f"of {format_size(budget)} is below the {format_size(needed)} the {what} "
            f"is estimated to need; raise the budget (or the process's memory limit)",
        )
    room = f" (budget {format_size(budget)})" if budget is not None else ""
    return f"{what}: about {format_size(needed)} of memory needed{room}"


def memory_metrics(needed: int, budget: int | None) -> dict[str, int]:
    """What a finished plan records of its memory (manifest metrics, MLflow):
    the estimate, this process's peak RSS and the budget it ran under (absent
    when unbounded)."""
    out = {"memory_estimate_bytes": needed, "peak_rss_bytes": peak_rss_bytes()}
    if budget is not None:
        out["memory_budget_bytes"] = int(budget)
    return out
