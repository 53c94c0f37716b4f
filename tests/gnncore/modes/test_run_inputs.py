"""train_graph_dir's run description (issue 26, item 3): what it reads besides the
graph (RunInputs), how it is recorded (RunRecording), and its short signature."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from conftest import planted_graph, tiny_kg
from gnncore.errors import ConfigError
from gnncore.modes import RunInputs, RunRecording, resolve_mode, train_graph_dir
from gnncore.store import GraphDir
from gnncore.train import LinkTrainConfig, NodeTrainConfig, fit

QUIET = RunRecording(progress=False)


def test_the_entry_points_take_their_config_objects_not_keyword_lists() -> None:
    assert list(inspect.signature(train_graph_dir).parameters) == [
        "graph_dir",
        "config",
        "inputs",
        "recording",
        "budget",
    ]
    assert list(inspect.signature(fit).parameters) == ["task", "config", "source", "hooks"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        QUIET.resume = True  # type: ignore[misc]
    assert RunInputs().plans is False and RunInputs(replication="r").plans is True


def test_a_mode_the_caller_chose_is_used_as_it_is_and_reported(tmp_path: Path) -> None:
    graph = GraphDir.open(planted_graph(tmp_path / "g", num_nodes=200))
    config = NodeTrainConfig(epochs=1, hidden=8, batch_size=64, device="cpu")
    choice = resolve_mode(graph, config, 1 << 40)  # room: in_memory
    assert choice.mode == "in_memory"
    with pytest.raises(ConfigError, match="partitioned store"):  # one byte refuses in_memory
        train_graph_dir(graph, config, recording=QUIET, budget=1)
    # The caller's choice is not resolved again against the budget.
    result = train_graph_dir(graph, config, RunInputs(mode_choice=choice), QUIET, budget=1)
    assert result.config.mode == "in_memory" and result.mode_choice == choice.to_dict()


def test_plans_and_stores_are_refused_for_link_prediction(tmp_path: Path) -> None:
    kg = tiny_kg(tmp_path / "kg")
    for inputs in (RunInputs(placement="p"), RunInputs(replication="r"), RunInputs(store="s")):
        with pytest.raises(ConfigError, match="node training only"):
            train_graph_dir(kg, LinkTrainConfig(epochs=1, device="cpu"), inputs, QUIET)
