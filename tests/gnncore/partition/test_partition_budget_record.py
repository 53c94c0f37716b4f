"""A tracked partitioning records the memory budget it ran under, with the
names the training run and the plans use: the ``memory_budget`` setting as a
param, ``memory_budget_bytes`` and ``peak_rss_of_budget`` as metrics, and the
same figures in the report's JSON."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import planted_graph
from gnncore.partition import partition_graph
from gnncore.tracking.mlflow import MlflowTracker, default_tracking_uri


def test_a_tracked_run_records_its_budget_and_peak_against_it(tmp_path: Path) -> None:
    tracker = MlflowTracker(default_tracking_uri(tmp_path / "root"), experiment="partition")
    graph = planted_graph(tmp_path / "graph", num_nodes=300)
    report = partition_graph(
        graph,
        tmp_path / "parts",
        method="random",
        parts=2,
        tracking=tracker,
        memory_budget="8MiB",
    )
    (run,) = tracker.client.search_runs([tracker.experiment_id])
    assert run.data.params["memory_budget"] == "8MiB"
    metrics = run.data.metrics
    assert metrics["memory_budget_bytes"] == 8 << 20
    peak = report.command_peak_rss_bytes
    assert peak is not None and peak > 0
    assert metrics["peak_rss_of_budget"] == pytest.approx(peak / (8 << 20))
    summary = report.to_dict()
    assert summary["memory_budget"] == "8MiB" and summary["memory_budget_bytes"] == 8 << 20
    assert summary["peak_rss_of_budget"] == pytest.approx(metrics["peak_rss_of_budget"])


def test_the_callers_budget_is_what_is_recorded(tmp_path: Path) -> None:
    """The Dagster asset runs the post-processing on a share of the deployment's
    budget and has the run record the whole budget; ``none`` logs the setting
    and no bytes."""
    tracker = MlflowTracker(default_tracking_uri(tmp_path / "root"), experiment="partition")
    graph = planted_graph(tmp_path / "graph", num_nodes=300)
    stage = 3 << 30
    report = partition_graph(
        graph,
        tmp_path / "a",
        method="random",
        parts=2,
        tracking=tracker,
        memory_budget=stage // 4,
        reported_budget=("3GiB", stage),
    )
    unbounded = partition_graph(
        graph,
        tmp_path / "b",
        method="random",
        parts=2,
        tracking=tracker,
        reported_budget=("none", None),
    )
    runs = {r.info.run_id: r for r in tracker.client.search_runs([tracker.experiment_id])}
    bounded = runs[report.run_id]  # type: ignore[index]
    assert bounded.data.params["memory_budget"] == "3GiB"
    assert bounded.data.metrics["memory_budget_bytes"] == stage
    assert 0 < bounded.data.metrics["peak_rss_of_budget"] < 1
    free = runs[unbounded.run_id]  # type: ignore[index]
    assert free.data.params["memory_budget"] == "none"
    assert "memory_budget_bytes" not in free.data.metrics
    assert "peak_rss_of_budget" not in free.data.metrics
    assert unbounded.to_dict()["memory_budget"] == "none"
    assert "memory_budget_bytes" not in unbounded.to_dict()
