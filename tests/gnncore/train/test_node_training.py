"""gnncore.train: config, device, models, the mini-batch loop, train_graph_dir and the CLI."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import planted_graph
from gnncore.sampler import NeighborSampler
from gnncore.store import GraphDir, GraphDirFeatureStore, GraphDirGraphStore
from gnncore.train import (
    MODELS,
    ConfigError,
    NodeTrainConfig,
    build_model,
    resolve_device,
    train_graph_dir,
    train_node_classifier,
)

FAST = NodeTrainConfig(hidden=32, epochs=10, batch_size=32, lr=0.01, device="cpu")


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> GraphDir:
    """400 nodes in 4 planted communities; features are noisy one-hot community codes."""
    return GraphDir.open(planted_graph(tmp_path_factory.mktemp("train") / "g"))


def splits(graph: GraphDir) -> list[torch.Tensor]:
    return [torch.from_numpy(graph.split(s).copy()) for s in ("train", "val", "test")]


class RecordingLogger:
    def __init__(self) -> None:
        self.metrics: list[tuple[dict[str, float], int | None]] = []

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        self.metrics.append((dict(metrics), step))


def test_planted_graph_trains_to_high_accuracy(graph: GraphDir) -> None:
    logger = RecordingLogger()
    result = train_node_classifier(GraphDirFeatureStore(graph), GraphDirGraphStore(graph),
                                   *splits(graph), graph.manifest.num_classes, FAST,
                                   logger=logger, progress=False)
    assert result.test_accuracy >= 0.9
    assert result.best_val_accuracy == max(result.val_accuracy)
    assert result.val_accuracy[result.best_epoch - 1] == result.best_val_accuracy
    assert len(result.train_loss) == len(result.val_accuracy) == FAST.epochs
    assert result.train_loss[-1] < result.train_loss[0]
    assert result.seconds > 0 and result.device == "cpu" and result.num_parameters > 0
    per_epoch = [(m, step) for m, step in logger.metrics if "train_loss" in m]
    assert [step for _, step in per_epoch] == list(range(1, FAST.epochs + 1))
    final, _ = logger.metrics[-1]
    assert final["test_accuracy"] == result.test_accuracy
    assert final["best_epoch"] == result.best_epoch
    summary = result.summary()
    json.dumps(summary)
    assert summary["test_accuracy"] == result.test_accuracy


def test_same_seed_gives_the_same_parameters(graph: GraphDir) -> None:
    config = dataclasses.replace(FAST, epochs=2)

    def params(seed: int) -> list[torch.Tensor]:
        result = train_graph_dir(graph, dataclasses.replace(config, seed=seed), progress=False)
        return [p.detach().clone() for p in result.model.parameters()]

    first, again, other = params(3), params(3), params(4)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not all(torch.equal(a, b) for a, b in zip(first, other))


def test_injected_sampler_is_used(graph: GraphDir) -> None:
    class CountingSampler(NeighborSampler):
        calls = 0

        def sample_from_nodes(self, index, **kwargs):  # type: ignore[no-untyped-def]
            CountingSampler.calls += 1
            return super().sample_from_nodes(index, **kwargs)

    topology = GraphDirGraphStore(graph)
    config = dataclasses.replace(FAST, epochs=1, batch_size=40)
    train_node_classifier(GraphDirFeatureStore(graph), topology, *splits(graph),
                          graph.manifest.num_classes, config,
                          sampler=CountingSampler(topology, [2, 2]), progress=False)
    assert CountingSampler.calls == 2  # 80 training nodes / 40 per batch, one epoch


def test_config_defaults_and_validation() -> None:
    config = NodeTrainConfig().validate()
    assert config.model == "sage" and len(config.fanouts) == config.num_layers
    assert NodeTrainConfig(fanouts=[5, 5]).fanouts == (5, 5)  # type: ignore[arg-type]
    assert NodeTrainConfig().to_params()["fanouts"] == "15,10"
    for bad, field in [({"fanouts": (10,)}, "fanouts"), ({"model": "gpt"}, "model"),
                       ({"lr": 0.0}, "lr"), ({"dropout": 1.0}, "dropout"),
                       ({"device": "gpu"}, "device"), ({"epochs": 0}, "epochs"),
                       ({"eval_fanouts": (5,)}, "eval_fanouts")]:
        with pytest.raises(ConfigError, match=field):
            NodeTrainConfig(**bad).validate()  # type: ignore[arg-type]


def test_resolve_device() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    with pytest.raises(ConfigError):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="not available"):
            resolve_device("cuda:0")


def test_models_registry() -> None:
    assert "sage" in MODELS
    model = build_model("sage", 8, 16, 3, 2, 0.5)
    out = model(torch.randn(5, 8), torch.tensor([[0, 1, 2], [1, 2, 3]]))
    assert out.shape == (5, 3)
    with pytest.raises(KeyError, match="sage"):
        build_model("nope", 8, 16, 3, 2, 0.5)


def test_graph_without_labels_is_refused(tmp_path: Path) -> None:
    from gnncore.errors import InputError
    from gnncore.store import create_graph_dir

    with create_graph_dir(tmp_path / "bare", name="bare") as w:
        w.write_topology(3, np.array([0, 1]), np.array([1, 2]), directed=False)
    with pytest.raises(InputError, match="labels"):
        train_graph_dir(tmp_path / "bare", FAST, progress=False)


def test_cli_train_writes_the_summary(graph: GraphDir, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from gnncore.cli.main import main

    monkeypatch.setenv("GNNCORE_DATA_ROOT", str(tmp_path / "root"))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out.json"
    code = main(["train", str(graph.path), "--task", "node", "--model", "sage", "--epochs", "2",
                 "--seed", "1", "--fanouts", "5,5", "--batch-size", "64", "--hidden", "16",
                 "--lr", "0.01", "--device", "cpu", "--no-progress", "--json", str(out)])
    assert code == 0
    summary = json.loads(out.read_text())
    for key in ("task", "model", "epochs", "seconds", "val_accuracy", "test_accuracy",
                "mlflow_run_id", "mlflow_tracking_uri"):
        assert key in summary, key
    assert summary["task"] == "node" and summary["epochs"] == 2
    db = (tmp_path / "root" / "mlflow" / "mlflow.db").resolve()
    assert summary["mlflow_tracking_uri"] == f"sqlite:///{db}" and db.is_file()
    assert summary["mlflow_run_url"].endswith(f"/runs/{summary['mlflow_run_id']}")
    assert not (tmp_path / "mlruns").exists()


def test_cli_link_task_is_a_clear_error(graph: GraphDir, capsys: pytest.CaptureFixture) -> None:
    from gnncore.cli.main import main

    assert main(["train", str(graph.path), "--task", "link"]) == 1
    assert "link prediction arrives with the training issue" in capsys.readouterr().err


def test_trimmed_forward_equals_the_full_forward(graph: GraphDir) -> None:
    """The sampler emits edges hop by hop, so trim_to_layer may drop finished hops."""
    from torch_geometric.loader import NodeLoader

    from gnncore.train.loop import _forward

    topology = GraphDirGraphStore(graph)
    loader = NodeLoader((GraphDirFeatureStore(graph), topology),
                        node_sampler=NeighborSampler(topology, [4, 3]),
                        input_nodes=torch.arange(50), batch_size=25)
    model = build_model("sage", 16, 8, 4, 2, 0.0).eval()
    with torch.no_grad():
        for batch in loader:
            full = model(batch.x, batch.edge_index)[:batch.batch_size]
            assert torch.allclose(_forward(model, batch), full, atol=1e-5)
