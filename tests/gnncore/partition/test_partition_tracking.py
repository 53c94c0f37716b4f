"""A tracked partitioning: one MLflow run holding what the partition directory
records, and a failed run when the method fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import planted_graph
from gnncore.partition import PartitionDir, partition_graph
from gnncore.store import GraphDir
from gnncore.tracking import FAILED, FINISHED
from gnncore.tracking.mlflow import MlflowTracker, default_tracking_uri


@pytest.fixture
def tracker(tmp_path: Path) -> MlflowTracker:
    return MlflowTracker(default_tracking_uri(tmp_path / "root"), experiment="partition")


def test_a_tracked_run_records_what_the_partition_directory_holds(
    tmp_path: Path, tracker: MlflowTracker
) -> None:
    graph = planted_graph(tmp_path / "graph", num_nodes=300)
    report = partition_graph(
        graph, tmp_path / "parts", method="metis", parts=3, tracking=tracker, tags={"k": "v"}
    )
    (run,) = tracker.client.search_runs([tracker.experiment_id])
    assert run.info.status == FINISHED and run.info.run_id == report.run_id
    assert run.data.tags["task"] == "partition" and run.data.tags["k"] == "v"
    assert run.data.params["method"] == "metis" and run.data.params["parts"] == "3"
    assert run.data.params["num_nodes"] == "300"
    metrics = run.data.metrics
    assert metrics["edge_cut_fraction"] == pytest.approx(report.metrics.edge_cut_fraction)
    assert metrics["peak_rss_bytes"] == report.peak_rss_bytes
    assert metrics["balancing_cut_cost"] == report.balancing["cut_cost"]  # type: ignore[index]
    artifacts = [a.path for a in tracker.client.list_artifacts(run.info.run_id)]
    assert "part_sizes.png" in artifacts
    written = PartitionDir.open(tmp_path / "parts", GraphDir.open(graph))
    assert written.info["mlflow_run_id"] == run.info.run_id
    assert report.to_dict()["mlflow_run_id"] == run.info.run_id


def test_a_failing_method_leaves_a_failed_run_and_no_output(
    tmp_path: Path, tracker: MlflowTracker, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = planted_graph(tmp_path / "graph", num_nodes=300)

    def broken(self: object, graph: object, options: object) -> None:
        raise RuntimeError("method exploded")

    monkeypatch.setattr("gnncore.partition.metis.MetisPartitioner.assign", broken)
    with pytest.raises(RuntimeError, match="method exploded"):
        partition_graph(graph, tmp_path / "parts", method="metis", parts=3, tracking=tracker)
    (run,) = tracker.client.search_runs([tracker.experiment_id])
    assert run.info.status == FAILED
    assert not (tmp_path / "parts").exists()
