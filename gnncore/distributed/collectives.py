"""The collectives of the ranks: all-to-all, sums, gathers, and balanced shares.

:func:`exchange` sends ``parts[j]`` to rank ``j`` and returns what every rank
sent to this one, in two ``all_to_all_single`` collectives (the row counts,
then the rows), whatever the sizes: a rank with nothing to send takes part
all the same, so ranks that call it equally often never deadlock. :func:`all_reduce_sum`
sums a tensor over the group wherever it lives (NCCL takes CUDA tensors only,
gloo any). :func:`all_gather_fields` gathers every rank's named figures (stats,
counters) as one float64 row each, in a fixed field order.

On top of those, the balancing every batch source starts with: a split whose
rows each rank owns a share of is rebalanced so that every rank ends with
``T // W`` or ``T // W + 1`` of the ``T`` rows (:func:`transfer_plan`,
:func:`balance_rows`, :func:`balance_ids`), moving as few as possible; and
:func:`max_over`, the count every rank agrees on (batches per epoch).

Ranks exchange tensors only: nothing a peer sends is unpickled (none of
torch's object collectives, whose receiving side runs ``pickle.loads`` on
whatever a peer sent). A peer's bytes can make a wrong number, not run code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist


def comm_device(group: Any = None) -> torch.device:
    """Where the group's collectives need their tensors: the current CUDA device
    for NCCL, else the CPU."""
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def exchange(
    parts: list[torch.Tensor], group: Any = None, device: torch.device | None = None
) -> list[torch.Tensor]:
    """Send ``parts[j]`` (rows of one dtype and row shape on every rank) to rank
    ``j``; return the rows received from each rank, on the CPU.

    Args:
        parts (list[Tensor]): One tensor per rank of the group (its own included,
            which is copied through like the others).
        group (ProcessGroup, optional): The group (default: the default group).
        device (torch.device, optional): Where the collectives run (default:
            :func:`comm_device`).
    """
    world = dist.get_world_size(group)
    if len(parts) != world:
        raise ValueError(f"exchange needs one part per rank ({world}), got {len(parts)}")
    device = comm_device(group) if device is None else device
    row_shape = tuple(parts[0].shape[1:])
    dtype = parts[0].dtype
    send_counts = torch.tensor([len(p) for p in parts], dtype=torch.int64)
    recv_counts = torch.empty(world, dtype=torch.int64, device=device)
    dist.all_to_all_single(recv_counts, send_counts.to(device), group=group)
    recv = recv_counts.cpu().tolist()
    payload = torch.cat([p.reshape(len(p), *row_shape) for p in parts])
    out = torch.empty((sum(recv), *row_shape), dtype=dtype, device=device)
    dist.all_to_all_single(out, payload.to(device), recv, send_counts.tolist(), group=group)
    return list(torch.split(out.cpu(), recv))


def all_reduce_sum(tensor: torch.Tensor, group: Any = None) -> torch.Tensor:
    """``tensor`` summed over the group's ranks (a collective), on ``tensor``'s
    device: reduced in place where the backend takes it (:func:`comm_device`),
    else through a copy there."""
    device = comm_device(group)
    if tensor.device == device:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
        return tensor
    moved = tensor.to(device)
    dist.all_reduce(moved, op=dist.ReduceOp.SUM, group=group)
    return moved.to(tensor.device)


def all_gather_fields(
    values: Mapping[str, float], fields: Sequence[str], group: Any = None
) -> list[dict[str, float]]:
    """Every rank's ``values`` (a collective), in rank order, as ``{field: value}``.

    The layout is fixed: ``fields`` names the columns of one float64 row per
    rank, in order, and every rank passes the same ``fields``; the rows travel
    as one ``[world, len(fields)]`` tensor. Integers up to 2**53 come back exact
    (as floats).

    Args:
        values (Mapping[str, float]): This rank's figures: exactly the keys of
            ``fields``.
        fields (Sequence[str]): The field names, in the row's order (the same on
            every rank).
        group (ProcessGroup, optional): The group (default: the default group).

    Raises:
        ValueError: ``values`` has other keys than ``fields``.
    """
    if set(values) != set(fields) or len(set(fields)) != len(fields):
        raise ValueError(
            f"all_gather_fields: the values' keys {sorted(values)} are not the fields "
            f"{list(fields)}"
        )
    device = comm_device(group)
    world = dist.get_world_size(group)
    row = torch.tensor([float(values[f]) for f in fields], dtype=torch.float64, device=device)
    rows = [torch.empty_like(row) for _ in range(world)]
    dist.all_gather(rows, row, group=group)
    return [dict(zip(fields, r.cpu().tolist(), strict=True)) for r in rows]


# Balanced shares ---------------------------------------------------------------


def transfer_plan(counts: Any) -> np.ndarray:
    """``moves[i, j]``: how many of rank ``i``'s ids go to rank ``j`` so that every
    rank ends with ``T // W`` or ``T // W + 1`` of the ``T = sum(counts)`` ids,
    moving as few as possible (the ranks owning the most keep the extra ones;
    ties by rank). Surpluses are matched to deficits in rank order."""
    counts = np.asarray(counts, dtype=np.int64)
    world = len(counts)
    total = int(counts.sum())
    target = np.full(world, total // world, dtype=np.int64)
    order = np.lexsort((np.arange(world), -counts))  # most first, ties by rank
    target[order[: total % world]] += 1
    surplus = counts - target
    moves = np.zeros((world, world), dtype=np.int64)
    givers = [int(r) for r in np.flatnonzero(surplus > 0)]
    takers = [int(r) for r in np.flatnonzero(surplus < 0)]
    left = surplus.copy()
    t = 0
    for g in givers:
        while left[g] > 0:
            r = takers[t]
            n = min(int(left[g]), int(-left[r]))
            moves[g, r] += n
            left[g] -= n
            left[r] += n
            if left[r] == 0:
                t += 1
    return moves


def all_counts(n: int, group: Any = None) -> np.ndarray:
    """``n`` of every rank, in rank order (a collective)."""
    return all_gather_ints([n], group)


def all_gather_ints(values: list[int], group: Any = None) -> np.ndarray:
    """``values`` of every rank, concatenated in rank order (a collective)."""
    device = comm_device(group)
    world = dist.get_world_size(group)
    mine = torch.tensor(values, dtype=torch.int64, device=device)
    out = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(out, mine, group=group)
    return torch.cat(out).cpu().numpy()


def balance_ids(own: np.ndarray, seed: int, group: Any = None) -> np.ndarray:
    """This rank's share of a split whose ids each rank owns ``own`` of
    (a collective): its own ids less those handed on (a random subset drawn
    from ``(seed, rank)``), plus those received (:func:`transfer_plan`). Sorted."""
    own = np.sort(np.asarray(own, dtype=np.int64))
    return np.sort(balance_rows(own, seed, group))


def balance_rows(own: np.ndarray, seed: int, group: Any = None) -> np.ndarray:
    """This rank's share of int64 rows (ids, or ``[n, k]`` triples) of which each
    rank owns ``own`` (a collective): the rows it keeps, in their order, then
    those received from each rank in rank order. Ranks with a surplus hand on a
    random subset (drawn from ``(seed, rank)``, in their order) to the ranks
    short of rows (:func:`transfer_plan`)."""
    rank = dist.get_rank(group)
    own = np.asarray(own, dtype=np.int64)
    moves = transfer_plan(all_counts(len(own), group))
    give = moves[rank]
    order = np.random.default_rng([seed, 7919, rank]).permutation(len(own))
    handed = own[np.sort(order[: int(give.sum())])]
    parts = list(torch.split(torch.from_numpy(handed), give.tolist()))
    received = exchange(parts, group)
    kept = own[np.sort(order[int(give.sum()) :])]
    return np.concatenate([kept, *[r.numpy().reshape(-1, *own.shape[1:]) for r in received]])


def max_over(value: int, group: Any = None) -> int:
    """The largest ``value`` of the ranks (a collective)."""
    return int(all_counts(value, group).max())
