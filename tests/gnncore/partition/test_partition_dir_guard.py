"""A partitioning never replaces its graph or an unrelated directory."""

from __future__ import annotations

import pytest

from conftest import planted_graph
from gnncore.cli.main import main
from gnncore.errors import InputError
from gnncore.partition import partition_graph


def test_partition_refuses_to_replace_its_graph_or_a_foreign_directory(tmp_path, capsys):
    graph = planted_graph(tmp_path / "g")
    with pytest.raises(InputError, match="the input"):
        partition_graph(graph, graph, method="random", parts=2)
    assert main(["partition", str(graph), str(tmp_path), "--method", "random", "--parts", "2"]) == 1
    assert "the input" in capsys.readouterr().err
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("keep me")
    with pytest.raises(InputError, match="holds no partition"):
        partition_graph(graph, foreign, method="random", parts=2)
    assert (foreign / "todo.txt").read_text() == "keep me"
    assert (graph / "manifest.json").is_file()
    # A partition directory is replaced as before.
    partition_graph(graph, tmp_path / "part", method="random", parts=2)
    partition_graph(graph, tmp_path / "part", method="random", parts=3)
