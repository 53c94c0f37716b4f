"""The predictions asset through dg.materialize: the production model of the
dataset's registered model, every node of the materialized graph."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq

from conftest import assert_same_predictions
from gnncore.modes import RunRecording, train_graph_dir
from gnncore.store import GraphDir
from gnncore.tracking.registry import registered_model_name
from gnncore.train import NodeTrainConfig
from tests.assets.helpers import Materializer, generated, metadata

DATASET = generated(num_nodes=600, avg_degree=6, num_classes=3, num_features=8)


def test_predictions_asset_writes_every_node_with_the_training_accuracy(tmp_path: Path) -> None:
    materialize = Materializer(tmp_path / "data", "predtiny")
    instance, resources = materialize.instance, materialize.resources

    graph_run = materialize("raw_dataset", "graph", config=DATASET)
    graph = GraphDir.open(str(metadata(graph_run, "graph")["path"]))
    # The model: trained (library call, as trained_model makes it), registered and
    # promoted; production_model's materialization names the registered model.
    mlflow = resources["mlflow"]
    config = NodeTrainConfig(hidden=16, epochs=3, batch_size=64, device="cpu")
    tracker = mlflow.tracker()  # type: ignore[attr-defined]
    result = train_graph_dir(
        graph, config, recording=RunRecording(tracking=tracker, progress=False)
    )
    registry = mlflow.registry()  # type: ignore[attr-defined]
    name = registered_model_name("node", "predtiny")
    version = registry.register(name, str(result.model_uri), str(result.run_id))
    registry.promote(version)
    instance.report_runless_asset_event(
        dg.AssetMaterialization(
            asset_key="production_model",
            partition="predtiny",
            metadata={"registered_model": name, "production_version": version.version},
        )
    )

    run = materialize("predictions")
    assert run.success
    meta = metadata(run, "predictions")
    assert meta["rows"] == graph.num_nodes == 600
    assert meta["test_accuracy"] == result.test_accuracy == meta["training_test_accuracy"]
    assert meta["registered_model"] == name and meta["model_version"] == version.version
    assert meta["model_uri"] == f"models:/{name}@production"
    assert meta["mlflow_run_id"] == result.run_id
    out = Path(str(meta["path"]))
    assert out.parent == tmp_path / "data" / "predictions"
    assert out.name == f"{Path(graph.path).name}-node-v{version.version}"
    table = pq.read_table(out / "predictions.parquet")
    assert table.num_rows == 600 and table["node_id"].to_pylist() == list(range(600))
    assert "| node_id | node_index | split |" in str(meta["preview"])

    latest = Path(str(meta["latest_path"]))
    assert latest == out.parent / f"{Path(graph.path).name}-node-latest"
    assert latest.is_symlink() and latest.resolve() == out.resolve()
    assert pq.read_table(latest / "predictions.parquet").num_rows == 600

    again = materialize("predictions")  # idempotent: the same directory, rewritten
    (mat,) = again.asset_materializations_for_node("predictions")
    assert str(mat.metadata["path"].value) == str(out)
    assert sorted(p.name for p in out.parent.iterdir()) == sorted([out.name, latest.name])
    assert latest.resolve() == out.resolve()

    # With this lineage's partitioned store, the layers run in its node order:
    # the same table (rows in the graph's order, the same classes; the
    # probabilities within float tolerance).
    assert meta["order"] == "graph" and "store_path" not in meta
    materialize("graph_partition", "partitioned_store")
    stored = materialize("predictions")
    (mat,) = stored.asset_materializations_for_node("predictions")
    assert mat.metadata["order"].value == "partitioned store"
    assert Path(str(mat.metadata["store_path"].value)).is_dir()
    assert_same_predictions(pq.read_table(out / "predictions.parquet"), table)
