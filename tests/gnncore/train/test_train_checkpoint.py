"""gnncore.train.core.checkpoint and resuming: atomic files, safe loads, exact resumes,
early stopping, and a ``gnncore train`` process killed with SIGKILL."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from conftest import planted_graph
from gnncore.modes import RunRecording, train_graph_dir
from gnncore.store import GraphDir, GraphDirFeatureStore, GraphDirGraphStore
from gnncore.train import (
    CheckpointDir,
    CheckpointError,
    NodeTrainConfig,
    NodeTrainResult,
    default_checkpoint_dir,
)
from gnncore.train.core import session
from gnncore.train.core.checkpoint import capture_rng, restore_rng
from gnncore.train.fitting import Measures, RunHooks, fit
from gnncore.train.node.task import NodeTask
from tests.gnncore.train.kill_after_checkpoint import run_in_process
from tests.state import assert_same_state

HERE = Path(__file__).resolve().parent
CONFIG = NodeTrainConfig(
    hidden=16, epochs=4, batch_size=32, lr=0.01, device="cpu", seed=5, patience=0
)


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> GraphDir:
    return GraphDir.open(
        planted_graph(tmp_path_factory.mktemp("ckpt") / "g", num_nodes=200, features=8)
    )


class Crash(RuntimeError):
    pass


def crash_after(epoch: int) -> Any:
    def on_epoch_end(done: int, path: Path | None) -> None:
        if done == epoch:
            raise Crash(f"crash after epoch {done}")

    return on_epoch_end


def final_state(result: NodeTrainResult) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in result.model.state_dict().items()}


# The checkpoint directory ----------------------------------------------------------


def test_save_keeps_the_newest_files_and_writes_atomically(tmp_path: Path) -> None:
    store = CheckpointDir(tmp_path / "c", keep=2)
    stray = tmp_path / "c" / ".epoch-9.pt.abc.tmp"
    for epoch in (1, 2, 3):
        path = store.save(epoch, {"format": "x", "epoch": epoch, "w": torch.ones(3) * epoch})
        assert path.name == f"epoch-{epoch}.pt"
    assert store.epochs() == [2, 3]
    stray.write_bytes(b"half a file")  # what a kill mid-write leaves behind
    store.remove_temporaries()
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["epoch-2.pt", "epoch-3.pt"]
    store.save(2, {"epoch": 2})  # a restarted attempt: later epochs are dropped
    assert store.epochs() == [2]
    store.clear()
    assert store.epochs() == []
    with pytest.raises(ValueError, match="keep"):
        CheckpointDir(tmp_path, keep=0)


def test_latest_skips_unreadable_files_and_refuses_pickled_objects(
    graph: GraphDir, tmp_path: Path
) -> None:
    train_graph_dir(
        graph,
        dataclasses.replace(CONFIG, epochs=3),
        recording=RunRecording(progress=False, checkpoint_dir=tmp_path, keep_checkpoints=3),
    )
    store = CheckpointDir(tmp_path)
    assert store.latest() is not None and store.latest().epoch == 3  # type: ignore[union-attr]
    newest = store.path(3)
    newest.write_bytes(newest.read_bytes()[:1000])  # truncated
    store = CheckpointDir(tmp_path)
    with pytest.warns(RuntimeWarning, match="epoch-3.pt"):
        found = store.latest()
    assert found is not None and found.epoch == 2

    # A file holding an arbitrary object is rejected without being unpickled.
    torch.save({"format": "gnncore.checkpoint", "payload": Crash("not data")}, newest)
    with pytest.raises(CheckpointError, match="cannot be read"):
        store.load(newest)


def test_rng_states_round_trip() -> None:
    generator = torch.Generator().manual_seed(1)

    class Counter:
        num_batches = 7
        _num_batches = 7

    counter = Counter()
    state = capture_rng(generator, {"train": counter})
    draws = (torch.rand(3), random.random(), np.random.rand(), torch.rand(2, generator=generator))
    counter._num_batches = 99
    restore_rng(state, generator, {"train": counter})
    again = (torch.rand(3), random.random(), np.random.rand(), torch.rand(2, generator=generator))
    assert torch.equal(draws[0], again[0]) and draws[1:3] == again[1:3]
    assert torch.equal(draws[3], again[3]) and counter._num_batches == 7


def test_default_checkpoint_dir() -> None:
    assert default_checkpoint_dir("/data", "cora", "gat", 3) == Path(
        "/data/checkpoints/cora-gat-seed3"
    )


# Resuming --------------------------------------------------------------------------


def test_resume_after_a_crash_equals_an_uninterrupted_run(graph: GraphDir, tmp_path: Path) -> None:
    whole = train_graph_dir(
        graph, CONFIG, recording=RunRecording(progress=False, checkpoint_dir=tmp_path / "a")
    )
    assert whole.resumed_from_epoch == 0 and whole.checkpoint_dir == str(tmp_path / "a")
    with pytest.raises(Crash):
        train_graph_dir(
            graph,
            CONFIG,
            recording=RunRecording(
                progress=False, checkpoint_dir=tmp_path / "b", on_epoch_end=crash_after(2)
            ),
        )
    assert CheckpointDir(tmp_path / "b").epochs() == [1, 2]
    resumed = train_graph_dir(
        graph,
        CONFIG,
        recording=RunRecording(progress=False, checkpoint_dir=tmp_path / "b", resume=True),
    )
    assert resumed.resumed_from_epoch == 2 and resumed.stopped_epoch == CONFIG.epochs
    assert resumed.train_loss == whole.train_loss
    assert resumed.val_accuracy == whole.val_accuracy
    assert resumed.val_macro_f1 == whole.val_macro_f1
    assert len(resumed.throughput) == CONFIG.epochs
    assert resumed.test_accuracy == whole.test_accuracy
    assert resumed.test_macro_f1 == whole.test_macro_f1
    assert_same_state(final_state(resumed), final_state(whole))
    last_a = CheckpointDir(tmp_path / "a").latest()
    last_b = CheckpointDir(tmp_path / "b").latest()
    assert last_a is not None and last_b is not None
    for key in ("model", "optimizer"):
        assert_same_state(last_a.state[key], last_b.state[key])


def _node_task(graph: GraphDir) -> NodeTask:
    splits = [torch.from_numpy(graph.split(n).astype(np.int64)) for n in ("train", "val", "test")]
    stores = GraphDirFeatureStore(graph), GraphDirGraphStore(graph)
    return NodeTask(*stores, splits, graph.manifest.num_classes)


def test_a_failed_validation_resumes_at_the_validation(
    graph: GraphDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An epoch whose training is long enough is checkpointed before its
    validation: when the validation of epoch 3 fails, the resumed run
    validates epoch 3 without training it again (only epoch 4's batches are
    trained), logs the two epochs before it again, and ends as an
    uninterrupted run does (epochs too short for the extra checkpoint), bit
    for bit."""
    plain = RunHooks(progress=False, checkpoints=tmp_path / "a")
    whole = fit(_node_task(graph), CONFIG, None, plain)
    monkeypatch.setattr(session, "CHECKPOINT_BEFORE_VALIDATION_S", 0.0)
    measures = NodeTask.measures
    calls = {"validate": 0, "step": 0}
    fail = True

    def counted(self: NodeTask, *args: Any) -> Measures:
        inner = measures(self, *args)

        def validate() -> Any:
            calls["validate"] += 1
            if calls["validate"] == 3 and fail:
                raise Crash("validation of epoch 3 killed")
            return inner.validate()

        def step(*batch: Any) -> int:
            calls["step"] += 1
            return inner.step(*batch)

        return Measures(step, validate, inner.test)

    monkeypatch.setattr(NodeTask, "measures", counted)
    hooks = RunHooks(progress=False, checkpoints=tmp_path / "b")
    with pytest.raises(Crash):
        fit(_node_task(graph), CONFIG, None, hooks)
    latest = CheckpointDir(tmp_path / "b").latest()
    assert latest is not None and latest.epoch == 3
    assert latest.state["progress"]["epoch"] == 2
    assert latest.state["progress"]["pending"]["epoch"] == 3
    steps_per_epoch = calls["step"] // 3
    fail, calls["validate"], calls["step"] = False, 0, 0
    logged: list[int | None] = []

    class Logger:
        def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
            logged.append(step)

    again = dataclasses.replace(hooks, logger=Logger(), resume=True)
    resumed = fit(_node_task(graph), CONFIG, None, again)
    assert calls == {"validate": 2, "step": steps_per_epoch}  # epochs 3 and 4; epoch 4 trained
    assert logged[:4] == [1, 2, 3, 4]  # then the test metrics
    assert resumed.resumed_from_epoch == 3 and resumed.stopped_epoch == CONFIG.epochs
    assert resumed.train_loss == whole.train_loss
    assert resumed.val_accuracy == whole.val_accuracy
    assert resumed.test_accuracy == whole.test_accuracy
    assert_same_state(final_state(resumed), final_state(whole))


