"""OGB raw layout: topology, features, labels, splits, and their errors."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np
import pytest

from gnncore.errors import InputError
from gnncore.io import ingest
from gnncore.store import GraphDir

EDGES = [(0, 1), (1, 2), (2, 0), (1, 0), (3, 4), (4, 4), (0, 1)]  # node 5 is isolated
NUM_NODES = 6


def gz(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text.encode()))
    return path


def make_ogb(
    root: Path,
    *,
    counts: bool = True,
    features: str | None = None,
    labels: str | None = None,
    splits: dict[str, str] | None = None,
) -> Path:
    raw = root / "raw"
    gz(raw / "edge.csv.gz", "".join(f"{s},{d}\n" for s, d in EDGES))
    if counts:
        gz(raw / "num-node-list.csv.gz", f"{NUM_NODES}\n")
    if features is None:
        features = "".join(
            ",".join(f"{0.5 * i + j:.2f}" for j in range(3)) + "\n" for i in range(NUM_NODES)
        )
    gz(raw / "node-feat.csv.gz", features)
    gz(raw / "node-label.csv.gz", labels if labels is not None else "0\n1\n2\n1\n0\n3\n")
    splits = splits or {"train": "0\n1\n2\n", "valid": "3\n", "test": "4\n5\n"}
    for name, text in splits.items():
        gz(root / "split" / "time" / f"{name}.csv.gz", text)
    return root


def assert_no_output(out: Path) -> None:
    assert not out.exists()
    assert [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")] == []


def expect_error(tmp_path: Path, root: Path, file: Path, line: int | None, pattern: str) -> None:
    out = tmp_path / "out"
    with pytest.raises(InputError) as info:
        ingest(root, out)
    message = str(info.value)
    prefix = f"{file}:{line}: " if line is not None else f"{file}: "
    assert message.startswith(prefix), message
    assert re.search(pattern, message), message
    assert_no_output(out)


def test_ogb_dataset(tmp_path):
    root = make_ogb(tmp_path / "ogbn_tiny")
    out = tmp_path / "out"
    report = ingest(root, out)
    assert report.format == "ogb"
    assert report.num_nodes == NUM_NODES  # isolated node 5 kept
    assert (
        report.num_input_edges,
        report.self_loops_removed,
        report.duplicates_removed,
        report.num_canonical_edges,
        report.num_edges,
    ) == (7, 1, 2, 4, 8)
    assert (report.num_features, report.num_classes) == (3, 4)
    assert report.details["split"] == "time"
    graph = GraphDir.open(out)
    graph.validate(checksums=True)
    assert graph.edges().select("src", "dst").rows() == [(0, 1), (0, 2), (1, 2), (3, 4)]
    assert not graph.has("node_ids")  # ids are used as they are
    x = graph.features()
    assert x.dtype == np.float32 and x.shape == (6, 3)
    np.testing.assert_allclose(x[2], [1.0, 2.0, 3.0])
    assert graph.labels().tolist() == [0, 1, 2, 1, 0, 3]
    assert graph.split("train").tolist() == [0, 1, 2]
    assert graph.split("val").tolist() == [3]
    assert graph.split("test").tolist() == [4, 5]


def test_ogb_raw_dir_and_no_node_count(tmp_path):
    root = make_ogb(tmp_path / "ds", counts=False)
    report = ingest(root / "raw", tmp_path / "out", directed=True)
    assert report.num_nodes == NUM_NODES  # from the feature rows
    assert report.directed and report.num_canonical_edges == 5
    GraphDir.open(tmp_path / "out").validate(checksums=True)


def test_ogb_many_feature_batches(tmp_path, monkeypatch):
    import gnncore.io.readers.ogb as ogb

    monkeypatch.setattr(ogb, "FEATURE_BATCH_ROWS", 2)
    root = make_ogb(tmp_path / "ds")
    ingest(root, tmp_path / "out")
    x = GraphDir.open(tmp_path / "out").features()
    np.testing.assert_allclose(x[:, 0], 0.5 * np.arange(NUM_NODES))


def test_nan_feature(tmp_path):
    feats = "1,2,3\n1,2,3\n1,2,3\n1,nan,3\n1,2,3\n1,2,3\n"
    root = make_ogb(tmp_path / "ds", features=feats)
    expect_error(tmp_path, root, root / "raw" / "node-feat.csv.gz", 4, "NaN or inf")


def test_inf_feature_in_later_batch(tmp_path, monkeypatch):
    import gnncore.io.readers.ogb as ogb

    monkeypatch.setattr(ogb, "FEATURE_BATCH_ROWS", 2)
    feats = "1,2,3\n" * 5 + "1,2,inf\n"
    root = make_ogb(tmp_path / "ds", features=feats)
    expect_error(tmp_path, root, root / "raw" / "node-feat.csv.gz", 6, "NaN or inf")


def test_non_numeric_feature(tmp_path):
    feats = "1,2,3\n1,2,3\n1,abc,3\n1,2,3\n1,2,3\n1,2,3\n"
    root = make_ogb(tmp_path / "ds", features=feats)
    expect_error(
        tmp_path, root, root / "raw" / "node-feat.csv.gz", 3, "feature value 'abc' is not a number"
    )


def test_short_feature_row(tmp_path):
    feats = "1,2,3\n1,2,3\n1,2\n1,2,3\n1,2,3\n1,2,3\n"
    root = make_ogb(tmp_path / "ds", features=feats)
    expect_error(tmp_path, root, root / "raw" / "node-feat.csv.gz", 3, "expected 3 values, found 2")


def test_feature_rows_differ_from_node_count(tmp_path):
    root = make_ogb(tmp_path / "ds", features="1,2,3\n" * 5)
    expect_error(
        tmp_path,
        root,
        root / "raw" / "node-feat.csv.gz",
        6,
        "ends after 5 feature rows; expected 6",
    )
    root = make_ogb(tmp_path / "ds2", features="1,2,3\n" * 7)
    expect_error(
        tmp_path, root, root / "raw" / "node-feat.csv.gz", 7, "more feature rows than the 6 nodes"
    )


def test_negative_label(tmp_path):
    root = make_ogb(tmp_path / "ds", labels="0\n1\n-2\n1\n0\n3\n")
    expect_error(tmp_path, root, root / "raw" / "node-label.csv.gz", 3, "negative label -2")


def test_non_integer_label(tmp_path):
    root = make_ogb(tmp_path / "ds", labels="0\n1\n2\n1.5\n0\n3\n")
    expect_error(
        tmp_path, root, root / "raw" / "node-label.csv.gz", 4, "label '1.5' is not an integer"
    )


def test_label_count(tmp_path):
    root = make_ogb(tmp_path / "ds", labels="0\n1\n2\n")
    expect_error(tmp_path, root, root / "raw" / "node-label.csv.gz", 4, "has 3 labels; expected 6")


def test_overlapping_splits(tmp_path):
    root = make_ogb(
        tmp_path / "ds", splits={"train": "0\n1\n2\n", "valid": "3\n", "test": "4\n2\n"}
    )
    split = root / "split" / "time"
    out = tmp_path / "out"
    with pytest.raises(InputError) as info:
        ingest(root, out)
    message = str(info.value)
    assert message.startswith(f"{split / 'test.csv.gz'}:2: ")
    assert f"node id 2 is also in {split / 'train.csv.gz'}" in message
    assert_no_output(out)


def test_split_id_out_of_range(tmp_path):
    root = make_ogb(tmp_path / "ds", splits={"train": "0\n1\n", "valid": "3\n6\n", "test": "4\n"})
    expect_error(
        tmp_path, root, root / "split" / "time" / "valid.csv.gz", 2, "node id 6 is out of range"
    )


def test_repeated_split_id(tmp_path):
    root = make_ogb(tmp_path / "ds", splits={"train": "0\n1\n0\n", "valid": "3\n", "test": "4\n"})
    expect_error(tmp_path, root, root / "split" / "time" / "train.csv.gz", 3, "repeated")


def test_edge_id_out_of_range_and_negative(tmp_path):
    root = make_ogb(tmp_path / "ds")
    gz(root / "raw" / "edge.csv.gz", "0,1\n1,9\n")
    expect_error(tmp_path, root, root / "raw" / "edge.csv.gz", 2, "node id 9 is out of range")
    gz(root / "raw" / "edge.csv.gz", "0,1\n-1,2\n")
    expect_error(tmp_path, root, root / "raw" / "edge.csv.gz", 2, "negative node id -1")


def test_truncated_edge_gzip(tmp_path):
    root = make_ogb(tmp_path / "ds")
    data = gzip.compress("".join(f"{i % 6},{(i * 7) % 6}\n" for i in range(40_000)).encode())
    (root / "raw" / "edge.csv.gz").write_bytes(data[: len(data) - 40])
    expect_error(tmp_path, root, root / "raw" / "edge.csv.gz", None, "truncated or corrupt gzip")


def test_truncated_feature_gzip(tmp_path):
    root = make_ogb(tmp_path / "ds", counts=True)
    data = gzip.compress(("1,2,3\n" * NUM_NODES).encode())
    (root / "raw" / "node-feat.csv.gz").write_bytes(data[:-12])
    expect_error(
        tmp_path, root, root / "raw" / "node-feat.csv.gz", None, "truncated or corrupt gzip"
    )


@pytest.mark.parametrize("stem", ["raw/edge", "raw/node-label", "split/time/train"])
def test_a_gz_file_that_is_not_gzip_is_refused(tmp_path, stem):
    root = make_ogb(tmp_path / "ds")
    fake = root / f"{stem}.csv.gz"
    fake.write_bytes(gzip.decompress(fake.read_bytes()))  # plain text under a .gz name
    expect_error(tmp_path, root, fake, None, r"the name ends in \.gz but the file is not gzip")
