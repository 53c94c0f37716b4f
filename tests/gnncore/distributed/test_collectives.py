"""The exchange primitives on 2 real gloo ranks: the variable-length all-to-all,
the sum that keeps a tensor on its device, and the fixed-layout gather of named
figures that replaced ``all_gather_object`` (nothing a peer sends is unpickled)."""

from __future__ import annotations

import torch

from gnncore.distributed.launch import spawn_local


def _rank(rank: int, world: int) -> dict:
    from gnncore.distributed.collectives import all_gather_fields, all_reduce_sum, exchange

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
    # Named figures in a fixed order; the dict's own order does not matter.
    fields = ("rows", "share", "big")
    figures = {"big": 2.0**52 + rank, "share": 0.25 * (rank + 1), "rows": 10 * rank}
    gathered = all_gather_fields(figures, fields)
    try:
        all_gather_fields({"rows": 1.0}, fields)  # a layout mismatch: refused before sending
        mismatch = ""
    except ValueError as exc:
        mismatch = str(exc)
    return {
        "gathered": gathered,
        "mismatch": mismatch,
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
        assert result["gathered"] == [
            {"rows": 0.0, "share": 0.25, "big": 2.0**52},
            {"rows": 10.0, "share": 0.5, "big": 2.0**52 + 1},
        ]
        assert [list(g) for g in result["gathered"]] == [["rows", "share", "big"]] * 2
        assert "are not the fields ['rows', 'share', 'big']" in result["mismatch"]
