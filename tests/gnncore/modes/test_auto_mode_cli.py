"""``gnncore train`` in mode auto (the default): the choice in its JSON summary,
``--memory-budget`` as the budget, the refusal before MLflow is touched."""

from __future__ import annotations

import json

import pytest

from conftest import planted_graph
from gnncore.cli.main import main

COMMON = [
    "--epochs",
    "1",
    "--fanouts",
    "5,5",
    "--batch-size",
    "64",
    "--hidden",
    "16",
    "--device",
    "cpu",
    "--no-progress",
]


@pytest.fixture()
def graph(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNCORE_DATA_ROOT", str(tmp_path / "root"))
    monkeypatch.chdir(tmp_path)
    return planted_graph(tmp_path / "g")


def test_train_reports_the_mode_auto_chose(graph, tmp_path):
    out = tmp_path / "out.json"
    # The budget bounds the whole process: here a pytest worker that may already hold
    # a GiB of earlier tests' modules and arrays, so it is sized well above that.
    assert main(["train", str(graph), *COMMON, "--memory-budget", "8GiB", "--json", str(out)]) == 0
    summary = json.loads(out.read_text())
    assert (summary["mode"], summary["mode_requested"]) == ("in_memory", "auto")
    assert summary["mode_reason"].startswith("the training data fits")
    assert summary["mode_budget_bytes"] == 8 << 30 and summary["mode_training_bytes"] > 0


def test_train_refuses_before_tracking_when_nothing_fits(graph, tmp_path, capsys):
    code = main(["train", str(graph), *COMMON, "--memory-budget", "16KiB"])
    assert code == 1
    error = capsys.readouterr().err
    assert "16.0 KiB" in error and "gnncore store" in error
    assert not (tmp_path / "root" / "mlflow").exists()  # refused before MLflow
