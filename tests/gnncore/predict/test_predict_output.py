"""gnncore predict: a registered model's predictions for every node, as Parquet,
through the library, the CLI and MLflow's pyfunc."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import mlflow
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from conftest import planted_graph, tiny_kg
from gnncore.cli.main import main
from gnncore.errors import InputError
from gnncore.io.canonical import node_id_table
from gnncore.modes import RunRecording, train_graph_dir
from gnncore.predict import (
    ModelNotFoundError,
    load_trained_model,
    predict_graph_dir,
)
from gnncore.store import GraphDir, create_graph_dir
from gnncore.tracking.mlflow import MlflowTracker, default_tracking_uri, global_tracking_uri
from gnncore.tracking.registry import ModelRegistry, registered_model_name
from gnncore.train import LinkTrainConfig, NodeTrainConfig
from tests.processes import free_port, stop_group

# normalize_features: prediction must apply what training's evaluation applied.
CONFIG = NodeTrainConfig(
    hidden=16, epochs=4, batch_size=40, lr=0.01, device="cpu", seed=3, normalize_features=True
)


@dataclasses.dataclass
class Trained:
    graph: GraphDir
    tracking_uri: str
    result: object
    uri: str  # models:/NAME@production


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trained]:
    base = tmp_path_factory.mktemp("predict")
    graph = GraphDir.open(planted_graph(base / "graph", num_nodes=400, features=16))
    uri = default_tracking_uri(base / "root")
    result = train_graph_dir(
        graph, CONFIG, recording=RunRecording(tracking=MlflowTracker(uri), progress=False)
    )
    registry = ModelRegistry(uri)
    name = registered_model_name("node", graph.manifest.name)
    registry.promote(registry.register(name, str(result.model_uri), str(result.run_id)))
    yield Trained(graph, uri, result, f"models:/{name}@production")


def _string_id_graph(out: Path, num_nodes: int = 120, features: int = 16) -> GraphDir:
    """A graph whose original ids are strings (``node_ids.parquet``), with
    features, labels and splits."""
    rng = np.random.default_rng(5)
    src, dst = rng.integers(0, num_nodes, (2, 600))
    keep = src != dst
    lo, hi = np.minimum(src, dst)[keep], np.maximum(src, dst)[keep]
    key = np.unique(lo * num_nodes + hi)
    raw = np.array([f"user-{i * 7 % 1000:04d}" for i in range(num_nodes)], dtype=object)
    order = np.argsort(raw)  # ingestion numbers string ids in sorted order
    perm = rng.permutation(num_nodes)
    with create_graph_dir(out, name="strings") as w:
        w.write_topology(num_nodes, key // num_nodes, key % num_nodes, directed=False)
        w.save_array("features", rng.random((num_nodes, features), dtype=np.float32))
        w.save_array("labels", rng.integers(0, 4, num_nodes))
        w.num_features, w.num_classes = features, 4
        w.save_splits(np.sort(perm[:40]), np.sort(perm[40:60]), np.sort(perm[60:]))
        w.write_table("node_ids", node_id_table(np.array(list(raw[order]), dtype=object)))
    return GraphDir.open(out)


def test_predictions_reproduce_the_training_test_accuracy(trained: Trained, tmp_path: Path) -> None:
    out = tmp_path / "pred"
    report = predict_graph_dir(
        trained.graph, out, trained.uri, tracking_uri=trained.tracking_uri, batch_size=64
    )
    result = trained.result
    assert report.rows == trained.graph.num_nodes
    assert report.test_accuracy == result.test_accuracy  # type: ignore[attr-defined]
    table = pq.read_table(out / "predictions.parquet")
    assert table.column_names == [
        "node_id",
        "node_index",
        "split",
        "label",
        "predicted_class",
        "probabilities",
    ]
    assert table["node_id"].to_pylist() == list(range(trained.graph.num_nodes))
    probs = np.array(table["probabilities"].to_pylist(), dtype=np.float32)
    assert probs.shape == (400, 4) and np.allclose(probs.sum(axis=1), 1, atol=1e-5)
    np.testing.assert_array_equal(table["predicted_class"].to_numpy(), probs.argmax(axis=1))
    splits = table["split"].to_pylist()
    test_ids = np.asarray(trained.graph.split("test"))
    assert {splits[i] for i in test_ids} == {"test"} and splits.count("test") == len(test_ids)
    labels, predicted = table["label"].to_numpy(), table["predicted_class"].to_numpy()
    assert np.mean(labels[test_ids] == predicted[test_ids]) == report.test_accuracy
    summary = json.loads((out / "manifest.json").read_text())
    assert summary["format"] == "gnncore.predictions" and summary["rows"] == 400
    assert summary["model"]["version"] == "1" and summary["model"]["uri"] == trained.uri
    assert summary["model"]["run_id"] == result.run_id  # type: ignore[attr-defined]
    assert summary["training_test_accuracy"] == summary["test_accuracy"]
    assert summary["method"] == "layer-wise"


def test_string_ids_one_row_per_node_and_idempotent_rerun(trained: Trained, tmp_path: Path) -> None:
    graph = _string_id_graph(tmp_path / "strings")
    model = load_trained_model(trained.uri, trained.tracking_uri)
    out = tmp_path / "pred"
    first = predict_graph_dir(graph, out, model, batch_size=16, device="cpu")
    table = pq.read_table(out / "predictions.parquet")
    ids = graph.node_ids()
    assert ids is not None
    expected = ids.sort("node_id")["raw_id"].to_list()
    assert table.num_rows == graph.num_nodes == first.rows
    assert table["node_id"].to_pylist() == expected and len(set(expected)) == graph.num_nodes
    assert str(table.schema.field("node_id").type) == "large_string"
    assert json.loads((out / "manifest.json").read_text())["node_id_type"] == "string"
    again = predict_graph_dir(graph, out, model, batch_size=1000, device="cpu")
    assert again.accuracy == first.accuracy  # batch size changes nothing
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "predictions.parquet"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left


def test_mismatched_graph_and_unknown_model_are_clear_errors(
    trained: Trained, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wide = GraphDir.open(planted_graph(tmp_path / "wide", num_nodes=100, features=12))
    with pytest.raises(InputError, match="12 features per node, the model reads 16"):
        predict_graph_dir(wide, tmp_path / "x", trained.uri, tracking_uri=trained.tracking_uri)
    five = GraphDir.open(planted_graph(tmp_path / "five", num_nodes=100, communities=5))
    with pytest.raises(InputError, match="5 classes, the model predicts 4"):
        predict_graph_dir(five, tmp_path / "x", trained.uri, tracking_uri=trained.tracking_uri)
    with pytest.raises(ModelNotFoundError, match="not found"):
        load_trained_model("models:/gnncore-node-nope@production", trained.tracking_uri)
    with pytest.raises(ModelNotFoundError, match="not a model directory"):
        load_trained_model(tmp_path)
    assert not (tmp_path / "x").exists()
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("keep me")
    with pytest.raises(InputError, match="refusing to replace it"):
        predict_graph_dir(
            trained.graph, tmp_path / "busy", trained.uri, tracking_uri=trained.tracking_uri
        )
    assert (tmp_path / "busy" / "notes.txt").read_text() == "keep me"
    code = main(["predict", str(wide.path), str(tmp_path / "x"), "--model", trained.uri,
                 "--mlflow-uri", trained.tracking_uri])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1
    assert err.startswith("gnncore predict: error:") and "features per node" in err


def test_cli_defaults_to_the_production_model(trained: Trained, tmp_path: Path) -> None:
    summary_file = tmp_path / "summary.json"
    code = main(["predict", str(trained.graph.path), str(tmp_path / "out"),
                 "--mlflow-uri", trained.tracking_uri, "--batch-size", "100",
                 "--device", "cpu", "--json", str(summary_file)])  # fmt: skip
    assert code == 0
    summary = json.loads(summary_file.read_text())
    assert summary["model"]["uri"] == trained.uri and summary["rows"] == 400
    assert summary["test_accuracy"] == trained.result.test_accuracy  # type: ignore[attr-defined]


def test_pyfunc_answers_a_subgraph_like_gnncore_predict(trained: Trained, tmp_path: Path) -> None:
    """``mlflow.pyfunc.load_model`` of the registered model; the whole graph as one
    request gives the Parquet's probabilities; a 2-node request works on its own."""
    with global_tracking_uri(trained.tracking_uri):
        model = mlflow.pyfunc.load_model(trained.uri)
    assert model.metadata.get_input_schema().input_names() == ["x", "edge_index"]
    graph = trained.graph
    indptr, indices = np.asarray(graph.indptr), np.asarray(graph.indices, dtype=np.int64)
    edge_index = np.stack([indices, np.repeat(np.arange(graph.num_nodes), np.diff(indptr))])
    x = np.array(graph.features())
    answer = model.predict({"x": x, "edge_index": edge_index})
    out = tmp_path / "pred"
    predict_graph_dir(graph, out, trained.uri, tracking_uri=trained.tracking_uri)
    table = pq.read_table(out / "predictions.parquet")
    expected = np.array(table["probabilities"].to_pylist())
    assert np.allclose(np.stack(answer["probabilities"].to_numpy()), expected, atol=1e-5)
    assert (answer["predicted_class"].to_numpy() == table["predicted_class"].to_numpy()).all()
    small = model.predict({"x": x[:2], "edge_index": np.array([[0], [1]])})
    assert len(small) == 2 and set(small.columns) == {"predicted_class", "probabilities"}
    with pytest.raises(Exception, match="node positions"):
        model.predict({"x": x[:2], "edge_index": np.array([[0], [5]])})
    with global_tracking_uri(trained.tracking_uri):
        program = mlflow.pytorch.load_model(trained.uri)  # the pt2 flavor still loads
    assert program(torch.from_numpy(x[:2]), torch.tensor([[0], [1]])).shape == (2, 4)


