"""Downstream assets read the upstream output of their own dataset partition: of
their own run when there is one, else the partition's latest, never another
dataset's, even one that ran later."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import pytest
from mlflow import MlflowClient

from assets.graph import graph
from assets.partitions import PARTITIONS_NAME
from assets.upstream import upstream_metadata
from tests.assets.helpers import Materializer, generated, metadata


def _graph_run(
    instance: dg.DagsterInstance, root: Path, name: str, num_nodes: int = 300
) -> dg.ExecuteInProcessResult:
    instance.add_dynamic_partitions(PARTITIONS_NAME, [name])
    config = generated(num_nodes=num_nodes, avg_degree=4, num_classes=2, num_features=4, seed=3)
    return Materializer(root, name, instance=instance)("raw_dataset", "graph", config=config)


def in_run(instance: dg.DagsterInstance, run_id: str, partition: str) -> SimpleNamespace:
    """What an asset's context offers ``upstream_metadata``."""
    return SimpleNamespace(
        instance=instance,
        run=SimpleNamespace(run_id=run_id),
        has_partition_key=True,
        partition_key=partition,
    )


def test_the_same_run_and_partition_win_over_a_later_one(tmp_path: Path) -> None:
    instance = dg.DagsterInstance.ephemeral()
    first = _graph_run(instance, tmp_path, "first").run_id
    second = _graph_run(instance, tmp_path, "second").run_id

    assert upstream_metadata(in_run(instance, first, "first"), graph.key)["name"] == "first"
    assert upstream_metadata(in_run(instance, second, "second"), graph.key)["name"] == "second"
    # A run that did not materialize the graph reads its own partition's latest one,
    # not the latest of all (the second dataset's).
    assert upstream_metadata(in_run(instance, "another", "first"), graph.key)["name"] == "first"
    # Another partition's materialization in the same run is not this partition's input.
    with pytest.raises(dg.Failure, match="not been materialized for dataset partition 'third'"):
        upstream_metadata(in_run(instance, second, "third"), graph.key)


def test_two_datasets_keep_separate_lineage(tmp_path: Path) -> None:
    """The model of dataset A trains on A's graph, although B's graph was
    materialized after it; a dataset with no graph fails, naming it."""
    instance = dg.DagsterInstance.ephemeral()
    a = _graph_run(instance, tmp_path, "alpha", num_nodes=300)
    _graph_run(instance, tmp_path, "beta", num_nodes=500)  # B runs last
    a_graph = a.asset_materializations_for_node("graph")[0].metadata["path"].value

    train = {"trained_model": {"config": {"node": {"mode": "in_memory", "epochs": 1, "hidden": 8}}}}
    alpha = Materializer(tmp_path, "alpha", instance=instance)
    resources = alpha.resources
    result = alpha("trained_model", config=train)
    (mat,) = result.asset_materializations_for_node("trained_model")
    assert mat.partition == "alpha"
    meta = metadata(result, "trained_model")
    assert meta["registered_model"] == "gnncore-node-alpha"
    assert Path(str(meta["checkpoint_dir"])).name.startswith("alpha-node-")
    run = MlflowClient(resources["mlflow"].resolved_tracking_uri()).get_run(meta["mlflow_run_id"])
    assert run.data.tags["dataset"] == "alpha"
    assert run.data.tags["dagster_partition"] == "alpha"
    assert run.data.params["num_nodes"] == "300", run.data.params  # A's graph, not B's 500

    # The UI's per-partition view: each dataset's graph is its own materialization.
    latest = {
        key: instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=graph.key, asset_partitions=[key]), limit=1
        ).records[0]
        for key in ("alpha", "beta")
    }
    assert latest["alpha"].asset_materialization.metadata["path"].value == a_graph
    assert latest["beta"].asset_materialization.metadata["num_nodes"].value == 500

    instance.add_dynamic_partitions(PARTITIONS_NAME, ["gamma"])
    gamma = Materializer(tmp_path, "gamma", instance=instance)
    failed = gamma("trained_model", config=train, raise_on_error=False)
    assert not failed.success
    (failure,) = [e for e in failed.all_events if e.is_step_failure]
    message = str(failure.step_failure_data.error)
    assert "graph has not been materialized for dataset partition 'gamma'" in message, message
