"""gnncore.tracking: the MLflow tracker, and what a tracked training run records."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mlflow
import pytest
import torch

from conftest import planted_graph
from gnncore.modes import RunRecording, train_graph_dir
from gnncore.store import GraphDir
from gnncore.tracking import FAILED, FINISHED, KILLED, RunLogger
from gnncore.tracking.mlflow import MlflowTracker, default_tracking_uri
from gnncore.train import NodeTrainConfig, NodeTrainResult
from gnncore.train.record import memory_metrics

CONFIG = NodeTrainConfig(hidden=16, epochs=3, batch_size=40, lr=0.01, device="cpu", seed=2)


@dataclasses.dataclass
class Tracked:
    root: Path
    graph: GraphDir
    tracker: MlflowTracker
    result: NodeTrainResult


@pytest.fixture(scope="module")
def tracked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tracked]:
    """One tracked training run on a small planted graph, run from an empty cwd."""
    base = tmp_path_factory.mktemp("tracking")
    graph = GraphDir.open(planted_graph(base / "graph", num_nodes=200, features=8))
    with pytest.MonkeyPatch.context() as patch:
        (base / "cwd").mkdir()
        patch.chdir(base / "cwd")
        tracker = MlflowTracker(default_tracking_uri(base / "root"), experiment="tests")
        result = train_graph_dir(
            graph,
            CONFIG,
            recording=RunRecording(
                tracking=tracker, tags={"dagster_run_id": "dagster-123"}, progress=False
            ),
        )
        yield Tracked(base / "root", graph, tracker, result)


def test_default_tracking_uri_is_absolute_and_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    uri = default_tracking_uri("data")
    assert uri == f"sqlite:///{(tmp_path / 'data' / 'mlflow' / 'mlflow.db').resolve()}"
    assert (tmp_path / "data" / "mlflow").is_dir()


def test_experiments_open_on_the_training_view_in_the_mlflow_ui(
    tracked: Tracked, tmp_path: Path
) -> None:
    """MLflow 3's UI picks an experiment's view by its ``mlflow.experimentKind``
    tag: ours says model training (not GenAI traces), also on an experiment made
    before the tag was set; a kind a user chose is kept."""
    from gnncore.tracking.mlflow import EXPERIMENT_KIND, EXPERIMENT_KIND_TAG

    client = tracked.tracker.client
    kind = client.get_experiment(tracked.tracker.experiment_id).tags.get(EXPERIMENT_KIND_TAG)
    assert kind == EXPERIMENT_KIND == "custom_model_development"
    uri = default_tracking_uri(tmp_path)
    plain = mlflow.MlflowClient(uri)
    old = plain.create_experiment("old", artifact_location=(tmp_path / "a").as_uri())
    chosen = plain.create_experiment(
        "chosen", artifact_location=(tmp_path / "b").as_uri(), tags={EXPERIMENT_KIND_TAG: "x"}
    )
    MlflowTracker(uri, experiment="old")
    MlflowTracker(uri, experiment="chosen")
    assert plain.get_experiment(old).tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND
    assert plain.get_experiment(chosen).tags[EXPERIMENT_KIND_TAG] == "x"


def test_run_holds_params_tags_and_status(tracked: Tracked) -> None:
    run = tracked.tracker.client.get_run(tracked.result.run_id)
    assert run.info.status == FINISHED
    assert run.info.experiment_id == tracked.tracker.experiment_id
    params = run.data.params
    m = tracked.graph.manifest
    expected = {
        "model": "sage",
        "fanouts": "15,10",
        "batch_size": "40",
        "lr": "0.01",
        "epochs": "3",
        "hidden": "16",
        "seed": "2",
        "dataset": "planted",
        "num_nodes": str(m.num_nodes),
        "num_edges": str(m.num_edges),
    }
    assert {k: params.get(k) for k in expected} == expected
    tags = run.data.tags
    assert tags["dataset"] == "planted" and tags["dagster_run_id"] == "dagster-123"
    assert tags["task"] == "node" and tags["model"] == "sage"
    assert tags["mlflow.runName"] == "planted-sage"


def test_run_holds_per_epoch_and_final_metrics(tracked: Tracked) -> None:
    client, run_id, result = tracked.tracker.client, tracked.result.run_id, tracked.result
    for key, values in (("train_loss", result.train_loss), ("val_accuracy", result.val_accuracy)):
        history = sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)
        assert [h.step for h in history] == [1, 2, 3]
        assert [h.value for h in history] == pytest.approx(values)
    history = sorted(client.get_metric_history(run_id, "val_macro_f1"), key=lambda m: m.step)
    assert [h.value for h in history] == pytest.approx(result.val_macro_f1)
    for key in (
        "batches_per_s",
        "nodes_per_batch",
        "edges_per_batch",
        "sample_s",
        "wait_s",
        "stall_fraction",
        "transfer_s",
        "compute_s",
        "eval_s",
    ):
        assert [h.step for h in client.get_metric_history(run_id, key)] == [1, 2, 3], key
    metrics = client.get_run(run_id).data.metrics
    assert metrics["test_accuracy"] == pytest.approx(result.test_accuracy)
    assert metrics["test_macro_f1"] == pytest.approx(result.test_macro_f1)
    assert metrics["best_epoch"] == result.best_epoch
    assert metrics["stopped_epoch"] == 3 and metrics["resumed_from_epoch"] == 0
    assert metrics["seconds"] > 0


def test_run_holds_the_curve_png_and_the_model(tracked: Tracked, tmp_path: Path) -> None:
    client, run_id = tracked.tracker.client, tracked.result.run_id
    assert "curves.png" in [a.path for a in client.list_artifacts(run_id)]
    png = Path(client.download_artifacts(run_id, "curves.png", str(tmp_path)))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (logged,) = client.search_logged_models(experiment_ids=[tracked.tracker.experiment_id])
    assert logged.source_run_id == run_id and logged.status.name == "READY"
    artifacts = (tracked.root / "mlflow" / "artifacts").resolve().as_uri()
    assert logged.artifact_location.startswith(artifacts)
    loaded = mlflow.pytorch.load_model(logged.artifact_location)  # pt2: (x, edge_index)
    x = torch.randn(6, 8)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5, 1], [1, 2, 3, 4, 5, 0, 3]])
    model = tracked.result.model.eval()
    with torch.no_grad():
        assert torch.allclose(loaded(x, edge_index), model(x, edge_index), atol=1e-5)


def test_nothing_is_written_to_the_working_directory(tracked: Tracked) -> None:
    assert list((tracked.root.parent / "cwd").iterdir()) == []


def test_run_url_and_experiment_reuse(tracked: Tracked) -> None:
    tracker = tracked.tracker
    url = tracker.run_url("abc")
    assert url == f"http://127.0.0.1:5000/#/experiments/{tracker.experiment_id}/runs/abc"
    again = MlflowTracker(tracker.tracking_uri, experiment="tests")
    assert again.experiment_id == tracker.experiment_id


def test_training_that_raises_leaves_a_failed_run(
    tracked: Tracked, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("boom in epoch 1")

    monkeypatch.setattr("gnncore.train.record.fit", boom)
    tracker = MlflowTracker(tracked.tracker.tracking_uri, experiment="failing")
    with pytest.raises(RuntimeError, match="boom"):
        train_graph_dir(
            tracked.graph, CONFIG, recording=RunRecording(tracking=tracker, progress=False)
        )
    (run,) = tracker.client.search_runs([tracker.experiment_id])
    assert run.info.status == FAILED
    assert run.data.tags["error"] == "RuntimeError: boom in epoch 1"
    assert run.data.params["model"] == "sage"  # logged before training started


def test_run_context_statuses(tracked: Tracked) -> None:
    tracker = MlflowTracker(tracked.tracker.tracking_uri, experiment="contexts")
    with tracker.start_run("ok", {"k": "v"}) as run:
        assert isinstance(run, RunLogger)
        run.log_metrics({"m": 1.5}, step=2)
    with pytest.raises(KeyboardInterrupt):
        with tracker.start_run("interrupted") as interrupted:
            raise KeyboardInterrupt
    client = tracker.client
    assert client.get_run(run.run_id).info.status == FINISHED
    assert client.get_run(run.run_id).data.tags["k"] == "v"
    assert client.get_run(interrupted.run_id).info.status == KILLED
    run.end(FAILED)  # a second end() is ignored
    assert client.get_run(run.run_id).info.status == FINISHED


def test_model_without_an_example_is_pickled(tracked: Tracked) -> None:
    tracker = MlflowTracker(tracked.tracker.tracking_uri, experiment="pickled")
    with tracker.start_run("pickle") as run:
        uri = run.log_model(tracked.result.model)
    (logged,) = tracker.client.search_logged_models(experiment_ids=[tracker.experiment_id])
    assert uri == f"models:/{logged.model_id}"
    loaded = mlflow.pytorch.load_model(logged.artifact_location)
    assert type(loaded) is type(tracked.result.model)


def test_run_status_and_closing_another_run(tracked: Tracked) -> None:
    from gnncore.tracking import RUNNING

    tracker = MlflowTracker(tracked.tracker.tracking_uri, experiment="closing")
    run = tracker.start_run("left open")
    assert tracker.run_status(run.run_id) == RUNNING
    assert tracker.run_status("no-such-run") is None
    tracker.end_run(run.run_id, FAILED, tags={"error": "killed"})
    closed = tracker.client.get_run(run.run_id)
    assert closed.info.status == FAILED and closed.data.tags["error"] == "killed"


def test_crash_with_checkpoints_fails_the_run_and_resume_starts_a_new_one(
    tracked: Tracked, tmp_path: Path
) -> None:
    """A crash mid-training still ends FAILED when checkpoints are written; the
    resumed run is a new, FINISHED run that re-logs the earlier epochs and
    leaves the failed one as it was."""
    tracker = MlflowTracker(tracked.tracker.tracking_uri, experiment="resumed")
    config = dataclasses.replace(CONFIG, epochs=4, patience=0)

    def crash(epoch: int, path: Path | None) -> None:
        if epoch == 2:
            raise RuntimeError("boom in epoch 2")

    with pytest.raises(RuntimeError, match="boom"):
        train_graph_dir(
            tracked.graph,
            config,
            recording=RunRecording(
                tracking=tracker, progress=False, checkpoint_dir=tmp_path, on_epoch_end=crash
            ),
        )
    (failed,) = tracker.client.search_runs([tracker.experiment_id])
    assert failed.info.status == FAILED
    assert failed.data.tags["error"] == "RuntimeError: boom in epoch 2"
    assert [
        m.step for m in tracker.client.get_metric_history(failed.info.run_id, "train_loss")
    ] == [1, 2]

    result = train_graph_dir(
        tracked.graph,
        config,
        recording=RunRecording(
            tracking=tracker, progress=False, checkpoint_dir=tmp_path, resume=True
        ),
    )
    assert result.resumed_from_epoch == 2 and result.run_id != failed.info.run_id
    new = tracker.client.get_run(str(result.run_id))
    assert new.info.status == FINISHED
    assert new.data.tags["resumed_from_epoch"] == "2"
    assert new.data.tags["resumed_from_run_id"] == failed.info.run_id
    assert new.data.metrics["resumed_from_epoch"] == 2
    history = tracker.client.get_metric_history(new.info.run_id, "train_loss")
    assert sorted(m.step for m in history) == [1, 2, 3, 4]
    assert [m.value for m in sorted(history, key=lambda m: m.step)] == pytest.approx(
        result.train_loss
    )
    old = tracker.client.get_run(failed.info.run_id)
    assert old.info.status == FAILED and "resumed_in_run_id" not in old.data.tags


def test_run_holds_its_peak_against_the_budget(tracked: Tracked) -> None:
    """Like every stage's run: the peak RSS, and against the budget the run had."""
    metrics = tracked.tracker.client.get_run(tracked.result.run_id).data.metrics
    assert metrics["peak_rss_bytes"] > 0
    budget = tracked.result.config.memory_budget_bytes
    if budget is None:  # no budget: no ratio
        assert "peak_rss_of_budget" not in metrics
    else:
        assert metrics["memory_budget_bytes"] == budget
        assert metrics["peak_rss_of_budget"] == pytest.approx(metrics["peak_rss_bytes"] / budget)


def test_memory_metrics_put_the_peak_against_the_configs_budget() -> None:
    with_budget = memory_metrics(NodeTrainConfig(memory_budget="8GiB"))
    assert with_budget["memory_budget_bytes"] == 8 << 30
    assert with_budget["peak_rss_of_budget"] == with_budget["peak_rss_bytes"] / (8 << 30) > 0
    assert set(memory_metrics(NodeTrainConfig())) == {"peak_rss_bytes"}
