"""``production_model`` reports its peak RSS against the deployment's memory
budget (``memory_budget``, ``memory_budget_bytes``, ``peak_rss_of_budget``),
like every stage asset."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from gnncore.tracking.registry import registered_model_name
from gnncore.usage import peak_rss_bytes
from tests.assets.helpers import Materializer, metadata

DATASET = "prodbudget"


def _promote(tmp_path: Path, budget: str) -> dict:
    """Register a version of a real (tiny) MLflow run, record the
    ``trained_model`` materialization naming it, then materialize
    ``production_model`` under ``budget``; its metadata values."""
    materialize = Materializer(tmp_path / "data", DATASET)
    mlflow = materialize.resources["mlflow"]
    with mlflow.tracker().start_run("prod-budget", {}) as run:  # type: ignore[attr-defined]
        run.log_metrics({"best_val_accuracy": 0.75})
        run_id = str(run.run_id)
    name = registered_model_name("node", DATASET)
    version = mlflow.registry().register(name, f"runs:/{run_id}/model", run_id)  # type: ignore[attr-defined]
    materialize.instance.report_runless_asset_event(
        dg.AssetMaterialization(
            asset_key="trained_model",
            partition=DATASET,
            metadata={
                "registered_model": name,
                "model_version": version.version,
                "mlflow_run_id": run_id,
                "validation_metric": "best_val_accuracy",
                "validation_score": 0.75,
            },
        )
    )
    result = materialize("production_model", budget=budget)
    assert result.success
    assert mlflow.registry().production(name).version == version.version  # type: ignore[attr-defined]
    return metadata(result, "production_model")


def test_production_model_reports_its_peak_against_the_budget(tmp_path: Path) -> None:
    meta = _promote(tmp_path, "3GiB")
    assert meta["memory_budget"] == "3GiB" and meta["memory_budget_bytes"] == 3 << 30
    assert 0 < meta["peak_rss_bytes"] <= peak_rss_bytes()
    assert meta["peak_rss_of_budget"] == pytest.approx(meta["peak_rss_bytes"] / (3 << 30))


def test_production_model_under_none_reports_the_peak_only(tmp_path: Path) -> None:
    meta = _promote(tmp_path, "none")
    assert meta["memory_budget"] == "none" and meta["peak_rss_bytes"] > 0
    assert "memory_budget_bytes" not in meta and "peak_rss_of_budget" not in meta
