"""The asset chain materialized with dg.materialize on a small generated graph."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import numpy as np
import pytest
from mlflow import MlflowClient

from assets import PIPELINE_ASSETS, PIPELINE_CHECKS, graph_integrity, partition_balance
from gnncore.partition.store import PartitionDir, write_partition_dir
from gnncore.store import GraphDir
from tests.assets.helpers import Materializer, generated, metadata

DATASET = "tiny"
OPS = {
    **generated(num_nodes=1500, avg_degree=8, num_classes=4, num_features=16),
    "graph_partition": {"config": {"parts": 3}},
    # Mode mmap: the plans serve memory-mapped features, and this file checks that
    # training reads them (auto would pick in_memory here: test_auto_mode_asset.py).
    "trained_model": {
        "config": {"node": {"epochs": 3, "hidden": 32, "batch_size": 128, "mode": "mmap"}}
    },
}


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """Materialize everything once; tests then inspect or tamper with the outputs."""
    root = tmp_path_factory.mktemp("data")
    materialize = Materializer(root, DATASET, assets=PIPELINE_ASSETS + PIPELINE_CHECKS)
    result = materialize(config=OPS)
    return result, materialize


def run_check(check, materialize: Materializer) -> dg.AssetCheckEvaluation:
    """Run one check alone on the dataset's partition. (``partition_key=`` wants a
    selected asset to take the partitions from; the run's partition tag is what it sets.)"""
    result = dg.materialize(
        materialize.assets,
        instance=materialize.instance,
        resources=materialize.resources,
        selection=dg.AssetSelection.checks(check),
        tags={"dagster/partition": DATASET},
        raise_on_error=False,
    )
    (evaluation,) = result.get_asset_check_evaluations()
    return evaluation


def test_chain_materializes_with_useful_metadata(pipeline):
    result, materialize = pipeline
    root = materialize.root
    assert result.success
    graph_meta = metadata(result, "graph")
    assert graph_meta["num_nodes"] == 1500
    assert (
        graph_meta["num_edges"]
        + graph_meta["duplicates_removed"]
        + graph_meta["self_loops_removed"]
        == graph_meta["num_input_edges"]
        == 6000
    )
    assert str(graph_meta["path"]).startswith(str(root))
    part_meta = metadata(result, "graph_partition")
    assert part_meta["parts"] == 3 and 0 < part_meta["edge_cut_fraction"] < 0.5
    assert "data:image/png;base64," in part_meta["balance_chart"]
    model_meta = metadata(result, "trained_model")
    assert model_meta["test_accuracy"] > 0.5  # 4 balanced classes: chance is 0.25
    assert str(model_meta["mlflow_run"]).endswith(model_meta["mlflow_run_id"])
    assert model_meta["resumed_from_epoch"] == 0
    assert 0 <= model_meta["stall_fraction"] < 1 and model_meta["stall_s"] >= 0
    assert "| stall s |" in str(model_meta["epoch_timing"])  # one row per epoch
    checkpoints = sorted(p.name for p in Path(str(model_meta["checkpoint_dir"])).iterdir())
    assert checkpoints and all(name.startswith("epoch-") for name in checkpoints)
    assert result.run_id in str(model_meta["checkpoint_dir"])
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {
        "graph_integrity": True,
        "partition_balance": True,
        "replication_plan_valid": True,
        "placement_plan_valid": True,
        "model_quality": True,
    }


def test_plans_sit_between_the_partition_and_the_model(pipeline):
    result, materialize = pipeline
    resources, root = materialize.resources, materialize.root
    part, rep, place = (
        metadata(result, a) for a in ("graph_partition", "replication_plan", "placement_plan")
    )
    graph_path = metadata(result, "graph")["path"]
    assert rep["partition_path"] == part["path"] and rep["graph_path"] == graph_path
    assert place["replication_path"] == rep["path"] and place["graph_path"] == graph_path
    # Defaults: 1% of 1500 nodes replicated; 4 devices caching 10% of the nodes each.
    assert rep["replicated_nodes"] == 15 and rep["memory_increase"] > 0
    assert (place["devices"], place["cache_nodes"]) == (4, 150)
    for meta in (rep, place):
        assert Path(str(meta["path"])).name.endswith(meta["stage_key"])
        assert str(meta["path"]).startswith(str(root / "plans"))
    assert "data:image/png;base64," in rep["memory_chart"]
    assert "data:image/png;base64," in place["read_share_chart"]
    model = metadata(result, "trained_model")
    assert model["placement_plan"] == place["path"]
    assert model["replication_plan"] == rep["path"]
    client = MlflowClient(resources["mlflow"].resolved_tracking_uri())
    run = client.get_run(model["mlflow_run_id"])
    assert run.data.params["placement_plan"] == place["path"]
    assert run.data.params["replication_plan"] == rep["path"]
    assert run.data.metrics["feature_reads_local"] > 0
    plan_runs = {
        client.get_run(str(m["mlflow_run"]).rsplit("/", 1)[-1]).data.tags["task"]
        for m in (rep, place)
    }
    assert plan_runs == {"replication", "placement"}


