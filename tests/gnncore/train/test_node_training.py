"""gnncore.train: config, device, models, the mini-batch loop, train_graph_dir and the CLI."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import planted_graph
from gnncore.modes import RunRecording, train_graph_dir
from gnncore.sampler import NeighborSampler
from gnncore.store import GraphDir, GraphDirFeatureStore, GraphDirGraphStore
from gnncore.train import (
    MODEL_DEFAULTS,
    MODELS,
    ConfigError,
    NodeTask,
    NodeTrainConfig,
    RunHooks,
    build_model,
    fit,
    resolve_device,
)
from gnncore.train.core.models import supports_trimming

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
    result = fit(
        NodeTask(
            GraphDirFeatureStore(graph),
            GraphDirGraphStore(graph),
            splits(graph),
            graph.manifest.num_classes,
        ),
        FAST,
        hooks=RunHooks(logger=logger, progress=False),
    )
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
        result = train_graph_dir(
            graph, dataclasses.replace(config, seed=seed), recording=RunRecording(progress=False)
        )
        return [p.detach().clone() for p in result.model.parameters()]

    first, again, other = params(3), params(3), params(4)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not all(torch.equal(a, b) for a, b in zip(first, other))


def test_prefetch_threads_do_not_change_the_parameters(graph: GraphDir) -> None:
    """0, 1 and 2 prefetch threads: the same batches, so the same losses, validation
    accuracies and trained parameters (CPU)."""
    config = dataclasses.replace(FAST, epochs=2, prefetch_depth=2)
    results = [
        train_graph_dir(
            graph,
            dataclasses.replace(config, prefetch_workers=w),
            recording=RunRecording(progress=False),
        )
        for w in (0, 1, 2)
    ]
    reference = results[0]
    for result in results[1:]:
        assert result.train_loss == reference.train_loss
        assert result.val_accuracy == reference.val_accuracy
        assert result.test_accuracy == reference.test_accuracy
        assert all(
            torch.equal(a, b)
            for a, b in zip(
                result.model.state_dict().values(), reference.model.state_dict().values()
            )
        )
    assert not [t for t in threading.enumerate() if t.name.startswith("gnncore-prefetch")]


def test_injected_sampler_is_used(graph: GraphDir) -> None:
    class CountingSampler(NeighborSampler):
        calls = 0

        def sample_from_nodes(self, index, **kwargs):  # type: ignore[no-untyped-def]
            CountingSampler.calls += 1
            return super().sample_from_nodes(index, **kwargs)

    topology = GraphDirGraphStore(graph)
    config = dataclasses.replace(FAST, epochs=1, batch_size=40)
    fit(
        NodeTask(
            GraphDirFeatureStore(graph),
            topology,
            splits(graph),
            graph.manifest.num_classes,
            sampler=CountingSampler(topology, [2, 2]),
        ),
        config,
        hooks=RunHooks(progress=False),
    )
    assert CountingSampler.calls == 2  # 80 training nodes / 40 per batch, one epoch


def test_config_defaults_and_validation() -> None:
    config = NodeTrainConfig().validate()
    assert config.model == "sage" and len(config.fanouts) == config.num_layers
    assert NodeTrainConfig(fanouts=[5, 5]).fanouts == (5, 5)  # type: ignore[arg-type]
    assert NodeTrainConfig().to_params()["fanouts"] == "15,10"
    assert NodeTrainConfig().to_params()["prefetch_workers"] == 1
    for bad, field in [
        ({"fanouts": ()}, "fanouts"),
        ({"model": "gpt"}, "model"),
        ({"lr": 0.0}, "lr"),
        ({"dropout": 1.0}, "dropout"),
        ({"device": "gpu"}, "device"),
        ({"epochs": 0}, "epochs"),
        ({"eval_fanouts": (5,)}, "eval_fanouts"),
        ({"model": "gat", "hidden": 60, "heads": 8}, "heads"),
        ({"model": "gcn", "heads": 2}, "heads"),
        ({"patience": -1}, "patience"),
        ({"amp": "fp8"}, "amp"),
        ({"prefetch_workers": -1}, "prefetch_workers"),
        ({"prefetch_depth": 0}, "prefetch_depth"),
    ]:
        with pytest.raises(ConfigError, match=field):
            NodeTrainConfig(**bad).validate()  # type: ignore[arg-type]


def test_config_takes_per_model_defaults_unless_given() -> None:
    for model, defaults in MODEL_DEFAULTS.items():
        config = NodeTrainConfig(model=model).validate()
        assert {k: getattr(config, k) for k in defaults} == defaults
    assert NodeTrainConfig(model="gat").heads == 8 and NodeTrainConfig().heads == 1
    assert NodeTrainConfig(model="gcn", hidden=32, lr=0.1).hidden == 32
    config = NodeTrainConfig(model="gat", fanouts=(5, 5), eval_fanouts=(3, 3))
    again = NodeTrainConfig.from_dict(config.to_dict())
    assert again == config and json.dumps(config.to_dict())
    assert config.mismatches(config.to_dict()) == []
    other = dataclasses.replace(
        config, lr=0.5, epochs=99, device="cpu", prefetch_workers=3, prefetch_depth=9
    ).to_dict()
    assert config.mismatches(other) == ["lr: 0.5 (checkpoint) != 0.005 (this run)"]
    with pytest.raises(ConfigError, match="unknown"):
        NodeTrainConfig.from_dict({"model": "sage", "colour": "red"})


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
    assert set(MODELS) == {"sage", "gcn", "gat", "gin", "none"}
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
    for name in MODELS:
        model = build_model(name, 8, 16, 3, 2, 0.5)
        assert model(torch.randn(5, 8), edge_index).shape == (5, 3), name
        assert model.num_layers == 2
    gat = build_model("gat", 8, 16, 3, 2, 0.5, heads=4)
    assert gat.convs[0].heads == 4 and gat.convs[0].out_channels == 4  # 16 over 4 heads
    assert build_model("gat", 8, 16, 3, 2, 0.5).convs[0].heads == 8
    with pytest.raises(ValueError, match="heads"):
        build_model("sage", 8, 16, 3, 2, 0.5, heads=2)
    with pytest.raises(KeyError, match="sage"):
        build_model("nope", 8, 16, 3, 2, 0.5)
    assert not supports_trimming(build_model("gcn", 8, 16, 3, 2, 0.5))
    assert not supports_trimming(build_model("none", 8, 16, 3, 2, 0.5))


@pytest.mark.parametrize("model", ["sage", "gcn", "gat", "gin", "none"])
def test_every_model_learns_the_planted_graph(graph: GraphDir, model: str) -> None:
    config = dataclasses.replace(FAST, model=model, heads=2 if model == "gat" else 1)
    result = train_graph_dir(graph, config, recording=RunRecording(progress=False))
    assert result.test_accuracy >= (0.35 if model == "none" else 0.85), model  # chance: 0.25
    assert 0 < result.test_macro_f1 <= 1 and len(result.val_macro_f1) == FAST.epochs


def test_graph_without_labels_is_refused(tmp_path: Path) -> None:
    from gnncore.errors import InputError
    from gnncore.store import create_graph_dir

    with create_graph_dir(tmp_path / "bare", name="bare") as w:
        w.write_topology(3, np.array([0, 1]), np.array([1, 2]), directed=False)
    with pytest.raises(InputError, match="labels"):
        train_graph_dir(tmp_path / "bare", FAST, recording=RunRecording(progress=False))


def test_cli_train_writes_the_summary(
    graph: GraphDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gnncore.cli.main import main

    monkeypatch.setenv("GNNCORE_DATA_ROOT", str(tmp_path / "root"))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out.json"
    code = main(
        [
            "train",
            str(graph.path),
            "--task",
            "node",
            "--model",
            "sage",
            "--epochs",
            "2",
            "--seed",
            "1",
            "--fanouts",
            "5,5",
            "--batch-size",
            "64",
            "--hidden",
            "16",
            "--lr",
            "0.01",
            "--device",
            "cpu",
            "--no-progress",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    summary = json.loads(out.read_text())
    for key in (
        "task",
        "model",
        "epochs",
        "seconds",
        "val_accuracy",
        "test_accuracy",
        "test_macro_f1",
        "val_macro_f1",
        "stopped_epoch",
        "throughput",
        "mlflow_run_id",
        "mlflow_tracking_uri",
    ):
        assert key in summary, key
    assert summary["task"] == "node" and summary["epochs"] == 2
    assert summary["resumed_from_epoch"] == 0 and summary["stopped_epoch"] == 2
    assert summary["throughput"]["batches_per_s"] > 0
    checkpoints = tmp_path / "root" / "checkpoints" / "planted-sage-seed1"
    assert summary["checkpoint_dir"] == str(checkpoints)
    assert sorted(p.name for p in checkpoints.iterdir()) == ["epoch-1.pt", "epoch-2.pt"]
    db = (tmp_path / "root" / "mlflow" / "mlflow.db").resolve()
    assert summary["mlflow_tracking_uri"] == f"sqlite:///{db}" and db.is_file()
    assert summary["mlflow_run_url"].endswith(f"/runs/{summary['mlflow_run_id']}")
    assert not (tmp_path / "mlruns").exists()


def test_per_layer_sampler_mode_trains_and_samples_more_edges(graph: GraphDir) -> None:
    stores = GraphDirFeatureStore(graph), GraphDirGraphStore(graph)
    runs = {
        mode: fit(
            NodeTask(*stores, splits(graph), graph.manifest.num_classes),
            dataclasses.replace(FAST, sampler=mode),
            hooks=RunHooks(progress=False),
        )
        for mode in ("dense", "per-layer")
    }
    assert runs["per-layer"].test_accuracy >= 0.85
    edges = {mode: r.throughput[0]["edges_per_batch"] for mode, r in runs.items()}
    assert edges["per-layer"] > edges["dense"]  # every layer samples its frontier again
    with pytest.raises(ConfigError, match="sampler"):
        dataclasses.replace(FAST, sampler="ladies").validate()


def test_cli_options_reach_the_config() -> None:
    from gnncore.cli.main import verb_parser
    from gnncore.cli.train import build_config

    parser, _ = verb_parser("train")
    args = parser.parse_args(
        [
            "g",
            "--model",
            "gat",
            "--heads",
            "4",
            "--amp",
            "--patience",
            "0",
            "--eval-fanouts",
            "5,5",
            "--normalize-features",
            "--prefetch-workers",
            "2",
            "--prefetch-depth",
            "6",
        ]
    )
    config = build_config(args)
    assert (config.model, config.heads, config.amp, config.patience) == ("gat", 4, "bf16", 0)
    assert config.eval_fanouts == (5, 5) and config.normalize_features
    assert (config.prefetch_workers, config.prefetch_depth) == (2, 6)
    assert config.hidden == MODEL_DEFAULTS["gat"]["hidden"]
    assert build_config(parser.parse_args(["g", "--amp", "fp16"])).amp == "fp16"
    assert config.sampler == "dense"
    assert build_config(parser.parse_args(["g", "--sampler", "per-layer"])).sampler == "per-layer"
    link = build_config(
        parser.parse_args(
            [
                "g",
                "--task",
                "link",
                "--model",
                "none",
                "--dim",
                "32",
                "--negatives",
                "64",
                "--sampler",
                "per-layer",
            ]
        )
    )
    assert (link.task, link.dim, link.num_negatives, link.sampler) == ("link", 32, 64, "per-layer")
    with pytest.raises(SystemExit):
        parser.parse_args(["g", "--model", "transformer"])
    with pytest.raises(SystemExit):
        parser.parse_args(["g", "--sampler", "ladies"])


def test_cli_resume_with_other_settings_is_a_clear_error(
    graph: GraphDir, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from gnncore.cli.main import main

    common = [
        "train",
        str(graph.path),
        "--epochs",
        "1",
        "--hidden",
        "8",
        "--device",
        "cpu",
        "--no-progress",
        "--data-root",
        str(tmp_path),
        "--checkpoint-dir",
        str(tmp_path / "ckpt"),
    ]
    assert main([*common, "--lr", "0.01"]) == 0
    assert main([*common, "--lr", "0.02", "--resume"]) == 1
    err = capsys.readouterr().err
    assert "cannot be resumed" in err and "lr: 0.01 (checkpoint) != 0.02" in err


def test_cli_rejects_options_of_the_other_task(
    graph: GraphDir, capsys: pytest.CaptureFixture
) -> None:
    from gnncore.cli.main import main

    assert main(["train", str(graph.path), "--task", "node", "--num-negatives", "10"]) == 1
    assert "--num-negatives: not used by --task node" in capsys.readouterr().err
    assert main(["train", str(graph.path), "--task", "link", "--hidden", "10"]) == 1
    assert "--hidden: not used by --task link" in capsys.readouterr().err


def test_trimmed_forward_equals_the_full_forward(graph: GraphDir) -> None:
    """The sampler emits edges hop by hop, so trim_to_layer may drop finished hops."""
    from torch_geometric.loader import NodeLoader

    from gnncore.train.node.loop import _forward

    topology = GraphDirGraphStore(graph)
    loader = NodeLoader(
        (GraphDirFeatureStore(graph), topology),
        node_sampler=NeighborSampler(topology, [4, 3]),
        input_nodes=torch.arange(50),
        batch_size=25,
    )
    for name in ("sage", "gat", "gin", "gcn"):
        model = build_model(name, 16, 8, 4, 2, 0.0).eval()
        with torch.no_grad():
            for batch in loader:
                full = model(batch.x, batch.edge_index)[: batch.batch_size]
                assert torch.allclose(_forward(model, batch), full, atol=1e-5), name


def test_trimming_would_change_gcn_so_it_is_off(graph: GraphDir) -> None:
    """GCN's normalisation reads source degrees, which trimming changes."""
    from torch_geometric.loader import NodeLoader

    topology = GraphDirGraphStore(graph)
    loader = NodeLoader(
        (GraphDirFeatureStore(graph), topology),
        node_sampler=NeighborSampler(topology, [4, 3]),
        input_nodes=torch.arange(25),
        batch_size=25,
    )
    batch = next(iter(loader))
    model = build_model("gcn", 16, 8, 4, 2, 0.0).eval()
    with torch.no_grad():
        trimmed = model(
            batch.x,
            batch.edge_index,
            num_sampled_nodes_per_hop=batch.num_sampled_nodes,
            num_sampled_edges_per_hop=batch.num_sampled_edges,
        )[:25]
        full = model(batch.x, batch.edge_index)[:25]
    assert not torch.allclose(trimmed, full, atol=1e-5)


