"""Variable-length all-to-all over a ``torch.distributed`` group, and sums.

:func:`exchange` sends ``parts[j]`` to rank ``j`` and returns what every rank
sent to this one, in two ``all_to_all_single`` collectives (the row counts,
then the rows), whatever the sizes: a rank with nothing to send takes part
all the same, so ranks that call it equally often never deadlock. :func:`all_reduce_sum`
sums a tensor over the group wherever it lives (NCCL takes CUDA tensors only,
gloo any). :func:`all_gather_fields` gathers every rank's named figures (stats,
counters) as one float64 row each, in a fixed field order.

Ranks exchange tensors only: nothing a peer sends is unpickled (none of
torch's object collectives, whose receiving side runs ``pickle.loads`` on
whatever a peer sent). A peer's bytes can make a wrong number, not run code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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