def test_resume_checks_settings_and_data(graph: GraphDir, tmp_path: Path) -> None:
    fresh = train_graph_dir(
        graph, CONFIG, recording=RunRecording(progress=False, checkpoint_dir=tmp_path, resume=True)
    )
    assert fresh.resumed_from_epoch == 0  # nothing to resume: a fresh start
    with pytest.raises(CheckpointError, match=r"lr: 0\.01 \(checkpoint\) != 0\.02"):
        train_graph_dir(
            graph,
            dataclasses.replace(CONFIG, lr=0.02),
            recording=RunRecording(progress=False, checkpoint_dir=tmp_path, resume=True),
        )
    other = GraphDir.open(planted_graph(tmp_path / "other", num_nodes=200, features=8, seed=1))
    with pytest.raises(CheckpointError, match="train_crc32"):
        train_graph_dir(
            other,
            CONFIG,
            recording=RunRecording(progress=False, checkpoint_dir=tmp_path, resume=True),
        )
    longer = train_graph_dir(
        graph,
        dataclasses.replace(CONFIG, epochs=6),
        recording=RunRecording(progress=False, checkpoint_dir=tmp_path, resume=True),
    )
    assert longer.resumed_from_epoch == 4 and len(longer.train_loss) == 6
    assert longer.train_loss[:4] == fresh.train_loss
    with pytest.raises(ValueError, match="checkpoint directory"):
        train_graph_dir(graph, CONFIG, recording=RunRecording(progress=False, resume=True))


