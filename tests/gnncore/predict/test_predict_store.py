"""``predict_graph_dir(store=...)``: layer-wise inference in a partitioned store's
node order gives the graph-order predictions, rows in the graph's order."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from conftest import assert_same_predictions, planted_graph
from gnncore.cli.main import main
from gnncore.errors import InputError
from gnncore.outofcore.store import PartitionedStore, write_partitioned_store
from gnncore.partition import partition_graph
from gnncore.predict import TrainedModel, predict_graph_dir
from gnncore.predict.ordered import StoreOrder
from gnncore.store import GraphDir
from gnncore.train import build_model
from gnncore.train.core.layerwise import (
    Adjacency,
    PartRows,
    block,
    layerwise_inference,
    rows_per_layer,
)
from gnncore.train.core.nodebatches import part_batches
from gnncore.train.core.partrows import coalesce, cut_window, gather_rows
from gnncore.train.spec import ModelSpec

FEATURES, HIDDEN, CLASSES, LAYERS = 16, 8, 4, 3


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[GraphDir, PartitionedStore]:
    root = tmp_path_factory.mktemp("predict-store")
    graph = GraphDir.open(planted_graph(root / "g", num_nodes=600, features=FEATURES))
    partition_graph(graph.path, root / "part", method="metis", parts=4, seed=0)
    store = write_partitioned_store(graph.path, root / "part", root / "store", static_fraction=0.02)
    return graph, store


def _model(name: str) -> TrainedModel:
    torch.manual_seed(7)
    heads = 2 if name == "gat" else None
    module = build_model(name, FEATURES, HIDDEN, CLASSES, LAYERS, 0.0, heads=heads).eval()
    architecture = {"model": name, "in_channels": FEATURES, "hidden": HIDDEN,
                    "out_channels": CLASSES, "num_layers": LAYERS, "dropout": 0.0,
                    "heads": heads or 1}  # fmt: skip
    spec = ModelSpec("node", architecture, preprocessing={"normalize_features": True})
    return TrainedModel(spec, module, uri=f"test:{name}")


def test_store_order_is_not_the_graph_order(stored: tuple[GraphDir, PartitionedStore]) -> None:
    """The premise: the store renumbers the nodes (else the test below proves nothing)."""
    _, store = stored
    order = np.asarray(store.array("node_order"))
    assert not np.array_equal(order, np.arange(len(order)))
    assert store.parts == 4


@pytest.mark.parametrize("name", ["sage", "gcn", "gat"])
def test_store_order_predictions_equal_the_graph_order_ones(
    stored: tuple[GraphDir, PartitionedStore],
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three layers, in memory and under budgets that spill the layers (one
    where each part's input rows are read once, one where the feature rows
    are too large for that): the graph-order run's Parquet table, rows in the
    graph's order with its ids, the same classes, probabilities within float
    tolerance (the layers that narrow project before aggregating:
    ``gnncore.train.core.projected``, in memory or on disk); no scratch file
    left."""
    monkeypatch.setattr("gnncore.train.core.layerstore.MIN_MEMORY_BUDGET", 1)
    graph, store = stored
    model = _model(name)
    expected = predict_graph_dir(graph, tmp_path / "graph", model, device="cpu",
                                 memory_budget=None, progress=False)  # fmt: skip
    assert expected.info["order"] == "graph"
    table = pq.read_table(tmp_path / "graph" / "predictions.parquet")
    assert table["node_id"].to_pylist() == list(range(graph.num_nodes))
    for budget, cached in ((None, True), (60_000, True), (30_000, False)):
        out = tmp_path / f"store-{budget}"
        report = predict_graph_dir(graph, out, model, device="cpu", memory_budget=budget,
                                   store=store.path, progress=False)  # fmt: skip
        assert report.info["order"] == "partitioned store"
        assert report.info["layers_on_disk"] is (budget is not None)
        cache = report.info["store"]["part_cache_bytes"]
        assert (cache >= 150 * FEATURES * 4) is cached
        assert report.info["store"]["parts"] == 4
        assert_same_predictions(pq.read_table(out / "predictions.parquet"), table)
        assert report.accuracy == expected.accuracy
        assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "predictions.parquet"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_batches_stay_inside_their_part_and_read_it_once() -> None:
    """``part_batches`` splits at the bounds; ``PartRows`` reads a part's rows in
    one range read and the cut sources one by one, giving the rows ``read``
    gives."""
    adjacency = Adjacency.from_edge_index(
        np.array([[1, 2, 5, 0, 6, 3, 4, 7], [0, 0, 1, 3, 4, 5, 6, 6]]), 8
    )
    bounds = np.array([0, 3, 8])
    batches = list(part_batches(adjacency.indptr, bounds, batch_size=2, max_edges=10))
    assert batches == [(0, 2), (2, 3), (3, 5), (5, 7), (7, 8)]
    x = torch.arange(32, dtype=torch.float32).reshape(8, 4)
    ranges: list[tuple[int, int]] = []
    single: list[int] = []

    def read(n_id: torch.Tensor) -> torch.Tensor:
        single.extend(n_id.tolist())
        return x[n_id]

    def read_range(lo: int, hi: int) -> torch.Tensor:
        ranges.append((lo, hi))
        return x[lo:hi].clone()

    rows = PartRows(read, read_range, bounds, cache_bytes=5 * 4 * 4, width=4)
    for a, b in batches:
        blk = block(adjacency, a, b)
        assert torch.equal(rows(blk), x[blk.n_id])
    assert ranges == [(0, 3), (3, 8)]
    assert sorted(set(single)) == [0, 5]  # the sources of cut edges only
    small = PartRows(read, read_range, bounds, cache_bytes=4 * 4 * 4, width=4)
    single.clear()
    blk = block(adjacency, 5, 7)
    assert torch.equal(small(blk), x[blk.n_id]) and single == blk.n_id.tolist()
    assert ranges == [(0, 3), (3, 8)]  # part 1 (5 rows) exceeds the cache


