"""Aggregating a projected layer with its products on disk
(``gnncore.train.core.aggregate``): over a graph numbered part by part, the
targets' groups sum their in-edges from their own id range in memory, and
only the cut edges in passes over the products file, so the file is read a
few times however many groups there are, and the rows are the layer's own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from gnncore.train import build_model
from gnncore.train.core import aggregate
from gnncore.train.core.layerstore import DiskLayer
from gnncore.train.core.layerwise import Adjacency, apply_layer, block, gcn_dinv
from gnncore.train.core.projected import index_bytes, projected_layer

PARTS, PART_NODES, FEATURES, HIDDEN = 8, 60, 96, 64
NODES = PARTS * PART_NODES


@pytest.fixture(scope="module")
def parted() -> tuple[Adjacency, torch.Tensor]:
    """Eight parts of consecutive ids, 9 in 10 edges inside a part, both directions."""
    rng = np.random.default_rng(11)
    src = rng.integers(0, NODES, size=6000)
    inside = rng.random(6000) < 0.9
    dst = np.where(inside, (src // PART_NODES) * PART_NODES + rng.integers(0, PART_NODES, 6000),
                   rng.integers(0, NODES, 6000))  # fmt: skip
    edges = np.stack([np.r_[src, dst], np.r_[dst, src]])
    adjacency = Adjacency.from_edge_index(edges, NODES)
    features = torch.from_numpy(rng.normal(size=(NODES, FEATURES)).astype(np.float32))
    return adjacency, features


def _reference(model: torch.nn.Module, adjacency: Adjacency, x: torch.Tensor) -> torch.Tensor:
    blk = block(adjacency, 0, NODES)
    dinv = gcn_dinv(model, adjacency)
    dinv_block = dinv[blk.n_id] if dinv is not None else None
    return apply_layer(model, 0, x[blk.n_id], blk.edge_index, NODES, dinv_block)


def test_groups_hold_their_sums_and_local_span_in_half_the_memory() -> None:
    ids = np.arange(0, 1000, 2)  # every other node computed
    sources = np.arange(1000)  # ... from every node
    row = HIDDEN * 4
    groups = aggregate.spilled_groups(ids, sources, HIDDEN, 40 * row * 2)
    assert groups[0][0] == 0 and groups[-1][1] == len(ids)
    assert all(j == k for (_, j), (k, _) in zip(groups, groups[1:], strict=False))
    for i, j in groups:
        local = np.searchsorted(sources, ids[j - 1], side="right")
        local -= np.searchsorted(sources, ids[i])
        assert (j - i) * row + local * row <= 40 * row
    assert aggregate.spilled_groups(ids, sources, HIDDEN, 1) == [(k, k + 1) for k in range(500)]


def test_remote_edges_are_those_from_outside_a_group_s_ids(
    parted: tuple[Adjacency, torch.Tensor],
) -> None:
    adjacency, _ = parted
    ids = np.arange(NODES)
    groups = [(0, 100), (100, 130), (130, NODES)]
    counts = aggregate.remote_edges(adjacency, ids, groups)
    for (i, j), count in zip(groups, counts, strict=True):
        src = adjacency.indices[adjacency.indptr[i] : adjacency.indptr[j]]
        assert count == np.count_nonzero((src < i) | (src >= j))
    tiny = aggregate.spilled_plan(adjacency, ids, ids, HIDDEN, 1)  # a target a group and tile
    assert len(tiny.groups) == len(tiny.tiles) == NODES and tiny.cut_edges.sum() > 0
    assert tiny.passes == 1 + int(tiny.cut_edges.sum())  # one cut edge a pass


@pytest.mark.parametrize("name", ["sage", "gcn"])
def test_products_on_disk_are_read_a_few_times_not_once_per_group(
    parted: tuple[Adjacency, torch.Tensor],
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Memory for about a part's sums at a time: many groups, yet the products
    file is read about once for the local spans plus once per pass the cut
    edges need (what ``spilled_plan`` foretells), and
    the rows are the layer's own."""
    adjacency, x = parted
    torch.manual_seed(5)
    model = build_model(name, FEATURES, HIDDEN, 4, 2, 0.0).eval()
    max_bytes = 2 * 2 * PART_NODES * HIDDEN * 4  # half: a part's sums and local span
    ids = np.arange(NODES)
    plan = aggregate.spilled_plan(adjacency, ids, ids, HIDDEN, max_bytes)
    assert plan.groups == [(p * PART_NODES, (p + 1) * PART_NODES) for p in range(PARTS)]
    assert len(plan.tiles) == PARTS // 2  # two parts' sums a tile
    assert plan.cut_edges.sum() < 0.2 * adjacency.indptr[-1]
    passes = plan.passes
    assert passes < len(plan.groups)  # one pass a tile, and the local spans once
    read: dict[str, int] = {}
    original = DiskLayer.read_range

    def counted(self: DiskLayer, lo: int, hi: int) -> torch.Tensor:
        read[self.path.name] = read.get(self.path.name, 0) + hi - lo
        return original(self, lo, hi)

    monkeypatch.setattr(DiskLayer, "read_range", counted)
    out = projected_layer(
        model, 0, adjacency, None, lambda lo, hi: x[lo:hi],
        max_bytes=max_bytes + index_bytes(NODES, ids, True),  # max_bytes for the products
        dinv=gcn_dinv(model, adjacency), spill_dir=tmp_path, compare_rows=True,
    )  # fmt: skip
    assert out is not None
    torch.testing.assert_close(out.read_range(0, NODES), _reference(model, adjacency, x),
                               rtol=1e-5, atol=1e-5)  # fmt: skip
    assert NODES <= read["products.npy"] <= passes * NODES
    assert list(tmp_path.iterdir()) == []  # products, sums and cut edges removed


def test_cut_edges_from_rows_past_two_to_the_31() -> None:
    """Product rows and targets of 64-bit width (graphs past 2^31 rows) are
    summed from the rows they name, in one pass in source order."""

    class Rows:  # row r of the products is [r, -r]: nothing to read from disk
        width = 2
        reads: list[tuple[int, int]] = []

        def read_range(self, lo: int, hi: int) -> torch.Tensor:
            self.reads.append((lo, hi))
            r = torch.arange(lo, hi, dtype=torch.float64)
            return torch.stack([r, -r], dim=1).float()

    big = 1 << 31
    rows = np.array([big + 7, 5, big, big + 7], dtype=np.int64)  # in target order
    dst = np.array([10, 10, 11, 12], dtype=np.int64)
    out = torch.zeros(3, 2)
    products = Rows()
    aggregate._sum_cut_edges(out, 10, (rows, dst, None), products, 2, 1 << 20)  # type: ignore[arg-type]
    expected = torch.tensor([[big + 7 + 5, 0.0], [big, 0.0], [big + 7, 0.0]])
    expected[:, 1] = -expected[:, 0]
    torch.testing.assert_close(out, expected)
    assert all(lo >= 0 and lo < hi for lo, hi in products.reads)
    assert products.reads == sorted(products.reads)
