"""Registered versions, the production alias and the quality gate."""

from __future__ import annotations

import pytest
from mlflow import MlflowClient

from gnncore.tracking.registry import ModelRegistry, quality_gate, registered_model_name


def test_quality_gate_rule():
    assert quality_gate(0.80, None, 0.01).passed
    assert quality_gate(0.795, 0.80, 0.01).passed  # within the margin
    decision = quality_gate(0.78, 0.80, 0.01)
    assert not decision.passed and "worse than production" in decision.reason
    with pytest.raises(ValueError):
        quality_gate(0.8, 0.8, -0.1)


def test_register_promote_and_find_production(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    experiment = client.create_experiment("x", artifact_location=(tmp_path / "a").as_uri())
    registry = ModelRegistry(uri)
    name = registered_model_name("node", "cora")
    assert name == "gnncore-node-cora" and registry.production(name) is None
    versions = []
    for accuracy in (0.7, 0.8):
        run = client.create_run(experiment)
        client.log_metric(run.info.run_id, "best_val_accuracy", accuracy)
        client.set_terminated(run.info.run_id)
        versions.append(registry.register(name, f"runs:/{run.info.run_id}/model", run.info.run_id))
    assert [v.version for v in versions] == ["1", "2"]
    assert versions[1].metric == pytest.approx(0.8)
    registry.promote(versions[0])
    assert registry.production(name).version == "1"
    registry.promote(versions[1])
    production = registry.production(name)
    assert production.version == "2" and production.metric == pytest.approx(0.8)