def test_a_fresh_run_replaces_old_checkpoints(graph: GraphDir, tmp_path: Path) -> None:
    train_graph_dir(
        graph,
        dataclasses.replace(CONFIG, epochs=5),
        recording=RunRecording(progress=False, checkpoint_dir=tmp_path),
    )
    train_graph_dir(
        graph,
        dataclasses.replace(CONFIG, epochs=2),
        recording=RunRecording(progress=False, checkpoint_dir=tmp_path),
    )
    assert CheckpointDir(tmp_path).epochs() == [1, 2]


def test_early_stopping_and_resuming_a_stopped_run(graph: GraphDir, tmp_path: Path) -> None:
    # A vanishing learning rate leaves the validation accuracy flat after epoch 1.
    config = dataclasses.replace(CONFIG, epochs=10, lr=1e-12, patience=2)
    result = train_graph_dir(
        graph, config, recording=RunRecording(progress=False, checkpoint_dir=tmp_path)
    )
    assert result.early_stopped and result.stopped_epoch == 3 and result.best_epoch == 1
    assert len(result.train_loss) == len(result.val_accuracy) == 3
    assert result.summary()["stopped_epoch"] == 3
    again = train_graph_dir(
        graph, config, recording=RunRecording(progress=False, checkpoint_dir=tmp_path, resume=True)
    )
    assert again.resumed_from_epoch == 3 and again.stopped_epoch == 3
    assert again.test_accuracy == result.test_accuracy
    off = train_graph_dir(
        graph,
        dataclasses.replace(config, patience=0, epochs=4),
        recording=RunRecording(progress=False),
    )
    assert not off.early_stopped and off.stopped_epoch == 4


