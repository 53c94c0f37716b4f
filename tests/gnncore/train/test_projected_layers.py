"""``projected_layer``: a layer of an evaluation computed by
projecting the rows it reads before aggregating them, from spans of the
feature rows read in node order, gives the layer's own rows
(``apply_layer`` over the whole graph) within float tolerance, and declines
what it does not compute."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.nn import GraphSAGE

from gnncore.train import build_model
from gnncore.train.core import aggregate, projected
from gnncore.train.core.layerwise import (
    Adjacency,
    apply_layer,
    block,
    gcn_dinv,
    layerwise_inference,
    rows_per_layer,
)
from gnncore.train.core.nodebatches import layer_inputs
from gnncore.train.core.projected import (
    index_bytes,
    projected_layer,
    projection_hook,
    projects,
)

NODES, FEATURES, HIDDEN = 300, 24, 8


@pytest.fixture(scope="module")
def graph() -> tuple[Adjacency, torch.Tensor]:
    rng = np.random.default_rng(4)
    edges = rng.integers(0, NODES, size=(2, 2400))
    edges[:, :40] = [[1] * 40, list(range(2, 42))]  # node 1 is the source of many
    adjacency = Adjacency.from_edge_index(np.concatenate([edges, edges[::-1]], axis=1), NODES)
    features = torch.from_numpy(rng.normal(size=(NODES, FEATURES)).astype(np.float32))
    return adjacency, features


def _models() -> dict[str, torch.nn.Module]:
    torch.manual_seed(3)
    return {
        "sage": build_model("sage", FEATURES, HIDDEN, 4, 2, 0.0),
        "gcn": build_model("gcn", FEATURES, HIDDEN, 4, 2, 0.0),
        "sage-no-root-normalized": GraphSAGE(
            FEATURES, HIDDEN, 2, 4, root_weight=False, normalize=True
        ),
    }


def _reference(model: torch.nn.Module, adjacency: Adjacency, x: torch.Tensor) -> torch.Tensor:
    """Layer 0 of every node the layer's own way (one block of the whole graph)."""
    blk = block(adjacency, 0, NODES)
    dinv = gcn_dinv(model, adjacency)
    dinv_block = dinv[blk.n_id] if dinv is not None else None
    return apply_layer(model, 0, x[blk.n_id], blk.edge_index, NODES, dinv_block)


