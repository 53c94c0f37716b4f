"""Format auto-detection from the path."""

from __future__ import annotations

import pytest

from gnncore.errors import InputError
from gnncore.io import detect_format


def touch(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


def test_detect(tmp_path):
    touch(tmp_path / "ogb" / "raw" / "edge.csv.gz")
    touch(tmp_path / "Cora" / "raw" / "ind.cora.x")
    touch(tmp_path / "kg" / "train.txt")
    touch(tmp_path / "kg2" / "raw" / "train.txt")
    assert detect_format(tmp_path / "ogb") == "ogb"
    assert detect_format(tmp_path / "ogb" / "raw") == "ogb"
    assert detect_format(tmp_path / "Cora") == "planetoid"
    assert detect_format(tmp_path / "Cora" / "raw") == "planetoid"
    assert detect_format(tmp_path / "kg") == "kg"
    assert detect_format(tmp_path / "kg2") == "kg"
    assert detect_format(touch(tmp_path / "e.parquet")) == "parquet"
    assert detect_format(touch(tmp_path / "e.txt.gz")) == "edgelist"
    assert detect_format(touch(tmp_path / "e.csv")) == "edgelist"


def test_detect_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="cannot tell the dataset format"):
        detect_format(tmp_path / "empty")
    with pytest.raises(InputError, match="no such file"):
        detect_format(tmp_path / "missing")