def test_link_embeddings_keyed_by_entity_names(tmp_path: Path) -> None:
    """Plain DistMult on a knowledge graph with string entity ids: each row's
    embedding is the entity's learned embedding; the pyfunc serves them too."""
    graph = GraphDir.open(tiny_kg(tmp_path / "kg"))
    uri = default_tracking_uri(tmp_path / "root")
    config = LinkTrainConfig(dim=16, epochs=2, batch_size=200, num_negatives=200, device="cpu")
    result = train_graph_dir(
        graph, config, recording=RunRecording(tracking=MlflowTracker(uri), progress=False)
    )
    report = predict_graph_dir(graph, tmp_path / "pred", str(result.model_uri), tracking_uri=uri)
    table = pq.read_table(tmp_path / "pred" / "predictions.parquet")
    assert table.column_names == ["node_id", "node_index", "embedding"]
    assert report.rows == graph.num_nodes == table.num_rows
    ids = graph.node_ids()
    assert ids is not None
    assert table["node_id"].to_pylist() == ids.sort("node_id")["raw_id"].to_list()
    weight = result.model.embedding.weight.detach().numpy()  # type: ignore[union-attr]
    assert np.allclose(np.array(table["embedding"].to_pylist()), weight, atol=1e-6)
    with global_tracking_uri(uri):
        model = mlflow.pyfunc.load_model(str(result.model_uri))
    schema = model.metadata.get_input_schema()
    assert [(s.name, str(s.type), s.shape) for s in schema.inputs] == [
        ("n_id", "object", (-1,)),
        ("edge_index", "object", (-1,)),
    ]  # JSON ids reach the pyfunc as sent (no int64 cast), int64 arrays pass as given
    answer = model.predict({"n_id": np.array([3, 0]), "edge_index": np.array([[0], [1]])})
    assert np.allclose(np.stack(answer["embedding"].to_numpy()), weight[[3, 0]], atol=1e-6)
    assert torch.is_tensor(torch.from_numpy(weight))