@pytest.mark.parametrize("name", ["sage", "gcn", "sage-no-root-normalized"])
@pytest.mark.parametrize("mode", ["memory", "output-on-disk", "products-on-disk"])
def test_projected_rows_equal_the_layer_s_own(
    graph: tuple[Adjacency, torch.Tensor],
    name: str,
    mode: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Some targets (among them a node with many in-neighbours), read in spans
    of a few rows (several reads, ascending, each row at most once): their rows
    equal the layer's own within float tolerance, written at their ids; with
    the products on disk too (too little memory for them), aggregated in
    groups of targets, each reading the products in order."""
    adjacency, x = graph
    model = _models()[name].eval()
    assert projects(model, 0, torch.device("cpu"))
    monkeypatch.setattr(aggregate, "SPAN_BYTES", 40 * FEATURES * 4)  # spans of 40 rows
    reads: list[tuple[int, int]] = []

    def read_range(lo: int, hi: int) -> torch.Tensor:
        reads.append((lo, hi))
        return x[lo:hi].clone()

    targets = torch.from_numpy(np.unique(np.r_[np.arange(0, NODES, 7), 3, 5, 11]))
    memory = 1 << 30 if mode != "products-on-disk" else 4000  # a few groups of targets
    out = projected_layer(
        model, 0, adjacency, targets, read_range, max_bytes=memory,
        dinv=gcn_dinv(model, adjacency), batch_size=16,
        layer_dir=tmp_path if mode != "memory" else None,
        spill_dir=tmp_path if mode == "products-on-disk" else None,
    )  # fmt: skip
    assert out is not None
    expected = _reference(model, adjacency, x)[targets]
    torch.testing.assert_close(out.read(targets), expected, rtol=1e-5, atol=1e-6)
    assert len(reads) > 1 and all(lo < hi <= lo + 40 for lo, hi in reads)
    assert all(hi <= lo for (_, hi), (lo, _) in zip(reads, reads[1:], strict=False))
    needed = layer_inputs(adjacency.indptr, adjacency.indices, targets.numpy())
    assert sum(hi - lo for lo, hi in reads) >= len(needed) and len(needed) < NODES
    out.release()
    assert list(tmp_path.iterdir()) == []  # the products and roots files removed too


@pytest.mark.parametrize("name", ["sage", "gcn"])
@pytest.mark.parametrize("memory", [1 << 30, 3000])
def test_every_layer_projected_gives_the_inference_s_rows(
    graph: tuple[Adjacency, torch.Tensor], name: str, memory: int, tmp_path: Path
) -> None:
    """Three layers narrowing 24 -> 8 -> 8 -> 4 (the last two projected, the
    middle one as wide as its input computed as usual), every node and some
    nodes (``rows``): ``layerwise_inference`` with the hook yields the rows it
    yields without, within float tolerance; the products in memory, or on disk
    in groups."""
    adjacency, x = graph
    torch.manual_seed(8)
    model = build_model(name, FEATURES, HIDDEN, 4, 3, 0.0).eval()
    hook = projection_hook(model, adjacency, lambda lo, hi: x[lo:hi],
                           max_bytes=memory, batch_size=32, layer_dir=tmp_path,
                           spill_dir=tmp_path)  # fmt: skip
    plain = torch.cat([o for _, _, o in layerwise_inference(model, adjacency, lambda n: x[n])])
    hooked = layerwise_inference(model, adjacency, lambda n: x[n], project=hook, layer_dir=tmp_path)
    torch.testing.assert_close(torch.cat([o for _, _, o in hooked]), plain, rtol=1e-4, atol=1e-5)
    targets = torch.arange(5, NODES, 11)
    rows = rows_per_layer(adjacency, targets, 3)
    some = layerwise_inference(model, adjacency, lambda n: x[n], project=hook, rows=rows)
    torch.testing.assert_close(
        torch.cat([o for _, _, o in some]), plain[targets], rtol=1e-4, atol=1e-5
    )
    assert list(tmp_path.iterdir()) == []


def test_inputs_are_the_targets_and_their_in_neighbours(
    graph: tuple[Adjacency, torch.Tensor],
) -> None:
    adjacency, _ = graph
    targets = np.array([2, 9, 150])
    expected = set(targets.tolist())
    for t in targets:
        expected |= set(adjacency.indices[adjacency.indptr[t] : adjacency.indptr[t + 1]].tolist())
    assert layer_inputs(adjacency.indptr, adjacency.indices, targets).tolist() == sorted(expected)


def test_declined_where_it_does_not_apply(graph: tuple[Adjacency, torch.Tensor]) -> None:
    """GAT, a layer as wide as its input, another device, or products over the
    memory given with nowhere to spill them: ``None`` (the caller reads rows
    as before)."""
    adjacency, x = graph
    torch.manual_seed(0)
    cpu = torch.device("cpu")
    assert not projects(build_model("gat", FEATURES, HIDDEN, 4, 2, 0.0, heads=2), 0, cpu)
    assert not projects(build_model("sage", FEATURES, FEATURES, 4, 2, 0.0), 0, cpu)
    sage = build_model("sage", FEATURES, HIDDEN, 4, 2, 0.0).eval()
    assert not projects(sage, 0, torch.device("meta"))
    targets = torch.arange(0, NODES, 3)
    sources = layer_inputs(adjacency.indptr, adjacency.indices, targets.numpy())
    # the products of the sources and the targets' roots, and the index arrays beside them
    needed = (len(sources) + len(targets)) * HIDDEN * 4 + index_bytes(NODES, sources, False)
    read = lambda lo, hi: x[lo:hi]  # noqa: E731
    too_little = needed - 1
    assert projected_layer(sage, 0, adjacency, targets, read, max_bytes=too_little) is None
    # the output may go to disk, the products may not
    declined = projected_layer(
        sage, 0, adjacency, targets, read, max_bytes=too_little, layer_dir="."
    )
    assert declined is None
    fits = projected_layer(sage, 0, adjacency, targets, read, max_bytes=needed)
    assert fits is not None


def test_spilled_products_read_too_many_times_are_declined(
    graph: tuple[Adjacency, torch.Tensor], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Products on disk are read once per tile of targets and more for their cut
    edges: a caller that can compute the layer part by part, reading the cut
    edges' sources apart, has a layer whose passes would cost more declined
    (``None``) before anything is projected."""
    adjacency, x = graph
    torch.manual_seed(0)
    sage = build_model("sage", FEATURES, HIDDEN, 4, 2, 0.0).eval()
    read = lambda lo, hi: x[lo:hi]  # noqa: E731
    small = 64 * HIDDEN * 4  # a few targets a group: many passes
    common = {"max_bytes": small, "spill_dir": tmp_path}
    monkeypatch.setattr(projected, "ROW_READ_BYTES", 1)  # a row read at random costs a byte
    assert projected_layer(sage, 0, adjacency, None, read, **common, compare_rows=True) is None
    assert list(tmp_path.iterdir()) == []  # declined before writing products
    spilled = projected_layer(sage, 0, adjacency, None, read, **common)
    whole = projected_layer(sage, 0, adjacency, None, read, max_bytes=1 << 40)
    assert spilled is not None and whole is not None
    assert torch.allclose(spilled.read_range(0, NODES), whole.read_range(0, NODES), atol=1e-5)