def test_a_store_of_another_graph_is_refused_and_the_cli_takes_store(
    stored: tuple[GraphDir, PartitionedStore], tmp_path: Path
) -> None:
    graph, store = stored
    other = GraphDir.open(planted_graph(tmp_path / "other", num_nodes=600, seed=1))
    model = _model("sage")
    with pytest.raises(InputError, match="not from this graph"):
        predict_graph_dir(other, tmp_path / "x", model, device="cpu", store=store.path)
    folder = tmp_path / "model" / "gnncore"  # a local model directory's layout
    model.spec.save(folder, model.module)
    summary = tmp_path / "summary.json"
    code = main(["predict", str(graph.path), str(tmp_path / "out"), "--model", str(folder),
                 "--store", str(store.path), "--device", "cpu", "--no-progress",
                 "--json", str(summary)])  # fmt: skip
    assert code == 0
    info = json.loads(summary.read_text())
    assert info["order"] == "partitioned store" and info["rows"] == graph.num_nodes
    assert info["store"]["path"] == str(store.path.absolute())


def test_coalesce_joins_rows_closer_than_the_gap() -> None:
    ids = np.array([1, 2, 3, 7, 13, 50])
    assert coalesce(ids, row_bytes=4096, gap_bytes=16 << 10).tolist() == [
        [1, 8],
        [13, 14],
        [50, 51],
    ]
    assert coalesce(ids, row_bytes=4096, gap_bytes=0).tolist() == [
        [1, 4], [7, 8], [13, 14], [50, 51]]  # fmt: skip
    assert coalesce(ids, row_bytes=4096, gap_bytes=16 << 10, max_bytes=4 * 4096).tolist() == [
        [1, 4], [7, 8], [13, 14], [50, 51]]  # fmt: skip  # a range spans at most 4 rows
    assert coalesce(np.arange(10), row_bytes=4, max_bytes=12).tolist() == [
        [0, 3], [3, 6], [6, 9], [9, 10]]  # fmt: skip
    assert coalesce(np.zeros(0, dtype=np.int64), 4096).shape == (0, 2)


def test_cut_rows_are_read_ahead_in_sorted_windows(
    stored: tuple[GraphDir, PartitionedStore], tmp_path: Path
) -> None:
    """With a ranges reader, ``PartRows`` reads the sources of a part's cut edges
    ahead, window by window (at most half its cache of rows), each call asking
    for ascending, disjoint ranges of the store's feature file (threads, small
    groups): every block gets the rows a row-by-row read gives, bit for bit,
    and no row is read one at a time. With a cache that holds a part's cut rows,
    each is read once per part."""
    graph, store = stored
    order = StoreOrder.open(store.path, graph)
    adjacency = order.adjacency(graph, tmp_path)
    x = torch.from_numpy(np.load(store.path / "features.npy")).float()
    reader = order.feature_ranges()
    calls: list[np.ndarray] = []

    def read_ranges(ranges: np.ndarray) -> torch.Tensor:
        calls.append(ranges.copy())
        return gather_rows(reader, ranges_rows(ranges), FEATURES, FEATURES * 4, group_bytes=256)

    def ranges_rows(ranges: np.ndarray) -> np.ndarray:  # through gather_rows: threads, groups
        return np.concatenate([np.arange(a, b) for a, b in ranges])

    def read(n_id: torch.Tensor) -> torch.Tensor:
        raise AssertionError(f"{len(n_id)} rows read one by one")

    bounds = order.bounds
    largest = int(np.diff(bounds).max())
    indptr, indices = adjacency.indptr, np.asarray(adjacency.indices)
    halo = [np.unique(s[(s < lo) | (s >= hi)])
            for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
            for s in [indices[indptr[lo] : indptr[hi]]]]  # fmt: skip
    for cache, windowed in ((largest * FEATURES * 4, True), (1 << 30, False)):
        calls.clear()
        rows = PartRows(read, order.feature_range, bounds, cache, FEATURES,
                        read_ranges=read_ranges, adjacency=(indptr, indices))  # fmt: skip
        for a, b in part_batches(indptr, bounds, batch_size=16, max_edges=1000):
            blk = block(adjacency, a, b)
            assert torch.equal(rows(blk), x[blk.n_id])
            assert len(rows.cut_ids) <= cache // 2 // (FEATURES * 4) or rows.cut_end == b
        for ranges in calls:
            assert (ranges[:, 0] < ranges[:, 1]).all() and (ranges[1:, 0] >= ranges[:-1, 1]).all()
        assert (rows.cut_rows_read > sum(map(len, halo))) is windowed
        assert rows.cut_rows_read >= sum(map(len, halo))


