"""Stage outputs are versioned: other settings write another directory, the same
settings on the same graph reuse it."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from assets import ALL_ASSETS, ALL_CHECKS
from pipelines.definitions import build_resources

DATASET = {
    "raw_dataset": {
        "config": {
            "name": "ver",
            "num_nodes": 600,
            "avg_degree": 6,
            "num_classes": 3,
            "num_features": 4,
        }
    }
}


def _partition(result: dg.ExecuteInProcessResult, asset: str) -> dict:
    (mat,) = result.asset_materializations_for_node(asset)
    return {k: v.value for k, v in mat.metadata.items()}


def test_partitions_with_other_settings_keep_both_outputs_and_reruns_reuse(tmp_path: Path) -> None:
    resources = build_resources(str(tmp_path))
    instance = dg.DagsterInstance.ephemeral()

    def materialize(assets: tuple[str, ...], config: dict) -> dg.ExecuteInProcessResult:
        return dg.materialize(
            ALL_ASSETS + ALL_CHECKS,
            instance=instance,
            resources=resources,
            selection=dg.AssetSelection.assets(*assets),
            run_config={"ops": config},
        )

    first = materialize(
        ("raw_dataset", "graph", "graph_partition", "partition_metis"),
        {
            **DATASET,
            "graph_partition": {"config": {"method": "metis", "parts": 3, "seed": 1}},
            "partition_metis": {"config": {"parts": 3, "seed": 2}},
        },
    )
    chosen, compared = _partition(first, "graph_partition"), _partition(first, "partition_metis")
    assert chosen["path"] != compared["path"] and chosen["stage_key"] != compared["stage_key"]
    for meta in (chosen, compared):
        assert Path(meta["path"]).name.startswith("ver-metis-p3-")
        assert Path(meta["path"]).name.endswith(meta["stage_key"])
        assert (Path(meta["path"]) / "assignment.npy").is_file() and not meta["reused"]
    written = (Path(chosen["path"]) / "assignment.npy").stat().st_mtime_ns

    # graph_partition again with partition_metis's settings: its own output, untouched.
    again = materialize(
        ("graph_partition",),
        {"graph_partition": {"config": {"method": "metis", "parts": 3, "seed": 2}}},
    )
    same_as_compared = _partition(again, "graph_partition")
    assert same_as_compared["path"] == compared["path"] and same_as_compared["reused"]
    assert (Path(chosen["path"]) / "assignment.npy").stat().st_mtime_ns == written

    # The first settings again (more workers change speed, not labels): reused, not rewritten.
    rerun = materialize(
        ("graph_partition",),
        {"graph_partition": {"config": {"method": "metis", "parts": 3, "seed": 1, "workers": 2}}},
    )
    reused = _partition(rerun, "graph_partition")
    assert reused["path"] == chosen["path"] and reused["reused"]
    assert reused["edge_cut_fraction"] == chosen["edge_cut_fraction"]
    assert (Path(chosen["path"]) / "assignment.npy").stat().st_mtime_ns == written
