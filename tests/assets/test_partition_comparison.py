"""Every partitioning method as an asset, compared in partition_report."""

from __future__ import annotations

import dagster as dg
from mlflow import MlflowClient

from assets.partition import COMPARED_METHODS
from tests.assets.helpers import Materializer, generated

OPS = {
    **generated(num_nodes=1200, avg_degree=8, num_classes=4, num_features=8),
    **{
        f"partition_{m.replace('-', '_')}": {"config": {"parts": 4, "chunk": 0.2}}
        for m in COMPARED_METHODS
    },
    # GREM's sibling bisections in two spawned processes, from a Dagster step
    "partition_grem": {"config": {"parts": 4, "chunk": 0.2, "workers": 2}},
}


def test_comparison_job_partitions_with_every_method(tmp_path):
    materialize = Materializer(tmp_path, "cmp")
    resources = materialize.resources
    selection = dg.AssetSelection.groups("partitioning") | dg.AssetSelection.assets(
        "raw_dataset", "graph"
    )
    result = materialize(config=OPS, selection=selection)
    assert result.success
    checks = {
        (e.asset_key.to_user_string(), e.passed) for e in result.get_asset_check_evaluations()
    }
    assert checks >= {(f"partition_{m.replace('-', '_')}", True) for m in COMPARED_METHODS}
    (report,) = result.asset_materializations_for_node("partition_report")
    table = report.metadata["table"].value
    for method in COMPARED_METHODS:
        assert f"| {method} | 4 |" in table
    assert report.metadata["best_cut_method"].value in {
        "metis",
        "metis-recursive",
        "grem",
        "kaminpar",
    }
    assert "data:image/png;base64," in report.metadata["chart"].value
    # One MLflow run per partitioning, comparable by their params.
    client = MlflowClient(resources["mlflow"].resolved_tracking_uri())
    runs = client.search_runs(
        [client.get_experiment_by_name("gnncore").experiment_id],
        filter_string="tags.task = 'partition'",
    )
    assert sorted(r.data.params["method"] for r in runs) == sorted(COMPARED_METHODS)
    (grem,) = [r for r in runs if r.data.params["method"] == "grem"]
    assert grem.data.params["workers"] == "2"