@pytest.mark.parametrize("name", ["sage", "gcn"])
def test_store_order_subset_gives_the_full_pass_rows(
    stored: tuple[GraphDir, PartitionedStore], name: str, tmp_path: Path
) -> None:
    """``layerwise_inference(rows=...)`` in a store's order (what exact evaluation
    of an out-of-core run computes: only the rows the evaluation nodes depend
    on) gives those nodes' rows of the full pass (float tolerance: the
    batches' matrix products are cut differently), with the hidden
    layers on disk, cut rows read ahead in windows smaller than a part's (so
    windows split inside a part's subset), and no row read one at a time."""
    graph, store = stored
    order = StoreOrder.open(store.path, graph)
    adjacency = order.adjacency(graph, tmp_path)
    module = _model(name).module
    reader = order.feature_ranges()

    def read(n_id: torch.Tensor) -> torch.Tensor:
        raise AssertionError(f"{len(n_id)} rows read one by one")

    def run(rows: list[torch.Tensor] | None, folder: str) -> list[tuple[int, int, torch.Tensor]]:
        (tmp_path / folder).mkdir()
        largest = int(np.diff(order.bounds).max())
        return list(layerwise_inference(
            module, adjacency, read, batch_size=16, layer_dir=tmp_path / folder,
            bounds=order.bounds, cache_bytes=largest * FEATURES * 4,
            input_range=order.feature_range, input_ranges=reader, rows=rows))  # fmt: skip

    full = torch.cat([out for _, _, out in run(None, "full")])
    targets = torch.from_numpy(
        np.sort(np.random.default_rng(3).choice(graph.num_nodes, 40, replace=False))
    )
    rows = rows_per_layer(adjacency, targets, LAYERS)
    assert len(rows[0]) < graph.num_nodes  # the premise: a subset at every layer
    subset = run(rows, "subset")
    assert [(a, b) for a, b, _ in subset][0][0] == 0 and subset[-1][1] == len(targets)
    got = torch.cat([out for _, _, out in subset])
    torch.testing.assert_close(got, full[targets], rtol=1e-5, atol=1e-6)  # batches differ
    assert torch.equal(got.argmax(-1), full[targets].argmax(-1))


def test_cut_window_over_some_targets() -> None:
    """``cut_window`` over positions in a node list: over every node it is the
    contiguous window; over some nodes, their cut sources only, the window
    ending where the distinct sources would exceed ``max_rows``."""
    rng = np.random.default_rng(0)
    adjacency = Adjacency.from_edge_index(rng.integers(0, 50, size=(2, 400)), 50)
    indptr, indices = adjacency.indptr, np.asarray(adjacency.indices)
    everyone = np.arange(50)
    for max_rows in (1, 5, 20, 1000):
        end, ids = cut_window(indptr, indices, 10, 20, (10, 20), max_rows)
        end_all, ids_all = cut_window(indptr, indices, 10, 20, (10, 20), max_rows, everyone)
        assert end == end_all and np.array_equal(ids, ids_all)
    some = np.array([11, 13, 17, 19])
    end, ids = cut_window(indptr, indices, 0, 4, (10, 20), 1000, some)
    src = np.concatenate([indices[indptr[v] : indptr[v + 1]] for v in some])
    assert end == 4 and np.array_equal(ids, np.unique(src[(src < 10) | (src >= 20)]))

    def cut_sources(k: int) -> np.ndarray:  # distinct cut sources of some[:k]
        src = np.concatenate([indices[indptr[v] : indptr[v + 1]] for v in some[:k]])
        return np.unique(src[(src < 10) | (src >= 20)])

    for max_rows in range(len(cut_sources(4)) + 1):
        expected = max([k for k in range(1, 5) if len(cut_sources(k)) <= max_rows], default=1)
        end, ids = cut_window(indptr, indices, 0, 4, (10, 20), max_rows, some)
        assert end == expected and np.array_equal(ids, cut_sources(end)), max_rows
