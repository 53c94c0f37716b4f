"""``gnncore train --json`` and ``gnncore store --json`` report their peak RSS
against the whole process's budget like every budgeted verb:
``memory_budget_bytes`` (train: the budget mode auto compared with, else the
option's), ``peak_rss_bytes`` and ``peak_rss_of_budget``."""

from __future__ import annotations

import json

import pytest

from gnncore.cli.main import main
from gnncore.usage import peak_rss_bytes

pytest.importorskip("gnncore._C")


def test_train_reports_its_peak_against_the_budget(tmp_path) -> None:
    graph = tmp_path / "g"
    assert main(["synth", str(graph), "--nodes", "300", "--no-progress"]) == 0
    budget = 6 << 30
    out = tmp_path / "train.json"
    argv = ["train", str(graph), "--epochs", "1", "--hidden", "8", "--no-progress"]
    argv += ["--data-root", str(tmp_path / "data"), "--memory-budget", "6GiB"]
    assert main([*argv, "--json", str(out)]) == 0
    summary = json.loads(out.read_text())
    assert summary["memory_budget_bytes"] == budget == summary["mode_budget_bytes"]
    # VmHWM is read from per-thread counters the kernel folds in lazily: with
    # torch's threads a later read may show a few pages less.
    assert 0 < summary["peak_rss_bytes"] <= peak_rss_bytes() + (1 << 20)
    assert summary["peak_rss_of_budget"] == pytest.approx(summary["peak_rss_bytes"] / budget)


def test_store_reports_its_peak_against_the_budget(tmp_path) -> None:
    graph, part = tmp_path / "g", tmp_path / "p"
    assert main(["synth", str(graph), "--nodes", "300", "--no-progress"]) == 0
    argv = ["partition", str(graph), str(part), "--parts", "2", "--method", "random"]
    assert main([*argv, "--no-progress"]) == 0
    out = tmp_path / "store.json"
    argv = ["store", str(graph), str(part), str(tmp_path / "s"), "--memory-budget", "2GiB"]
    assert main([*argv, "--no-progress", "--json", str(out)]) == 0
    summary = json.loads(out.read_text())
    assert summary["memory_budget_bytes"] == 2 << 30 and summary["peak_rss_bytes"] > 0
    assert summary["peak_rss_of_budget"] == pytest.approx(summary["peak_rss_bytes"] / (2 << 30))
