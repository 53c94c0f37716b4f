"""Downstream assets read the upstream output of their own run when there is one."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import dagster as dg

from assets import ALL_ASSETS, ALL_CHECKS
from assets.graph import graph
from assets.upstream import upstream_metadata
from pipelines.definitions import build_resources


def _graph_run(instance: dg.DagsterInstance, root: Path, name: str) -> str:
    result = dg.materialize(
        ALL_ASSETS + ALL_CHECKS,
        instance=instance,
        resources=build_resources(str(root)),
        selection=dg.AssetSelection.assets("raw_dataset", "graph"),
        run_config={
            "ops": {
                "raw_dataset": {
                    "config": {
                        "name": name,
                        "num_nodes": 300,
                        "avg_degree": 4,
                        "num_classes": 2,
                        "num_features": 4,
                    }
                }
            }
        },
    )
    return result.run_id


def test_the_same_run_s_materialization_wins_over_a_later_one(tmp_path: Path) -> None:
    instance = dg.DagsterInstance.ephemeral()
    first = _graph_run(instance, tmp_path, "first")
    second = _graph_run(instance, tmp_path, "second")

    def in_run(run_id: str) -> SimpleNamespace:  # what an asset's context offers
        return SimpleNamespace(instance=instance, run=SimpleNamespace(run_id=run_id))

    assert upstream_metadata(in_run(first), graph.key)["name"] == "first"
    assert upstream_metadata(in_run(second), graph.key)["name"] == "second"
    # a run that did not materialize the graph reads the latest one
    assert upstream_metadata(in_run("another-run"), graph.key)["name"] == "second"
