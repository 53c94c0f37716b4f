"""The ``graph_partition`` asset's MLflow run records the deployment's stage
budget (not its post-processing share): ``memory_budget`` param,
``memory_budget_bytes`` and ``peak_rss_of_budget`` metrics, as its metadata."""

from __future__ import annotations

from pathlib import Path

import pytest

from assets import PIPELINE_ASSETS, PIPELINE_CHECKS
from tests.assets.helpers import Materializer, generated, metadata

DATASET = "partbudget"
GENERATED = generated(num_nodes=400, avg_degree=6, num_classes=3, num_features=8)


def test_the_partition_run_records_the_stage_budget(tmp_path: Path) -> None:
    materialize = Materializer(tmp_path / "data", DATASET, assets=PIPELINE_ASSETS + PIPELINE_CHECKS)
    result = materialize(
        *("raw_dataset", "graph", "graph_partition"),
        config={**GENERATED, "graph_partition": {"config": {"parts": 2}}},
        budget="3GiB",
    )
    assert result.success
    meta = metadata(result, "graph_partition")
    tracker = materialize.resources["mlflow"].tracker()  # type: ignore[attr-defined]
    (run,) = [
        r
        for r in tracker.client.search_runs([tracker.experiment_id])
        if r.data.tags.get("task") == "partition"
    ]
    assert run.data.params["memory_budget"] == "3GiB" == meta["memory_budget"]
    assert run.data.metrics["memory_budget_bytes"] == 3 << 30 == meta["memory_budget_bytes"]
    assert meta["postprocess_budget_bytes"] < 3 << 30
    assert 0 < run.data.metrics["peak_rss_of_budget"] < 1
    assert run.data.metrics["peak_rss_of_budget"] == pytest.approx(meta["peak_rss_of_budget"])
