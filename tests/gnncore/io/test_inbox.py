"""The drop folder: which files are datasets, when they count, what is new."""

from __future__ import annotations

import os
import time
from pathlib import Path

from gnncore.io.versioning.inbox import InboxState, dataset_name, scan_inbox


def drop(folder: Path, name: str, text: str, age: float = 60.0) -> Path:
    path = folder / name
    path.write_text(text)
    then = time.time() - age
    os.utime(path, (then, then))
    return path


def test_names_pairs_and_skips(tmp_path):
    assert dataset_name(Path("My Graph.v2.csv.gz")) == "my_graph_v2"
    drop(tmp_path, "Social Net.csv", "a,b\n")
    drop(tmp_path, "social net.nodes.parquet", "not read here")
    drop(tmp_path, "roads.tsv", "1\t2\n")
    drop(tmp_path, ".hidden.csv", "a,b\n")
    drop(tmp_path, "big.csv.part", "a,b\n")
    drop(tmp_path, "notes.md", "# hi\n")
    drop(tmp_path, "orphan.features.csv", "node_id,x\n")
    scan = scan_inbox(tmp_path, InboxState())
    found = {d.name: d for d in scan.datasets}
    assert set(found) == {"social_net", "roads"}
    assert found["social_net"].nodes is not None
    assert found["social_net"].nodes.name == "social net.nodes.parquet"
    assert found["roads"].nodes is None
    assert scan.problems == ["orphan.features.csv: a node table without an edge list beside it"]


def test_clashing_names_are_a_problem_not_a_guess(tmp_path):
    drop(tmp_path, "a.csv", "x,y\n")
    drop(tmp_path, "A.parquet", "?")
    scan = scan_inbox(tmp_path, InboxState())
    assert scan.datasets == []
    assert "several files give the dataset name 'a'" in scan.problems[0]


def test_files_being_written_wait_until_they_settle(tmp_path):
    drop(tmp_path, "fresh.csv", "a,b\n", age=0.0)
    scan = scan_inbox(tmp_path, InboxState(), settle_seconds=10)
    assert scan.datasets == [] and scan.settling == ["fresh"]
    later = scan_inbox(tmp_path, InboxState(), settle_seconds=10, now=time.time() + 11)
    assert [d.name for d in later.datasets] == ["fresh"]


def test_digest_follows_content_of_both_files(tmp_path):
    edges = drop(tmp_path, "g.csv", "a,b\n")
    state = InboxState()
    first = scan_inbox(tmp_path, state).datasets[0]
    drop(tmp_path, "g.csv", "a,b\n", age=30)  # same bytes, new mtime
    restored = InboxState.loads(state.dumps())
    assert scan_inbox(tmp_path, restored).datasets[0].digest == first.digest
    drop(tmp_path, "g.nodes.csv", "node_id,x\na,1\nb,2\n")
    with_nodes = scan_inbox(tmp_path, restored).datasets[0]
    assert with_nodes.digest != first.digest
    drop(tmp_path, "g.csv", "a,c\n", age=20)
    assert scan_inbox(tmp_path, restored).datasets[0].digest not in (
        first.digest,
        with_nodes.digest,
    )
    edges.unlink()
    (tmp_path / "g.nodes.csv").unlink()
    assert scan_inbox(tmp_path, restored).datasets == [] and restored.files == {}


def test_a_damaged_cursor_starts_afresh(tmp_path):
    assert InboxState.loads("{not json").files == {}
    assert InboxState.loads(None).requested == {}