def test_throughput_is_measured_per_epoch(graph: GraphDir) -> None:
    result = train_graph_dir(
        graph, dataclasses.replace(CONFIG, epochs=2), recording=RunRecording(progress=False)
    )
    assert len(result.throughput) == 2
    for epoch in result.throughput:
        assert epoch["batches"] == 2  # 40 training nodes, 32 per batch
        assert epoch["batches_per_s"] > 0
        assert epoch["nodes_per_batch"] >= 20 and epoch["edges_per_batch"] > 0
        for phase in ("sample_s", "wait_s", "transfer_s", "compute_s", "eval_s"):
            assert epoch[phase] >= 0
        assert epoch["sample_s"] > 0  # batch preparation, in the prefetch thread
        assert epoch["wait_s"] + epoch["compute_s"] <= epoch["train_s"] + 1e-6
        assert epoch["stall_fraction"] == pytest.approx(epoch["wait_s"] / epoch["train_s"])
    summary = result.summary()
    json.dumps(summary)
    assert summary["throughput"]["batches"] == 2
    # the JSON reports every epoch's timing: stall (waiting) beside compute and sampling
    timing = summary["epoch_timing"]
    assert len(timing) == 2
    for row, epoch in zip(timing, result.throughput, strict=True):
        assert set(row) == {
            "train_s",
            "wait_s",
            "stall_fraction",
            "sample_s",
            "transfer_s",
            "compute_s",
        }
        assert all(row[k] == epoch[k] for k in row)


def test_amp_on_a_cpu_warns_and_trains_in_float32(graph: GraphDir) -> None:
    config = dataclasses.replace(CONFIG, epochs=1)
    plain = train_graph_dir(graph, config, recording=RunRecording(progress=False))
    with pytest.warns(RuntimeWarning, match="needs a CUDA device"):
        amp = train_graph_dir(
            graph, dataclasses.replace(config, amp="bf16"), recording=RunRecording(progress=False)
        )
    assert_same_state(final_state(amp), final_state(plain))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("amp", ["none", "bf16", "fp16"])
def test_cuda_training_with_mixed_precision(graph: GraphDir, tmp_path: Path, amp: str) -> None:
    """Trains on the GPU in every precision and resumes there. Three short epochs
    (2 batches each, dropout 0.5) stay well short of convergence on any device:
    the same run on the CPU reaches 0.48 (0.31-0.45 with other seeds), so the
    test asks for learning (falling loss, accuracy clearly above the 0.25 of
    chance), not for a converged accuracy."""
    config = dataclasses.replace(CONFIG, epochs=3, device="cuda", amp=amp)
    result = train_graph_dir(
        graph, config, recording=RunRecording(progress=False, checkpoint_dir=tmp_path)
    )
    assert result.device.startswith("cuda") and result.test_accuracy > 0.35
    assert result.train_loss[-1] < result.train_loss[0]
    assert all(e["transfer_s"] > 0 and e["compute_s"] > 0 for e in result.throughput)
    resumed = train_graph_dir(
        graph,
        dataclasses.replace(config, epochs=4),
        recording=RunRecording(progress=False, checkpoint_dir=tmp_path, resume=True),
    )
    assert resumed.resumed_from_epoch == 3 and resumed.stopped_epoch == 4


# A killed process ------------------------------------------------------------------


