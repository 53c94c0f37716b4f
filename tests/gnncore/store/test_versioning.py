"""Versioned stages: keys, input digests, and reuse of ingested and generated outputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gnncore.io import ingest_versioned
from gnncore.partition.run import partition_stage_key
from gnncore.store import GraphDir
from gnncore.store.manifest import MANIFEST_FILE
from gnncore.store.versioning import (
    KEY_LENGTH,
    STAGE_FILE,
    input_digest,
    stage_key,
    versioned_name,
)
from gnncore.synth import SynthSpec, write_ogb_raw_versioned

EDGES = "".join(f"{i} {(i * 7 + 3) % 60}\n{i} {(i + 1) % 60}\n" for i in range(60))


def edge_file(path: Path, text: str = EDGES) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def mtimes(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in directory.iterdir()}


def test_stage_key_is_canonical_and_covers_every_part() -> None:
    base = stage_key("partition", {"parts": 4, "seed": 0}, {"graph": "a"})
    assert len(base) == KEY_LENGTH and int(base, 16) >= 0
    assert base == stage_key("partition", {"seed": 0, "parts": 4}, {"graph": "a"})
    assert base != stage_key("ingest", {"parts": 4, "seed": 0}, {"graph": "a"})
    assert base != stage_key("partition", {"parts": 4, "seed": 1}, {"graph": "a"})
    assert base != stage_key("partition", {"parts": 4, "seed": 0}, {"graph": "b"})
    assert versioned_name("cora-metis-p4", base) == f"cora-metis-p4-{base}"


def test_input_digest_follows_content_and_names_not_location(tmp_path: Path) -> None:
    src = tmp_path / "a"
    edge_file(src / "raw" / "edges.txt")
    edge_file(src / "labels.txt", "1\n2\n")
    digest = input_digest(src)
    copy = tmp_path / "b"
    shutil.copytree(src, copy)
    (copy / ".DS_Store").write_text("ignored")
    assert input_digest(copy) == digest
    (copy / "labels.txt").write_text("1\n3\n")
    assert input_digest(copy) != digest
    (copy / "labels.txt").write_text("1\n2\n")
    assert input_digest(copy) == digest
    (copy / "labels.txt").rename(copy / "labels2.txt")
    assert input_digest(copy) != digest
    single = src / "raw" / "edges.txt"
    assert input_digest(single) != input_digest(src)
    with pytest.raises(FileNotFoundError):
        input_digest(tmp_path / "missing")


def test_ingest_reuses_the_same_settings_and_input_without_rewriting(tmp_path: Path) -> None:
    source = edge_file(tmp_path / "in" / "g.txt")
    first = ingest_versioned(source, tmp_path / "graphs", "g", name="g")
    assert not first.reused
    assert first.path == tmp_path / "graphs" / f"g-{first.stage_key}"
    lineage = GraphDir.open(first.path).manifest.lineage
    assert lineage["stage"] == "ingest" and lineage["stage_key"] == first.stage_key
    assert lineage["inputs"] == {"source": input_digest(source)} == {"source": first.input_sha256}
    assert lineage["settings"]["format"] == "edgelist" and lineage["settings"]["seed"] == 0
    GraphDir.open(first.path).validate(checksums=True)
    written = mtimes(first.path)

    again = ingest_versioned(source, tmp_path / "graphs", "g", name="g")
    assert again.reused and again.path == first.path and again.stage_key == first.stage_key
    assert again.manifest_sha256 == first.manifest_sha256
    assert again.report.num_canonical_edges == first.report.num_canonical_edges
    assert again.report.out_dir == str(first.path)
    assert mtimes(first.path) == written
    # only the two outputs' directories exist: no temporary leftovers
    assert [p.name for p in (tmp_path / "graphs").iterdir()] == [first.path.name]

    forced = ingest_versioned(source, tmp_path / "graphs", "g", name="g", reuse=False)
    assert not forced.reused and forced.path == first.path


def test_other_settings_or_input_get_their_own_directory(tmp_path: Path) -> None:
    source = edge_file(tmp_path / "in" / "g.txt")
    graphs = tmp_path / "graphs"
    base = ingest_versioned(source, graphs, "g", name="g")
    reseeded = ingest_versioned(source, graphs, "g", name="g", seed=1)
    directed = ingest_versioned(source, graphs, "g", name="g", directed=True)
    assert len({base.path, reseeded.path, directed.path}) == 3

    edge_file(source, EDGES + "0 59\n")  # the raw input changes
    changed = ingest_versioned(source, graphs, "g", name="g")
    assert not changed.reused and changed.input_sha256 != base.input_sha256
    assert changed.path != base.path
    for out in (base, reseeded, directed, changed):
        GraphDir.open(out.path).validate(checksums=True)
    # the re-ingested graph's partitions get other keys, so other directories
    old, new = GraphDir.open(base.path), GraphDir.open(changed.path)
    assert partition_stage_key(old, "metis", 2) != partition_stage_key(new, "metis", 2)


def test_a_directory_recording_another_key_is_not_reused(tmp_path: Path) -> None:
    source = edge_file(tmp_path / "in" / "g.txt")
    first = ingest_versioned(source, tmp_path / "graphs", "g", name="g")
    manifest = json.loads((first.path / MANIFEST_FILE).read_text())
    manifest["lineage"]["stage_key"] = "0" * KEY_LENGTH
    (first.path / MANIFEST_FILE).write_text(json.dumps(manifest))
    again = ingest_versioned(source, tmp_path / "graphs", "g", name="g")
    assert not again.reused and again.path == first.path
    assert GraphDir.open(again.path).manifest.lineage["stage_key"] == first.stage_key


def test_generated_dataset_is_versioned_by_its_spec_and_reused(tmp_path: Path) -> None:
    spec = SynthSpec(num_nodes=200, avg_degree=4, num_classes=2, num_features=3, seed=0)
    first = write_ogb_raw_versioned(tmp_path, "syn", spec)
    assert not first.reused and first.path.name == f"syn-{first.stage_key}"
    record = json.loads((first.path / STAGE_FILE).read_text())
    assert record["stage_key"] == first.stage_key and record["settings"]["seed"] == 0
    digest, edge_mtime = input_digest(first.path), (first.path / "raw" / "edge.csv.gz").stat()
    again = write_ogb_raw_versioned(tmp_path, "syn", spec)
    assert again.reused and again.path == first.path
    assert again.summary["num_edges"] == first.summary["num_edges"]
    assert (first.path / "raw" / "edge.csv.gz").stat().st_mtime_ns == edge_mtime.st_mtime_ns
    assert input_digest(first.path) == digest
    other = write_ogb_raw_versioned(
        tmp_path,
        "syn",
        SynthSpec(num_nodes=200, avg_degree=4, num_classes=2, num_features=3, seed=1),
    )
    assert other.path != first.path and not other.reused
    assert (first.path / STAGE_FILE).is_file() and (other.path / STAGE_FILE).is_file()
