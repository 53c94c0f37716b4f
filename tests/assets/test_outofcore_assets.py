"""partitioned_store between graph_partition and trained_model: versioned, reused,
and read by training in mode hierbatching."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow import MlflowClient

from assets import PIPELINE_ASSETS, PIPELINE_CHECKS
from gnncore.outofcore.store import PartitionedStore
from gnncore.outofcore.training import STATIC_SHARE, graph_static_fraction, static_cache_bytes
from gnncore.store import GraphDir
from tests.assets.helpers import Materializer, generated, metadata

DATASET = {
    **generated(num_nodes=800, avg_degree=6, num_classes=3, num_features=8),
    "graph_partition": {"config": {"parts": 4}},
}
HIERBATCHING = {
    "trained_model": {
        "config": {
            "node": {
                "mode": "hierbatching",
                "epochs": 2,
                "hidden": 16,
                "batch_size": 128,
                "mega_batch_parts": 2,
            }
        }
    }
}
STORE_CHAIN = ("raw_dataset", "graph", "graph_partition", "partitioned_store")


def mtimes(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in directory.iterdir()}


@pytest.fixture(scope="module")
def lineage(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    materialize = Materializer(root, "ooc", assets=PIPELINE_ASSETS + PIPELINE_CHECKS)
    first = materialize(*STORE_CHAIN, config=DATASET)
    return materialize, first, materialize.resources, root


def test_store_metadata_and_reuse(lineage):
    materialize, first, _, root = lineage
    graph, part, store = (
        metadata(first, a) for a in ("graph", "graph_partition", "partitioned_store")
    )
    path = Path(str(store["path"]))
    assert path.parent == root / "stores"
    assert path.name == f"{Path(str(part['path'])).name}-store-s0.01-{store['stage_key']}"
    assert store["graph_path"] == graph["path"] and store["partition_path"] == part["path"]
    assert (store["parts"], store["num_nodes"], store["num_static"]) == (4, 800, 8)
    assert store["static_fraction"] == pytest.approx(0.01) and not store["reused"]
    opened = PartitionedStore.open(path)
    assert opened.info["stage_key"] == store["stage_key"]
    assert store["bytes"] == sum(p.stat().st_size for p in path.glob("*.npy"))
    assert store["seconds"] >= 0
    table = str(store["nodes_per_partition"]).splitlines()
    assert table[0] == "| partition | nodes | in-edges |" and len(table) == 2 + 4
    assert sum(int(row.split("|")[2]) for row in table[2:]) == 800
    written = mtimes(path)

    again = metadata(materialize("partitioned_store"), "partitioned_store")
    assert again["reused"] and again["path"] == store["path"]
    assert again["stage_key"] == store["stage_key"]
    assert mtimes(path) == written

    other = metadata(
        materialize(
            "partitioned_store", config={"partitioned_store": {"config": {"static_fraction": 0.05}}}
        ),
        "partitioned_store",
    )
    assert other["path"] != store["path"] and other["stage_key"] != store["stage_key"]
    assert other["num_static"] == 40 and not other["reused"]
    assert mtimes(path) == written  # the first store is kept


def test_the_static_set_is_kept_to_what_the_deployments_budget_holds(lineage):
    materialize, _, _, _ = lineage
    graph = GraphDir.open(Path(str(metadata(materialize("graph"), "graph")["path"])))
    # A deployment budget of 256 KiB (the writer itself unbounded): half the nodes
    # wanted static, their cache would take far more than an eighth of it.
    wanted = {"static_fraction": 0.5, "memory_budget": "none"}
    store = metadata(
        materialize("partitioned_store", config={"partitioned_store": {"config": wanted}},
                    budget="256KiB"),
        "partitioned_store",
    )  # fmt: skip
    fraction = float(store["static_fraction"])
    assert store["static_fraction_wanted"] == 0.5
    assert fraction == graph_static_fraction(graph, 0.5, 1 << 18) < 0.5
    assert store["num_static"] == round(fraction * 800) and store["num_static"] > 0
    assert f"-store-s{fraction:g}-" in Path(str(store["path"])).name
    written = PartitionedStore.open(Path(str(store["path"])))
    # The cache as written (features, in-lists, ids) fits its share of the budget.
    assert static_cache_bytes(written) <= STATIC_SHARE * (1 << 18)


def test_hierbatching_training_reads_the_store(lineage):
    materialize, _, resources, _ = lineage
    # The default settings again (reused), so this is the store the lineage's latest.
    store = metadata(materialize("partitioned_store"), "partitioned_store")
    result = materialize("trained_model", config=HIERBATCHING)
    assert result.success
    model = metadata(result, "trained_model")
    assert model["mode"] == "hierbatching"
    assert model["store"] == store["path"]
    # Plans serve mode mmap only: none were read (placement_plan was never materialized).
    assert "placement_plan" not in model and "replication_plan" not in model
    run = MlflowClient(resources["mlflow"].resolved_tracking_uri()).get_run(model["mlflow_run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.params["mode"] == "hierbatching"
    assert run.data.params["store"] == store["path"]


def test_partition_buffer_training_reads_the_store_too(lineage):
    materialize, _, _, _ = lineage
    store = metadata(materialize("partitioned_store"), "partitioned_store")
    node = {**HIERBATCHING["trained_model"]["config"]["node"], "mode": "partition_buffer"}
    result = materialize("trained_model", config={"trained_model": {"config": {"node": node}}})
    model = metadata(result, "trained_model")
    assert (model["mode"], model["store"]) == ("partition_buffer", store["path"])


def test_hierbatching_refuses_a_store_of_another_graph(lineage):
    materialize, _, _, _ = lineage
    # A new graph (another raw input) without its own store: the latest store is
    # stale. (Runs last: the new graph is the lineage's latest from here on.)
    other = {"raw_dataset": {"config": {**DATASET["raw_dataset"]["config"], "seed": 7}}}
    result = materialize(
        "raw_dataset",
        "graph",
        "trained_model",
        config={**other, **HIERBATCHING},
        raise_on_error=False,
    )
    assert not result.success
    (failure, *_) = [e for e in result.all_events if e.is_step_failure]
    message = str(failure.step_failure_data.error)
    assert "materialize graph_partition and partitioned_store for this graph" in message
