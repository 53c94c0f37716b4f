"""Stage outputs are versioned: other settings write another directory, the same
settings on the same graph reuse it."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from assets import ALL_ASSETS, ALL_CHECKS
from pipelines.definitions import build_resources
from tests.assets.helpers import Materializer, generated, metadata, partitioned_instance

DATASET = generated(num_nodes=600, avg_degree=6, num_classes=3, num_features=4)


def test_partitions_with_other_settings_keep_both_outputs_and_reruns_reuse(tmp_path: Path) -> None:
    materialize = Materializer(tmp_path, "ver")

    first = materialize(
        *("raw_dataset", "graph", "graph_partition", "partition_metis"),
        config={
            **DATASET,
            "graph_partition": {"config": {"method": "metis", "parts": 3, "seed": 1}},
            "partition_metis": {"config": {"parts": 3, "seed": 2}},
        },
    )
    chosen, compared = metadata(first, "graph_partition"), metadata(first, "partition_metis")
    assert chosen["path"] != compared["path"] and chosen["stage_key"] != compared["stage_key"]
    for meta in (chosen, compared):
        assert Path(meta["path"]).name.startswith("ver-metis-p3-")
        assert Path(meta["path"]).name.endswith(meta["stage_key"])
        assert (Path(meta["path"]) / "assignment.npy").is_file() and not meta["reused"]
    written = (Path(chosen["path"]) / "assignment.npy").stat().st_mtime_ns

    # graph_partition again with partition_metis's settings: its own output, untouched.
    again = materialize(
        "graph_partition",
        config={"graph_partition": {"config": {"method": "metis", "parts": 3, "seed": 2}}},
    )
    same_as_compared = metadata(again, "graph_partition")
    assert same_as_compared["path"] == compared["path"] and same_as_compared["reused"]
    assert (Path(chosen["path"]) / "assignment.npy").stat().st_mtime_ns == written

    # The first settings again (more workers change speed, not labels): reused, not rewritten.
    rerun = materialize(
        "graph_partition",
        config={
            "graph_partition": {"config": {"method": "metis", "parts": 3, "seed": 1, "workers": 2}}
        },
    )
    reused = metadata(rerun, "graph_partition")
    assert reused["path"] == chosen["path"] and reused["reused"]
    assert reused["edge_cut_fraction"] == chosen["edge_cut_fraction"]
    assert (Path(chosen["path"]) / "assignment.npy").stat().st_mtime_ns == written


def _dataset(seed: int) -> dict:
    return {"raw_dataset": {"config": {**DATASET["raw_dataset"]["config"], "seed": seed}}}


def test_graph_is_reused_and_a_new_input_gives_new_graph_and_partition_dirs(
    tmp_path: Path,
) -> None:
    materialize = Materializer(tmp_path, "ver")
    chain = ("raw_dataset", "graph", "graph_partition")
    partition = {"graph_partition": {"config": {"method": "metis", "parts": 2}}}

    def run(seed: int) -> dg.ExecuteInProcessResult:
        return materialize(*chain, config={**_dataset(seed), **partition})

    first = run(0)
    raw, graph, part = (metadata(first, a) for a in ("raw_dataset", "graph", "graph_partition"))
    assert not raw["reused"] and not graph["reused"] and not part["reused"]
    assert Path(graph["path"]).name == f"ver-{graph['stage_key']}"
    assert Path(raw["path"]).name == f"ver-{raw['stage_key']}"
    assert part["graph_path"] == graph["path"]
    assert part["input_sha256"] == graph["manifest_sha256"]
    graph_files = mtimes(Path(graph["path"]))

    again = run(0)  # the whole chain again: every stage reuses its output
    for asset, before in (("raw_dataset", raw), ("graph", graph), ("graph_partition", part)):
        meta = metadata(again, asset)
        assert meta["reused"] and meta["path"] == before["path"], asset
    assert mtimes(Path(graph["path"])) == graph_files

    other = run(1)  # another raw input: a new graph, so a new partition
    new_graph, new_part = metadata(other, "graph"), metadata(other, "graph_partition")
    assert not new_graph["reused"] and new_graph["input_sha256"] != graph["input_sha256"]
    assert new_graph["path"] != graph["path"] and new_part["path"] != part["path"]
    assert new_part["graph_path"] == new_graph["path"]
    for meta in (graph, part, new_graph, new_part):  # both versions intact
        assert (Path(meta["path"]) / "manifest.json").is_file()
    assert mtimes(Path(graph["path"])) == graph_files


def mtimes(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in directory.iterdir()}


def test_partition_reads_the_graph_of_its_own_run_not_a_later_one(tmp_path: Path) -> None:
    """A graph materialization recorded after this run's own (here by a hook,
    as another run would) must not become this run's partition input."""
    from assets.graph import graph as graph_asset

    @dg.success_hook
    def interloper(context: dg.HookContext) -> None:
        if context.op.name == "graph":
            context.instance.report_runless_asset_event(
                dg.AssetMaterialization(
                    graph_asset.key,
                    partition="ver",  # the same dataset, as a later run of it would
                    metadata={"path": str(tmp_path / "elsewhere"), "name": "x"},
                )
            )

    job = dg.define_asset_job(
        "lineage_job",
        selection=dg.AssetSelection.assets("raw_dataset", "graph", "graph_partition"),
        hooks={interloper},
    )
    defs = dg.Definitions(
        assets=ALL_ASSETS,
        asset_checks=ALL_CHECKS,
        jobs=[job],
        resources=build_resources(str(tmp_path)),
    )
    instance = partitioned_instance("ver")
    result = defs.resolve_job_def("lineage_job").execute_in_process(
        instance=instance,
        partition_key="ver",
        run_config={"ops": {**_dataset(0), "graph_partition": {"config": {"parts": 2}}}},
    )
    latest = instance.get_latest_materialization_event(graph_asset.key)
    assert latest is not None and latest.asset_materialization is not None
    assert latest.asset_materialization.metadata["name"].value == "x"  # the interloper is latest
    assert metadata(result, "graph_partition")["graph_path"] == metadata(result, "graph")["path"]
