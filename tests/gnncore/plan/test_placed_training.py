"""Training through a placement plan: the placed feature store returns the plain
store's rows, counts reads per tier, and training gives the same model."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch_geometric.data import TensorAttr

from conftest import planted_graph
from gnncore.cli.main import main
from gnncore.modes import RunInputs, RunRecording, train_graph_dir
from gnncore.plan import PlacementPlan, PlacementSettings, plan_placement
from gnncore.plan.feature_store import PlacedFeatureStore
from gnncore.store import GraphDir, GraphDirFeatureStore
from gnncore.train import NodeTrainConfig

pytest.importorskip("gnncore._C")


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    root = tmp_path_factory.mktemp("placed")
    graph = planted_graph(root / "g")
    settings = PlacementSettings(devices=2, cache_nodes=60, alpha=0.1, layers=2)
    plan_placement(graph, root / "plan", settings)
    return GraphDir.open(graph), root / "plan"


def test_gather_returns_the_plain_rows_and_counts_each_tier(planned):
    graph, plan_dir = planned
    plan = PlacementPlan.open(plan_dir, graph)
    base = GraphDirFeatureStore(graph)
    store = PlacedFeatureStore(base, plan, device_index=1)
    index = torch.from_numpy(np.random.default_rng(0).choice(graph.num_nodes, 150, replace=False))
    got = store.get_tensor(TensorAttr(None, "x", index))
    assert torch.equal(got, base.get_tensor(TensorAttr(None, "x", index)))
    source = plan.resolve(1, index.numpy())[0]
    counts = store.take_counts()
    assert counts == {
        "feature_reads_local": float((source == 1).sum()),
        "feature_reads_peer": float((source == 0).sum()),
        "feature_reads_host": float((source < 0).sum()),
    }
    assert min(counts.values()) > 0  # every tier is exercised
    assert sum(store.take_counts().values()) == 0  # taking resets
    # Labels pass through to the plain store.
    y = store.get_tensor(TensorAttr(None, "y", index))
    assert torch.equal(y, base.get_tensor(TensorAttr(None, "y", index)))


def test_a_plan_of_another_graph_is_refused(planned, tmp_path):
    _, plan_dir = planned
    other = GraphDir.open(planted_graph(tmp_path / "other", seed=5))
    with pytest.raises(ValueError, match="another graph"):
        PlacementPlan.open(plan_dir, other)


def test_training_with_a_placement_matches_training_without(planned):
    graph, plan_dir = planned
    config = NodeTrainConfig(epochs=3, hidden=16, batch_size=64, seed=3)
    plain = train_graph_dir(graph, config, recording=RunRecording(progress=False))
    placed = train_graph_dir(
        graph, config, inputs=RunInputs(placement=plan_dir), recording=RunRecording(progress=False)
    )
    assert placed.train_loss == plain.train_loss
    assert placed.test_accuracy == plain.test_accuracy
    for epoch in placed.throughput:
        reads = [epoch[f"feature_reads_{t}"] for t in ("local", "peer", "host")]
        assert min(reads) > 0
    assert "feature_reads_local" not in plain.throughput[0]


def test_cli_trains_with_a_placement_and_logs_tier_counts(planned, tmp_path):
    graph, plan_dir = planned
    out = tmp_path / "train.json"
    argv = ["train", str(graph.path), "--epochs", "2", "--hidden", "16", "--no-progress"]
    argv += ["--data-root", str(tmp_path / "data"), "--placement", str(plan_dir)]
    assert main([*argv, "--json", str(out)]) == 0
    summary = json.loads(out.read_text())
    import mlflow

    client = mlflow.MlflowClient(summary["mlflow_tracking_uri"])
    run = client.get_run(summary["mlflow_run_id"])
    assert run.data.params["placement_plan"] == str(plan_dir)
    history = client.get_metric_history(run.info.run_id, "feature_reads_local")
    assert [m.step for m in history] == [1, 2] and all(m.value > 0 for m in history)


def test_cora_with_a_placement_gives_the_same_test_accuracy(tmp_path):
    from conftest import require_dataset
    from gnncore.io import ingest

    cora = require_dataset("planetoid", "Cora")
    graph = tmp_path / "cora"
    ingest(cora, graph, format="planetoid", name="cora")
    assert main(["plan", "placement", str(graph), str(tmp_path / "plan"), "--devices", "2",
                 "--cache-nodes", "270", "--no-progress"]) == 0  # fmt: skip
    runs = {}
    for name, extra in (("plain", []), ("placed", ["--placement", str(tmp_path / "plan")])):
        out = tmp_path / f"{name}.json"
        argv = ["train", str(graph), "--epochs", "5", "--no-progress", "--json", str(out)]
        assert main([*argv, "--data-root", str(tmp_path / "data"), *extra]) == 0
        runs[name] = json.loads(out.read_text())
    assert runs["placed"]["test_accuracy"] == runs["plain"]["test_accuracy"]
    import mlflow

    client = mlflow.MlflowClient(runs["placed"]["mlflow_tracking_uri"])
    metrics = client.get_run(runs["placed"]["mlflow_run_id"]).data.metrics
    reads = [metrics[f"feature_reads_{tier}"] for tier in ("local", "peer", "host")]
    assert min(reads) > 0
    plain = client.get_run(runs["plain"]["mlflow_run_id"]).data.metrics
    assert "feature_reads_local" not in plain
