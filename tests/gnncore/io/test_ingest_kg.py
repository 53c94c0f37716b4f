"""Knowledge-graph triples: id order, relations, triples arrays, FB15k-237."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gnncore.errors import InputError
from gnncore.io import ingest
from gnncore.store import GraphDir

FB15K = Path(__file__).resolve().parents[3] / ".." / "shared" / "datasets" / "FB15k-237"


def write_kg(root: Path, train: str, valid: str, test: str, raw: bool = False) -> Path:
    directory = root / "raw" if raw else root
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in (("train", train), ("valid", valid), ("test", test)):
        (directory / f"{name}.txt").write_bytes(text.replace("\n", "\r\n").encode())
    return root


TRAIN = "b\tlikes\ta\na\tknows\tc\nb\tlikes\ta\nc\tknows\tc\nc\tlikes\ta\n"
VALID = "a\tknows\td\nb\tlikes\ta\n"
TEST = "e\thates\tb\n"


def test_kg_ids_relations_and_triples(tmp_path):
    root = write_kg(tmp_path / "tiny", TRAIN, VALID, TEST)
    out = tmp_path / "out"
    report = ingest(root, out)
    assert report.format == "kg" and report.directed
    assert report.num_nodes == 5 and report.num_relations == 3
    assert report.num_input_edges == 5
    assert report.duplicates_removed == 1  # b likes a, twice
    assert report.self_loops_removed == 1  # c knows c (kept in train_triples.npy)
    assert report.num_canonical_edges == 3
    assert report.details["num_train_entities"] == 3
    graph = GraphDir.open(out)
    graph.validate(checksums=True)
    assert graph.node_ids()["raw_id"].to_list() == ["a", "b", "c", "d", "e"]
    import polars as pl

    rel = pl.read_parquet(out / "relations.parquet")
    assert rel["raw_id"].to_list() == ["hates", "knows", "likes"]
    assert rel["rel_id"].to_list() == [0, 1, 2]
    # a=0 b=1 c=2; hates=0 knows=1 likes=2
    assert graph.edges().select("src", "rel", "dst").rows() == [(0, 1, 2), (1, 2, 0), (2, 2, 0)]
    train = np.load(out / "train_triples.npy")
    assert train.dtype == np.int64 and train.tolist() == [
        [1, 2, 0],
        [0, 1, 2],
        [1, 2, 0],
        [2, 1, 2],
        [2, 2, 0],
    ]
    assert np.load(out / "valid_triples.npy").tolist() == [[0, 1, 3], [1, 2, 0]]
    assert np.load(out / "test_triples.npy").tolist() == [[4, 0, 1]]
    assert graph.manifest.stats["num_train_entities"] == 3
    assert graph.manifest.num_relations == 3


def test_kg_raw_subdir_and_name(tmp_path):
    root = write_kg(tmp_path / "MyKG", TRAIN, VALID, TEST, raw=True)
    report = ingest(root, tmp_path / "out")
    assert report.format == "kg"
    assert GraphDir.open(tmp_path / "out").manifest.name == "MyKG"


def test_kg_malformed_line(tmp_path):
    root = write_kg(tmp_path / "bad", TRAIN, "a\tknows\td\nb likes a\n", TEST)
    out = tmp_path / "out"
    with pytest.raises(InputError) as info:
        ingest(root, out)
    assert str(info.value).startswith(f"{root / 'valid.txt'}:2: expected 3 tab-separated")
    assert not out.exists()


def test_kg_empty_train(tmp_path):
    root = write_kg(tmp_path / "empty", "", VALID, TEST)
    with pytest.raises(InputError, match="no training triples"):
        ingest(root, tmp_path / "out", format="kg")
    assert not (tmp_path / "out").exists()


@pytest.mark.dataset
def test_fb15k_237(tmp_path):
    if not (FB15K / "raw" / "train.txt").is_file():
        pytest.skip(f"FB15k-237 not found at {FB15K.resolve()} (../shared/datasets is absent)")
    out = tmp_path / "fb"
    report = ingest(FB15K, out)
    assert report.num_nodes == 14541
    assert report.num_relations == 237
    assert report.details["num_train_entities"] == 14505
    assert report.num_input_edges == 272115
    assert report.details["num_train_triples"] == 272115
    assert report.details["num_valid_triples"] == 17535
    assert report.details["num_test_triples"] == 20466
    assert report.duplicates_removed == 0
    assert report.num_canonical_edges == 272115 - report.self_loops_removed
    graph = GraphDir.open(out)
    graph.validate(checksums=True)
    train = np.load(out / "train_triples.npy")
    assert train.shape == (272115, 3)
    assert train[:, [0, 2]].max() < 14505  # training entities come first
    ids = graph.node_ids()["raw_id"]
    assert ids[:14505].is_sorted() and ids[14505:].is_sorted()
    assert not any(s.endswith("\r") for s in ids.to_list())
