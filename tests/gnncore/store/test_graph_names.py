"""A graph's name becomes paths (checkpoint and stage directories): a manifest whose
``name`` is not a safe name is refused by ``gnncore validate`` and by every verb that
opens the graph (``gnncore train`` wrote ``epoch-1.pt`` outside
``<data root>/checkpoints`` for a graph named ``../../../escape``), and no graph
directory is written under such a name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import planted_graph
from gnncore.cli.main import main
from gnncore.errors import InputError
from gnncore.store import GraphDir, create_graph_dir
from gnncore.store.versioning import versioned_name

BAD_NAMES = ["../../../escape", "a/b", "cora\n", "..", ".hidden", "a\x1bb", "x" * 200]


def rename_graph(graph: Path, name: str) -> None:
    """Edit the manifest's ``name`` by hand (no checksum covers it)."""
    path = graph / "manifest.json"
    obj = json.loads(path.read_text())
    obj["name"] = name
    path.write_text(json.dumps(obj))


@pytest.fixture(scope="module")
def graph_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return planted_graph(tmp_path_factory.mktemp("names") / "g", num_nodes=120, features=4)


def fresh_graph(tmp_path: Path, source: Path, name: str) -> Path:
    import shutil

    graph = tmp_path / "deep" / "er" / "graph"
    shutil.copytree(source, graph)
    rename_graph(graph, name)
    return graph


@pytest.mark.parametrize("name", BAD_NAMES)
def test_open_and_validate_refuse_an_unsafe_graph_name(
    tmp_path: Path, graph_copy: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    graph = fresh_graph(tmp_path, graph_copy, name)
    with pytest.raises(InputError, match="graph name"):
        GraphDir.open(graph)
    assert main(["validate", str(graph)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"gnncore validate: error: {graph / 'manifest.json'}: graph name ")
    assert err.count("\n") == 1


def test_train_refuses_an_escaping_graph_name_and_writes_nothing(
    tmp_path: Path, graph_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's repro: ``gnncore train`` of a graph named ``../../../escape``
    refuses with one line; no checkpoint, MLflow store or data root appears, here
    or three levels up."""
    graph = fresh_graph(tmp_path, graph_copy, "../../../escape")
    root = tmp_path / "deep" / "er" / "root"
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    code = main(
        [
            "train",
            str(graph),
            "--task",
            "node",
            "--epochs",
            "1",
            "--batch-size",
            "32",
            "--hidden",
            "8",
            "--device",
            "cpu",
            "--no-progress",
            "--data-root",
            str(root),
        ]
    )
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.startswith(f"gnncore train: error: {graph / 'manifest.json'}: graph name '../")
    assert err.count("\n") == 1
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
    assert not list(tmp_path.rglob("escape*")) and not root.exists()


def test_no_graph_directory_is_written_under_an_unsafe_name(tmp_path: Path) -> None:
    out = tmp_path / "out" / "g"
    out.parent.mkdir()
    with pytest.raises(InputError, match=r"dataset name: '\.\./x' holds a path separator"):
        with create_graph_dir(out, name="../x"):
            raise AssertionError("the writer must not start")
    assert list(out.parent.iterdir()) == []


def test_versioned_stage_directories_refuse_an_unsafe_prefix() -> None:
    assert versioned_name("cora", "abc123") == "cora-abc123"
    with pytest.raises(InputError, match="directory name"):
        versioned_name("../../cora", "abc123")
