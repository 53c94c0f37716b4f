"""Planetoid through PyG, from a read-only raw folder (Cora from ../shared)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from gnncore.errors import InputError
from gnncore.io import ingest
from gnncore.store import GraphDir

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*torch.jit.script.* is deprecated:DeprecationWarning"
)

CORA = Path(__file__).resolve().parents[3] / ".." / "shared" / "datasets" / "planetoid" / "Cora"


@pytest.fixture(scope="module")
def cora() -> Path:
    if not (CORA / "raw" / "ind.cora.x").is_file():
        pytest.skip(
            f"Cora raw files not found at {CORA.resolve()} (../shared/datasets is "
            "absent in this checkout)"
        )
    return CORA


@pytest.mark.dataset
def test_cora(cora, tmp_path):
    before = sorted(p.name for p in cora.rglob("*"))
    out = tmp_path / "cora"
    report = ingest(cora, out)
    assert report.format == "planetoid"
    assert report.num_nodes == 2708
    # PyG's edge_index holds 10,556 arcs = 5,278 undirected edges, each listed twice.
    assert report.num_input_edges == 10556
    assert report.duplicates_removed == 5278
    assert report.self_loops_removed == 0
    assert report.num_canonical_edges == 5278
    assert report.num_edges == 10556
    assert (report.num_features, report.num_classes) == (1433, 7)
    graph = GraphDir.open(out)
    graph.validate(checksums=True)
    assert graph.manifest.name == "Cora"
    assert [len(graph.split(s)) for s in ("train", "val", "test")] == [140, 500, 1000]
    assert graph.split("train").tolist() == list(range(140))
    x = graph.features()
    assert x.dtype == np.float32 and set(np.unique(x[:50])) <= {0.0, 1.0}
    assert sorted(p.name for p in cora.rglob("*")) == before  # nothing written next to raw/


def test_missing_raw_file(tmp_path):
    if not (CORA / "raw").is_dir():
        pytest.skip(f"Cora raw files not found at {CORA.resolve()}")
    root = tmp_path / "Cora"
    (root / "raw").mkdir(parents=True)
    for file in (CORA / "raw").iterdir():
        if not file.name.endswith(".graph"):
            shutil.copyfile(file, root / "raw" / file.name)
    out = tmp_path / "out"
    with pytest.raises(InputError) as info:
        ingest(root, out, format="planetoid")
    assert str(info.value).startswith(f"{root / 'raw' / 'ind.cora.graph'}: missing Planetoid raw")
    assert not out.exists()


def test_unknown_planetoid_name(tmp_path):
    (tmp_path / "Karate" / "raw").mkdir(parents=True)
    (tmp_path / "Karate" / "raw" / "ind.karate.x").write_bytes(b"")
    with pytest.raises(InputError, match="unknown Planetoid dataset 'Karate'"):
        ingest(tmp_path / "Karate", tmp_path / "out")