def test_mlflow_run_is_tagged_with_the_dagster_run(pipeline):
    result, materialize = pipeline
    resources = materialize.resources
    run_id = metadata(result, "trained_model")["mlflow_run_id"]
    client = MlflowClient(resources["mlflow"].resolved_tracking_uri())
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["dagster_run_id"] == result.run_id
    assert run.data.tags["dataset"] == "tiny"
    assert run.data.tags["dagster_partition"] == "tiny"
    # Training does not read the partition, so its run claims none.
    assert "partition_method" not in run.data.tags and "partitioner" not in run.data.params
    assert run.data.metrics["test_accuracy"] == pytest.approx(
        metadata(result, "trained_model")["test_accuracy"]
    )
    # the memory resource samples what the step holds: the run has it beside the RSS's peak
    # (smaps counts pages exactly, VmHWM from per-thread counters that lag by some pages)
    held, rss = run.data.metrics["peak_held_bytes"], run.data.metrics["peak_rss_bytes"]
    assert 0 < held <= rss + (4 << 20)


def test_graph_integrity_fails_on_a_corrupted_file(pipeline):
    result, materialize = pipeline
    assert run_check(graph_integrity, materialize).passed
    path = GraphDir.open(metadata(result, "graph")["path"]).path / "labels.npy"
    original = path.read_bytes()
    labels = np.load(path)
    labels[:10] = (labels[:10] + 1) % 4  # same size, other bytes
    np.save(path, labels)
    try:
        evaluation = run_check(graph_integrity, materialize)
        assert not evaluation.passed
        assert "sha256 does not match" in evaluation.metadata["error"].value
    finally:
        path.write_bytes(original)


def test_partition_balance_fails_on_a_skewed_partition(pipeline):
    result, materialize = pipeline
    path = metadata(result, "graph_partition")["path"]
    graph = GraphDir.open(metadata(result, "graph")["path"])
    good = PartitionDir.open(path, graph)
    original = np.array(good.assignment())
    skewed = original.copy()
    skewed[: graph.num_nodes // 2] = 0
    write_partition_dir(path, graph, skewed, dict(good.info))
    try:
        evaluation = run_check(partition_balance, materialize)
        assert not evaluation.passed
        assert "part 0 holds" in evaluation.metadata["problems"].value
    finally:
        write_partition_dir(path, graph, original, dict(good.info))
    assert run_check(partition_balance, materialize).passed


def test_partitioning_is_an_mlflow_run(pipeline):
    result, materialize = pipeline
    resources = materialize.resources
    meta = metadata(result, "graph_partition")
    run_id = str(meta["mlflow_run"]).rsplit("/", 1)[-1]
    run = MlflowClient(resources["mlflow"].resolved_tracking_uri()).get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["method"] == "metis" and run.data.params["parts"] == "3"
    assert run.data.metrics["edge_cut_fraction"] == pytest.approx(meta["edge_cut_fraction"])
    assert run.data.metrics["peak_rss_bytes"] > 0
    assert run.data.tags["dagster_run_id"] == result.run_id


def test_quality_gate_promotes_a_good_model_and_blocks_a_worse_one(pipeline):
    result, materialize = pipeline
    # First run: no production version yet, so the gate passed and v1 was promoted.
    gate = {e.check_name: e for e in result.get_asset_check_evaluations()}["model_quality"]
    assert gate.passed and gate.metadata["production_version"].value == "none"
    first = metadata(result, "trained_model")
    assert metadata(result, "production_model")["production_version"] == first["model_version"]
    registry = materialize.resources["mlflow"].registry()
    assert registry.production(first["registered_model"]).version == first["model_version"]

    # A features-only model for one epoch is far worse: the gate fails, nothing is promoted.
    worse = {"node": {"model": "none", "epochs": 1, "hidden": 8, "lr": 0.001}}
    second = materialize(
        "trained_model",
        "production_model",
        config={"trained_model": {"config": worse}},
        raise_on_error=False,
    )
    (evaluation,) = second.get_asset_check_evaluations()
    assert evaluation.check_name == "model_quality" and not evaluation.passed
    assert "worse than production" in evaluation.metadata["reason"].value
    assert not second.asset_materializations_for_node("production_model")
    candidate = second.asset_materializations_for_node("trained_model")[0]
    assert candidate.metadata["model_version"].value != first["model_version"]
    assert registry.production(first["registered_model"]).version == first["model_version"]


def test_link_task_is_trained_registered_and_gated_on_mrr(pipeline):
    _, materialize = pipeline
    link = {"model": "none", "epochs": 2, "dim": 16, "batch_size": 256, "num_negatives": 256}
    config = {"trained_model": {"config": {"task": "link", "link": link}}}
    result = materialize("trained_model", "production_model", config=config)
    trained = metadata(result, "trained_model")
    assert trained["task"] == "link" and trained["registered_model"] == "gnncore-link-tiny"
    assert trained["validation_metric"] == "best_val_mrr"
    assert trained["validation_score"] == trained["val_mrr"] > 0
    assert 0 < trained["test_mrr"] <= trained["test_hits@10"] <= 1
    (gate,) = result.get_asset_check_evaluations()
    assert gate.passed and gate.metadata["metric"].value == "best_val_mrr"
    registry = materialize.resources["mlflow"].registry("best_val_mrr")
    production = registry.production("gnncore-link-tiny")
    assert production.version == trained["model_version"]
    assert production.metric == pytest.approx(trained["val_mrr"])