def _post(url: str, payload: dict) -> dict:
    request = urllib.request.Request(
        url, json.dumps(payload).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_mlflow_models_serve_answers_a_prediction_request(trained: Trained, tmp_path: Path) -> None:
    """``mlflow models serve -m models:/NAME@production`` on 127.0.0.1 (a free
    port, bounded wait, the server's process group killed at the end), capped
    at the graph's node count: the whole graph is answered, one node more is
    HTTP 400 with the cap's one-line message and no traceback."""
    port = free_port()
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": trained.tracking_uri,
        "GNNCORE_SERVE_MAX_NODES": str(trained.graph.num_nodes),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    log = tmp_path / "serve.log"
    command = [sys.executable, "-m", "mlflow", "models", "serve", "-m", trained.uri,
               "--env-manager", "local", "-h", "127.0.0.1", "-p", str(port)]  # fmt: skip
    with open(log, "wb") as out:
        server = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                pytest.fail(f"mlflow models serve exited {server.returncode}:\n{log.read_text()}")
            try:
                with urllib.request.urlopen(f"{base}/ping", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"mlflow models serve did not answer in 120 s:\n{log.read_text()}")
            time.sleep(0.5)
        graph = trained.graph
        indptr = np.asarray(graph.indptr)
        indices = np.asarray(graph.indices, dtype=np.int64)
        edge_index = np.stack([indices, np.repeat(np.arange(graph.num_nodes), np.diff(indptr))])
        x = np.array(graph.features())
        answer = _post(
            f"{base}/invocations",
            {"inputs": {"x": x.tolist(), "edge_index": edge_index.tolist()}},
        )["predictions"]
        out = tmp_path / "pred"
        predict_graph_dir(graph, out, trained.uri, tracking_uri=trained.tracking_uri)
        table = pq.read_table(out / "predictions.parquet")
        assert [row["predicted_class"] for row in answer] == table["predicted_class"].to_pylist()
        assert np.allclose(
            [row["probabilities"] for row in answer],
            table["probabilities"].to_pylist(),
            atol=1e-5,
        )
        with pytest.raises(urllib.error.HTTPError) as bad:
            _post(f"{base}/invocations", {"inputs": {"x": [[1.0, 2.0]], "edge_index": [[0], [0]]}})
        assert bad.value.code == 400
        # A float position is refused, not truncated to 0 by MLflow's JSON parsing.
        with pytest.raises(urllib.error.HTTPError) as fractional:
            _post(
                f"{base}/invocations",
                {"inputs": {"x": x[:2].tolist(), "edge_index": [[0.5], [1]]}},
            )
        assert fractional.value.code == 400
        message = json.loads(fractional.value.read())["message"]
        assert message.endswith("Error: edge_index must hold integers, got 0.5"), message
        over = np.zeros((graph.num_nodes + 1, x.shape[1]), dtype=np.float32)
        with pytest.raises(urllib.error.HTTPError) as refused:
            _post(f"{base}/invocations", {"inputs": {"x": over.tolist(), "edge_index": [[0], [1]]}})
        assert refused.value.code == 400
        body = json.loads(refused.value.read())
        assert "stack_trace" not in body and body["error_code"] == "INVALID_PARAMETER_VALUE"
        assert body["message"].endswith(
            f"Error: the request has {graph.num_nodes + 1} nodes; this server answers at most "
            f"{graph.num_nodes} (GNNCORE_SERVE_MAX_NODES)"
        )
    finally:
        stop_group(server, timeout=20)


def test_rows_stream_in_whole_row_groups(
    trained: Trained, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("gnncore.predict.api.ROW_GROUP_ROWS", 50)
    model = load_trained_model(trained.uri, trained.tracking_uri)
    predict_graph_dir(trained.graph, tmp_path / "a", model, batch_size=64, device="cpu")
    predict_graph_dir(trained.graph, tmp_path / "b", model, batch_size=400, device="cpu")
    a = pq.ParquetFile(tmp_path / "a" / "predictions.parquet")
    sizes = [a.metadata.row_group(i).num_rows for i in range(a.metadata.num_row_groups)]
    assert sizes == [50] * 8
    assert a.read().equals(pq.read_table(tmp_path / "b" / "predictions.parquet"))


def test_predictions_in_a_small_budget_match_the_in_memory_path(
    trained: Trained, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A budget too small for the hidden layer's ``[N, hidden]`` array: the layer
    goes to a file, batches shrink, and the predictions are those of the
    in-memory path (float tolerance); the scratch files are gone."""
    monkeypatch.setattr("gnncore.train.core.layerstore.MIN_MEMORY_BUDGET", 1)
    model = load_trained_model(trained.uri, trained.tracking_uri)
    memory = predict_graph_dir(
        trained.graph, tmp_path / "a", model, device="cpu", memory_budget=None
    )
    bounded = predict_graph_dir(
        trained.graph, tmp_path / "b", model, device="cpu", memory_budget=40_000
    )
    assert memory.info["layers_on_disk"] is False and memory.info["batch_size"] == 4096
    assert bounded.info["layers_on_disk"] is True and bounded.info["memory_budget"] == 40_000
    assert bounded.info["batch_size"] < 50  # sized from the budget
    a = pq.read_table(tmp_path / "a" / "predictions.parquet")
    b = pq.read_table(tmp_path / "b" / "predictions.parquet")
    assert a.drop(["probabilities"]).equals(b.drop(["probabilities"]))
    np.testing.assert_allclose(
        np.array(a["probabilities"].to_pylist()), np.array(b["probabilities"].to_pylist()),
        rtol=0, atol=1e-6,
    )  # fmt: skip
    assert bounded.accuracy == memory.accuracy
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == [
        "manifest.json",
        "predictions.parquet",
    ]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_cli_memory_budget_and_mlflow_tracking_uri(
    trained: Trained, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Without --mlflow-uri the CLI resolves models:/ in $MLFLOW_TRACKING_URI (not
    the data root's store); --memory-budget takes a size, and refuses a bad one
    at parse time."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", trained.tracking_uri)
    monkeypatch.setenv("GNNCORE_DATA_ROOT", str(tmp_path / "empty-root"))
    summary_file = tmp_path / "summary.json"
    code = main(["predict", str(trained.graph.path), str(tmp_path / "out"), "--model",
                 trained.uri, "--memory-budget", "64MiB", "--device", "cpu",
                 "--json", str(summary_file)])  # fmt: skip
    assert code == 0
    summary = json.loads(summary_file.read_text())
    assert summary["memory_budget"] == 64 << 20 and summary["rows"] == 400
    assert not (tmp_path / "empty-root").exists()  # the data root's store not opened
    with pytest.raises(SystemExit):
        main(["predict", str(trained.graph.path), str(tmp_path / "x"), "--memory-budget", "2GB"])
    assert "--memory-budget: not a size: '2GB'" in capsys.readouterr().err
    code = main(["predict", str(trained.graph.path), str(tmp_path / "x"), "--model",
                 trained.uri, "--memory-budget", "1MiB"])  # fmt: skip
    assert code == 1 and "at least" in capsys.readouterr().err


def test_the_latest_link_follows_the_newest_predictions(tmp_path: Path) -> None:
    from gnncore.predict.api import link_latest

    first, second = tmp_path / "g-node-v1", tmp_path / "g-node-v2"
    for folder in (first, second):
        folder.mkdir()
        (folder / "predictions.parquet").write_text(folder.name)
    link = link_latest(first, "g-node-latest")
    assert link == tmp_path / "g-node-latest" and os.readlink(link) == "g-node-v1"
    assert link_latest(second, "g-node-latest") == link
    assert (link / "predictions.parquet").read_text() == "g-node-v2"  # replaced in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g-node-latest", "g-node-v1", "g-node-v2"]
    (tmp_path / "real").mkdir()
    with pytest.raises(InputError, match="not a link"):
        link_latest(second, "real")
    with pytest.raises(InputError, match="plain name"):
        link_latest(second, "../elsewhere")
