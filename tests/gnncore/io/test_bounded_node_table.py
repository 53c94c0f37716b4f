"""Bounded-memory ingestion with a Parquet node table: the in-memory path's graph
directory, byte for byte, and its errors (gnncore.io.bounded.node_table)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from gnncore.errors import InputError
from gnncore.io import ingest
from gnncore.io.bounded import node_table as bounded_node_table
from gnncore.io.bounded.node_table import NodeTableStringIds, batch_bounds
from gnncore.io.dispatch import takes_memory_budget
from gnncore.store import GraphDir

TINY = 64 << 10  # feature batches of a few hundred rows, several buckets


def assert_same_dir(a: Path, b: Path) -> None:
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def write_graph(tmp_path: Path, num_nodes: int = 3000, seed: int = 0, id_space: int = 10**5):
    """Edges over all but the last 40 of ``num_nodes`` ids (those are the table's
    isolated nodes), and the ids, features and labels of every node."""
    rng = np.random.default_rng(seed)
    ids = rng.choice(id_space, num_nodes, replace=False)
    src = ids[rng.integers(0, num_nodes - 40, 8 * num_nodes)]
    dst = ids[rng.integers(0, num_nodes - 40, 8 * num_nodes)]
    edges = tmp_path / "edges.csv"
    edges.write_text("src,dst\n" + "".join(f"{a},{b}\n" for a, b in zip(src, dst)))
    x = rng.normal(size=(num_nodes, 6)).astype(np.float32)
    labels = rng.integers(0, 5, num_nodes)
    return edges, ids, x, labels, rng


def both(tmp_path: Path, edges: Path, nodes: Path, budget: int = TINY, **kwargs):
    mem = ingest(edges, tmp_path / "mem", nodes=nodes, memory_budget=None, **kwargs)
    ext = ingest(edges, tmp_path / "ext", nodes=nodes, memory_budget=budget, **kwargs)
    assert_same_dir(tmp_path / "mem", tmp_path / "ext")
    GraphDir.open(tmp_path / "ext").validate(checksums=True)
    assert ext.memory_budget == budget and "sort/dedup" in ext.phases
    for field in ("num_nodes", "num_features", "num_classes", "num_canonical_edges", "details"):
        assert getattr(mem, field) == getattr(ext, field), field
    return mem, ext


def test_shuffled_table_with_isolated_nodes_and_a_split_column(tmp_path, monkeypatch):
    monkeypatch.setattr(bounded_node_table, "SYNC_BYTES", 4096)  # sync after every batch
    edges, ids, x, labels, rng = write_graph(tmp_path)
    split = rng.choice(["train", "val", "test", ""], len(ids))
    order = rng.permutation(len(ids))  # rows in another order than the ids
    table = pl.DataFrame(
        {
            "node_id": ids[order],
            "label": labels[order],
            "split": split[order],
            **{f"f{i}": x[order, i] for i in range(x.shape[1])},
        }
    )
    table.write_parquet(tmp_path / "nodes.parquet", row_group_size=500)
    mem, _ = both(tmp_path, edges, tmp_path / "nodes.parquet", seed=3)
    assert mem.num_nodes == len(ids) and mem.num_features == x.shape[1]
    graph = GraphDir.open(tmp_path / "ext")
    raw = graph.node_ids()["raw_id"].to_numpy()
    assert np.array_equal(raw, np.sort(ids))  # isolated table rows are nodes too
    features = graph.features()
    assert features is not None
    assert np.array_equal(features[np.searchsorted(raw, ids)], x)


def test_table_in_node_order_with_a_feature_list_and_class_names(tmp_path):
    edges, ids, x, labels, _ = write_graph(tmp_path, seed=1, id_space=4000)
    order = np.argsort(ids)  # node-id order: the features are appended as read
    names = np.array(["ant", "bee", "cat", "dog", "eel"])[labels]
    names[::7] = ""  # unlabelled: the random split leaves them out
    table = pl.DataFrame(
        {"node_id": ids[order], "label": names[order], "features": x[order].tolist()},
        schema_overrides={"features": pl.List(pl.Float32)},
    )
    table.write_parquet(tmp_path / "nodes.parquet", row_group_size=700)
    mem, _ = both(tmp_path, edges, tmp_path / "nodes.parquet", directed=True, seed=5)
    assert mem.num_classes == 5 and mem.details["split"].startswith("random")


def test_integer_valued_string_ids_and_wide_ids(tmp_path):
    edges, ids, x, _, _ = write_graph(tmp_path, num_nodes=1500, seed=2, id_space=10**15)
    table = pl.DataFrame({"node_id": [str(i) for i in ids], "x0": x[:, 0], "x1": x[:, 1]})
    table.write_parquet(tmp_path / "nodes.parquet")
    both(tmp_path, edges, tmp_path / "nodes.parquet", budget=1 << 30)


def error(call) -> str:
    with pytest.raises(InputError) as caught:
        call()
    return str(caught.value)


def test_errors_are_the_in_memory_ones(tmp_path):
    edges, ids, x, _, _ = write_graph(tmp_path, num_nodes=2000, seed=4)
    nodes = tmp_path / "nodes.parquet"

    def same(out: str) -> str:
        mem = error(lambda: ingest(edges, tmp_path / f"{out}-m", nodes=nodes, memory_budget=None))
        ext = error(lambda: ingest(edges, tmp_path / f"{out}-e", nodes=nodes, memory_budget=TINY))
        assert mem == ext
        return ext

    bad = x.copy()
    bad[1234, 3] = np.nan  # a later batch: the row is counted across batches
    pl.DataFrame({"node_id": ids, **{f"f{i}": bad[:, i] for i in range(6)}}).write_parquet(nodes)
    assert "nodes.parquet: row 1234: 'f3' is NaN or infinite" in same("nan")

    ragged = [list(r) for r in x[:, :2]]
    ragged[1500] = [1.0, 2.0, 3.0]
    pl.DataFrame({"node_id": ids, "features": ragged}).write_parquet(nodes)
    assert "row 1500: has 3 features; the first row has 2" in same("ragged")

    pl.DataFrame({"node_id": ids[:-100], "f0": x[:-100, 0]}).write_parquet(nodes)
    assert "node(s) of the edge list have no row in the node table" in same("missing")

    pl.DataFrame({"node_id": np.r_[ids[:-1], ids[0]], "f0": x[:, 0]}).write_parquet(nodes)
    assert f"row 1999: node id {ids[0]} appears twice" in same("twice")

    named = [str(i) for i in ids]
    named[7] = "b2"
    pl.DataFrame({"node_id": named, "f0": x[:, 0]}).write_parquet(nodes)
    mem = error(lambda: ingest(edges, tmp_path / "m", nodes=nodes, memory_budget=None,
                               id_type="int"))  # fmt: skip
    ext = error(lambda: ingest(edges, tmp_path / "e", nodes=nodes, memory_budget=TINY,
                               id_type="int"))  # fmt: skip
    assert mem == ext and "row 7: node id 'b2' is not an integer" in ext


def test_batches_keep_to_row_groups():
    # a group larger than a batch is cut in equal parts; smaller ones are joined
    assert list(batch_bounds([10, 10, 3], 4)) == [
        (0, 4), (4, 8), (8, 10), (10, 14), (14, 18), (18, 20), (20, 23)
    ]  # fmt: skip
    assert list(batch_bounds([2, 2, 2, 9, 1], 5)) == [(0, 4), (4, 6), (6, 11), (11, 15), (15, 16)]
    assert list(batch_bounds([], 5)) == []


def test_what_the_bounded_path_does_not_take(tmp_path, monkeypatch):
    edges, ids, x, labels, _ = write_graph(tmp_path, num_nodes=800, seed=6)
    frame = pl.DataFrame({"node_id": ids, "label": labels, "f0": x[:, 0]})
    frame.write_csv(tmp_path / "nodes.csv")
    frame.write_parquet(tmp_path / "nodes.parquet")
    with pytest.raises(ValueError, match="Parquet node tables only"):
        ingest(edges, tmp_path / "a", nodes=tmp_path / "nodes.csv", memory_budget=TINY)
    with pytest.raises(ValueError, match="standardize_features"):
        ingest(edges, tmp_path / "b", nodes=tmp_path / "nodes.parquet", memory_budget=TINY,
               standardize_features=True)  # fmt: skip
    assert takes_memory_budget(edges, nodes=tmp_path / "nodes.parquet")
    assert not takes_memory_budget(edges, nodes=tmp_path / "nodes.csv")
    assert not takes_memory_budget(edges, nodes=tmp_path / "nodes.parquet",
                                   standardize_features=True)  # fmt: skip

    # String ids: refused under a size, ingested in memory under auto.
    names = tmp_path / "names.csv"
    names.write_text("".join(f"n{a},n{b}\n" for a, b in zip(ids[:-1], ids[1:])))
    pl.DataFrame({"node_id": [f"n{i}" for i in ids], "f0": x[:, 0]}).write_parquet(
        tmp_path / "named.parquet"
    )
    with pytest.raises(NodeTableStringIds):
        ingest(names, tmp_path / "c", nodes=tmp_path / "named.parquet", memory_budget=TINY,
               id_type="string")  # fmt: skip
    import gnncore.usage as usage_module

    monkeypatch.setattr(usage_module, "default_memory_budget", lambda: 1 << 30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = ingest(names, tmp_path / "d", nodes=tmp_path / "named.parquet", id_type="string")
    assert auto.memory_budget is None and auto.num_nodes == len(ids)
