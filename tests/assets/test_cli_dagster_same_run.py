"""Training Cora with every default from the CLI and from Dagster is the same run."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from conftest import require_dataset

pytestmark = pytest.mark.dataset


def test_cora_with_defaults_from_cli_and_dagster_gives_the_same_test_accuracy(
    tmp_path: Path,
) -> None:
    from assets import PIPELINE_ASSETS, PIPELINE_CHECKS
    from assets.partitions import PARTITIONS_NAME
    from gnncore.cli.main import main
    from gnncore.io import ingest
    from pipelines.definitions import build_resources

    cora = require_dataset("planetoid", "Cora")
    graph = tmp_path / "cli" / "cora"
    ingest(cora, graph, format="planetoid", name="cora")
    out = tmp_path / "cli.json"
    assert (
        main(
            [
                "train",
                str(graph),
                "--data-root",
                str(tmp_path / "cli"),
                "--no-progress",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    cli = json.loads(out.read_text())

    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(PARTITIONS_NAME, ["cora"])
    result = dg.materialize(
        PIPELINE_ASSETS + PIPELINE_CHECKS,
        instance=instance,
        resources=build_resources(str(tmp_path / "dagster")),
        partition_key="cora",
        run_config={
            "ops": {"raw_dataset": {"config": {"source": str(cora), "format": "planetoid"}}}
        },
    )
    (trained,) = result.asset_materializations_for_node("trained_model")
    dagster = {k: v.value for k, v in trained.metadata.items()}

    assert (cli["model"], cli["epochs"], cli["batch_size"]) == ("sage", 20, 64)
    assert dagster["test_accuracy"] == cli["test_accuracy"]
    assert dagster["best_epoch"] == cli["best_epoch"]
    assert dagster["validation_score"] == cli["val_accuracy"]