def test_gradient_clipping_reaches_the_optimiser_step(graph: GraphDir) -> None:
    """``max_grad_norm`` reaches the optimiser step: a tight bound changes what one
    epoch learns; a negative bound is a config error."""
    stores = GraphDirFeatureStore(graph), GraphDirGraphStore(graph)
    one_epoch = dataclasses.replace(FAST, epochs=1)
    runs = {
        norm: fit(
            NodeTask(*stores, splits(graph), graph.manifest.num_classes),
            dataclasses.replace(one_epoch, max_grad_norm=norm),
            hooks=RunHooks(progress=False),
        )
        for norm in (0.0, 1e-3)
    }
    plain, clipped = (dict(runs[n].model.named_parameters()) for n in (0.0, 1e-3))
    assert any(not torch.equal(plain[k], clipped[k]) for k in plain)
    with pytest.raises(ConfigError, match="max_grad_norm"):
        dataclasses.replace(FAST, max_grad_norm=-1.0).validate()


def test_progress_as_log_lines_reports_every_epoch(graph: GraphDir, capsys) -> None:
    """A callable ``progress`` (what the Dagster asset passes: its logger) gets one
    line per epoch with the epoch bar's labels, and no bar is drawn."""
    lines: list[str] = []
    result = train_graph_dir(
        graph, dataclasses.replace(FAST, epochs=3), recording=RunRecording(progress=lines.append)
    )
    mode, *lines = lines  # first, the line saying which mode auto chose and why
    assert mode.startswith(f"mode auto -> {result.config.mode}: ")
    assert [line.split(":")[0] for line in lines] == ["epoch 1/3", "epoch 2/3", "epoch 3/3"]
    assert f"val_acc={result.val_accuracy[-1]:.4f}" in lines[-1]
    assert f"loss={result.train_loss[0]:.4f}" in lines[0]
    assert "epochs" not in capsys.readouterr().err