def test_cli_run_killed_after_its_second_checkpoint_resumes_exactly(
    graph: GraphDir, tmp_path: Path
) -> None:
    """SIGKILL right after checkpoint 2, ``--resume``: the run goes on from epoch 2 and
    ends with the parameters of an uninterrupted run (CPU); the killed MLflow run,
    left RUNNING by the kill, is marked FAILED by the resumed one. The three runs
    prefetch with different thread counts (default 1, 0, 2), which changes nothing."""
    from gnncore.tracking import FAILED, FINISHED, RUNNING
    from gnncore.tracking.mlflow import MlflowTracker, default_tracking_uri

    root = tmp_path / "root"
    common = [
        str(graph.path),
        "--task",
        "node",
        "--model",
        "sage",
        "--epochs",
        "4",
        "--seed",
        "5",
        "--fanouts",
        "5,5",
        "--batch-size",
        "32",
        "--hidden",
        "16",
        "--lr",
        "0.01",
        "--patience",
        "0",
        "--device",
        "cpu",
        "--no-progress",
        "--data-root",
        str(root),
    ]

    def argv(kill_after: int, name: str, *extra: str) -> list[str]:
        out = ["--checkpoint-dir", str(tmp_path / name), "--json", str(tmp_path / f"{name}.json")]
        return [str(kill_after), *common, *out, *extra]

    def killed_run(kill_after: int, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, str(HERE / "kill_after_checkpoint.py")]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        return subprocess.run(
            command + argv(kill_after, name, *extra),
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd=tmp_path,
        )

    # The runs that are not killed go in this process (the same arithmetic: one thread).
    assert run_in_process(argv(0, "whole")) == 0
    killed = killed_run(2, "killed", "--prefetch-workers", "0")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert not (tmp_path / "killed.json").exists()
    assert CheckpointDir(tmp_path / "killed").epochs() == [1, 2]

    tracker = MlflowTracker(default_tracking_uri(root))
    (killed_run,) = [
        r for r in tracker.client.search_runs([tracker.experiment_id]) if r.info.status == RUNNING
    ]

    assert run_in_process(argv(0, "killed", "--resume", "--prefetch-workers", "2")) == 0
    summary = json.loads((tmp_path / "killed.json").read_text())
    reference = json.loads((tmp_path / "whole.json").read_text())
    assert summary["resumed_from_epoch"] == 2 and reference["resumed_from_epoch"] == 0
    assert summary["stopped_epoch"] == 4
    for key in ("test_accuracy", "test_macro_f1", "val_accuracy", "final_train_loss", "best_epoch"):
        assert summary[key] == reference[key], key

    a, b = CheckpointDir(tmp_path / "whole").latest(), CheckpointDir(tmp_path / "killed").latest()
    assert a is not None and b is not None and a.epoch == b.epoch == 4
    for key in ("model", "optimizer"):
        assert_same_state(a.state[key], b.state[key])
    # The random states training draws from; Python's and NumPy's global generators
    # are saved too, but other code in the process (MLflow) also draws from them.
    for key in ("torch", "generator", "samplers"):
        assert_same_state(a.state["rng"][key], b.state["rng"][key])
    timings = {"throughput"}  # wall-clock figures differ from run to run
    assert_same_state(
        {k: v for k, v in a.state["progress"].items() if k not in timings},
        {k: v for k, v in b.state["progress"].items() if k not in timings},
    )

    client = tracker.client
    old = client.get_run(killed_run.info.run_id)
    assert old.info.status == FAILED
    assert old.data.tags["resumed_in_run_id"] == summary["mlflow_run_id"]
    new = client.get_run(summary["mlflow_run_id"])
    assert new.info.status == FINISHED
    assert new.data.tags["resumed_from_epoch"] == "2"
    assert new.data.tags["resumed_from_run_id"] == killed_run.info.run_id
    history = client.get_metric_history(new.info.run_id, "train_loss")
    assert sorted(m.step for m in history) == [1, 2, 3, 4]
