"""The exchange primitives on 2 real gloo ranks: the variable-length all-to-all and
the sum that keeps a tensor on its device."""

from __future__ import annotations

import torch

from gnncore.distributed.launch import spawn_local


def _rank(rank: int, world: int) -> dict:
    from gnncore.distributed.exchange import all_reduce_sum, exchange

    # Rank r sends r + j + 1 rows of (r, j) to rank j; one of them sends nothing.
    parts = [
        torch.tensor(
            [[rank, j]] * (0 if (rank, j) == (1, 0) else rank + j + 1), dtype=torch.int64
        ).reshape(-1, 2)
        for j in range(world)
    ]
    received = exchange(parts)
    counts = torch.tensor([rank + 1, 10 * (rank + 1)], dtype=torch.float64)
    summed = all_reduce_sum(counts)
    return {
        "received": [r.tolist() for r in received],
        "summed": summed.tolist(),
        "in_place": summed is counts,  # gloo takes CPU tensors: no copy
        "dtype": str(summed.dtype),
    }


def test_exchange_and_sum_on_two_ranks() -> None:
    out = spawn_local(_rank, 2, run_timeout=120)
    for me, result in enumerate(out):
        for sender, rows in enumerate(result["received"]):
            n = 0 if (sender, me) == (1, 0) else sender + me + 1
            assert rows == [[sender, me]] * n
        assert result["summed"] == [3.0, 30.0]
        assert result["in_place"] and result["dtype"] == "torch.float64"
