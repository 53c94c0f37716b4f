"""Node tables beside edge lists: features, labels and splits by original id."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from gnncore.errors import InputError
from gnncore.io import ingest, ingest_versioned
from gnncore.io.readers.edge_layout import sniff
from gnncore.store import GraphDir

EDGES = "src,dst\nann,bob\nbob,cid\ncid,ann\ndan,ann\n"


def edges_csv(tmp_path: Path, text: str = EDGES) -> Path:
    path = tmp_path / "edges.csv"
    path.write_text(text)
    return path


def by_raw_id(graph: GraphDir) -> dict[object, int]:
    ids = graph.node_ids()
    assert ids is not None
    return dict(zip(ids["raw_id"].to_list(), ids["node_id"].to_list()))


def test_string_ids_labels_and_an_isolated_node(tmp_path):
    table = pl.DataFrame(
        {
            "node_id": ["dan", "ann", "bob", "cid", "eve"],  # eve has no edge
            "label": ["spam", "ham", None, "ham", "spam"],
            "age": [40, 31, 25, 52, 19],
            "score": [0.5, -1.0, 2.0, 0.0, 1.5],
        }
    )
    table.write_parquet(tmp_path / "nodes.parquet")
    out = tmp_path / "g"
    report = ingest(edges_csv(tmp_path), out, nodes=tmp_path / "nodes.parquet", seed=3)
    graph = GraphDir.open(out)
    graph.validate(checksums=True)
    assert graph.num_nodes == 5 and report.num_features == 2 and report.num_classes == 2
    node = by_raw_id(graph)
    x, labels = graph.features(), graph.labels()
    assert x is not None and labels is not None
    for row in table.iter_rows(named=True):
        v = node[row["node_id"]]
        assert x[v].tolist() == [row["age"], row["score"]]
        expected = {"ham": 0, "spam": 1, None: -1}[row["label"]]
        assert labels[v] == expected
    assert int(np.diff(graph.indptr)[node["eve"]]) == 0  # isolated, but a node
    classes = pl.read_parquet(out / "classes.parquet")
    assert classes["name"].to_list() == ["ham", "spam"]
    # No split column: the labelled nodes are split at random, reproducibly.
    splits = [set(graph.split(s).tolist()) for s in ("train", "val", "test")]
    assert set().union(*splits) == {v for v in range(5) if labels[v] >= 0}
    assert sum(len(s) for s in splits) == 4
    assert report.details["split"].startswith("random")
    again = ingest(edges_csv(tmp_path), tmp_path / "g2", nodes=tmp_path / "nodes.parquet", seed=3)
    assert again.details == {**report.details}
    assert [GraphDir.open(tmp_path / "g2").split(s).tolist() for s in ("train", "val", "test")] == [
        sorted(s) for s in splits
    ]


def test_integer_ids_split_column_and_feature_list(tmp_path):
    edges = tmp_path / "edges.tsv"
    edges.write_text("1\t2\n2\t3\n3\t1\n")
    nodes = pl.DataFrame(
        {
            "node_id": ["3", "1", "2"],  # integer-valued strings match integer ids
            "label": [2, 0, 1],
            "split": ["test", "train", "Val"],
            "features": [[3.0, 3.5], [1.0, 1.5], [2.0, 2.5]],
        }
    )
    nodes.write_parquet(tmp_path / "nodes.parquet")
    ingest(edges, tmp_path / "g", nodes=tmp_path / "nodes.parquet")
    graph = GraphDir.open(tmp_path / "g")
    graph.validate()
    node = by_raw_id(graph)
    x = graph.features()
    assert x is not None and x[node[2]].tolist() == [2.0, 2.5]
    assert graph.split("train").tolist() == [node[1]]
    assert graph.split("val").tolist() == [node[2]]
    assert graph.split("test").tolist() == [node[3]]
    assert graph.manifest.num_classes == 3


def error_of(tmp_path: Path, text: str, name: str = "nodes.csv", edges: str = EDGES) -> str:
    (tmp_path / name).write_text(text)
    with pytest.raises(InputError) as info:
        ingest(edges_csv(tmp_path, edges), tmp_path / "out", nodes=tmp_path / name)
    assert not (tmp_path / "out").exists()  # no half-written graph
    return str(info.value)


H = "node_id,x,label,split\n"
BAD_TABLES = [
    ("id,x\nann,1\n", "needs a 'node_id' column"),
    ("node_id,x\nann,1\nbob,2\nann,3\ncid,1\ndan,1\n", "nodes.csv:4: node id 'ann' appears twice"),
    ("node_id,x\nann,1\nbob,oops\ncid,1\ndan,1\n", "column 'x' is String"),
    ("node_id,x\nann,1\nbob,\ncid,1\ndan,1\n", "nodes.csv:3: 'x' is empty"),
    ("node_id,x\nann,1\nbob,NaN\ncid,1\ndan,1\n", "nodes.csv:3: 'x' is NaN or infinite"),
    (H + "ann,1,0,train\nbob,1,1,dev\ncid,1,0,\ndan,1,0,\n", "nodes.csv:3: split 'dev'"),
    (
        H + "ann,1,0,train\nbob,1,,test\ncid,1,0,\ndan,1,0,\n",
        "nodes.csv:3: node is in the test split but has no label",
    ),
    ("node_id,x,label\nann,1,0\nbob,1,-2\ncid,1,0\ndan,1,0\n", "nodes.csv:3: label -2 is negative"),
    ("node_id,x\nann,1\nbob,1\n", "2 node(s) of the edge list have no row in the node table"),
]


@pytest.mark.parametrize(("table", "expected"), BAD_TABLES)
def test_bad_tables_name_file_line_and_problem(tmp_path, table, expected):
    assert expected in error_of(tmp_path, table)


def test_missing_nodes_are_named_and_integer_mismatch_is_refused(tmp_path):
    message = error_of(tmp_path, "node_id,x\nann,1\nbob,1\n")
    assert "'cid'" in message and "'dan'" in message
    message = error_of(tmp_path, "node_id,x\n1,1\nb2,1\n", edges="1,2\n")
    assert "nodes.csv:3: node id 'b2' is not an integer" in message


def test_ragged_feature_lists_name_the_row(tmp_path):
    edges = tmp_path / "e.csv"
    edges.write_text("a,b\n")
    pl.DataFrame({"node_id": ["a", "b"], "features": [[1.0, 2.0], [1.0]]}).write_parquet(
        tmp_path / "n.parquet"
    )
    with pytest.raises(InputError, match=r"n.parquet: row 1: has 1 features; the first row has 2"):
        ingest(edges, tmp_path / "out", nodes=tmp_path / "n.parquet")


def test_node_table_is_an_input_of_the_ingest_key(tmp_path):
    edges = edges_csv(tmp_path)
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("node_id,x\nann,1\nbob,2\ncid,3\ndan,4\n")
    first = ingest_versioned(edges, tmp_path / "graphs", "people", nodes=nodes)
    same = ingest_versioned(edges, tmp_path / "graphs", "people", nodes=nodes)
    assert same.reused and same.path == first.path
    nodes.write_text("node_id,x\nann,1\nbob,2\ncid,3\ndan,5\n")
    changed = ingest_versioned(edges, tmp_path / "graphs", "people", nodes=nodes)
    assert not changed.reused and changed.stage_key != first.stage_key
    plain = ingest_versioned(edges, tmp_path / "graphs", "people")
    assert plain.stage_key not in (first.stage_key, changed.stage_key)
    x = GraphDir.open(changed.path).features()
    assert x is not None and sorted(x[:, 0].tolist()) == [1, 2, 3, 5]


@pytest.mark.parametrize(
    ("first", "header"),
    [("src,dst", True), ("Source\tTarget", True), ("from to", True), ("alice,bob", False)],
)
def test_a_header_of_string_ids_is_told_by_its_column_names(tmp_path, first, header):
    sep = "\t" if "\t" in first else ("," if "," in first else " ")
    path = tmp_path / "e.txt"
    path.write_text(f"{first}\nx{sep}y\ny{sep}z\n")
    assert sniff(path).header is header


def test_standardized_features_use_training_statistics_and_are_kept(tmp_path):
    rng = np.random.default_rng(0)
    names = [f"n{i}" for i in range(40)]
    edges = tmp_path / "edges.csv"
    edges.write_text("src,dst\n" + "".join(f"{a},{b}\n" for a, b in zip(names, names[1:])))
    raw = np.stack([rng.normal(5e4, 1e4, 40), rng.normal(0, 1e-3, 40), np.full(40, 7.0)], 1)
    split = ["train"] * 24 + ["val"] * 8 + ["test"] * 8
    table = pl.DataFrame(
        {
            "node_id": names,
            "label": [i % 2 for i in range(40)],
            "split": split,
            "income": raw[:, 0],
            "drift": raw[:, 1],
            "constant": raw[:, 2],
        }
    )
    table.write_parquet(tmp_path / "nodes.parquet")
    report = ingest(
        edges, tmp_path / "g", nodes=tmp_path / "nodes.parquet", standardize_features=True
    )
    graph = GraphDir.open(tmp_path / "g")
    graph.validate(checksums=True)
    x = np.asarray(graph.features())
    train = graph.split("train")
    assert np.allclose(x[train].mean(0), [0, 0, 0], atol=1e-5)
    assert np.allclose(x[train].std(0), [1, 1, 0], atol=1e-4)  # a constant column: centred
    mean, std = (
        np.load(tmp_path / "g" / "feature_mean.npy"),
        np.load(tmp_path / "g" / "feature_std.npy"),
    )
    node = by_raw_id(graph)
    order = [node[n] for n in names]
    assert np.allclose(x[order] * std + mean, raw, rtol=1e-5)  # the kept statistics undo it
    assert np.allclose(mean, raw[:24].mean(0)) and std[2] == 1.0  # over the training rows only
    assert report.details["feature_standardization"] == "training nodes"
    with pytest.raises(ValueError, match="node table"):
        ingest(edges, tmp_path / "g2", standardize_features=True)
    plain = ingest_versioned(edges, tmp_path / "graphs", "p", nodes=tmp_path / "nodes.parquet")
    scaled = ingest_versioned(
        edges, tmp_path / "graphs", "p", nodes=tmp_path / "nodes.parquet", standardize_features=True
    )
    assert scaled.stage_key != plain.stage_key and not scaled.reused


def test_a_gz_node_table_that_is_not_gzip_is_refused(tmp_path):
    message = error_of(tmp_path, "node_id,x\nann,1\nbob,1\ncid,1\ndan,1\n", name="nodes.csv.gz")
    assert message.startswith(f"{tmp_path / 'nodes.csv.gz'}: the name ends in .gz but")
