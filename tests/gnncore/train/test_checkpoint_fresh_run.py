"""A fresh run keeps the previous checkpoints until its own first checkpoint is
written: one that fails at batch 0 leaves them byte for byte (and ``resume`` still
finds them), one that writes its first checkpoint removes them; checkpoint
directories derived from a graph's name stay under ``<data root>/checkpoints``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from conftest import planted_graph
from gnncore.errors import InputError
from gnncore.modes import RunRecording, train_graph_dir
from gnncore.store import GraphDir
from gnncore.train import CheckpointDir, NodeTrainConfig, default_checkpoint_dir
from gnncore.train.core.steps import OptimizerStep

CONFIG = NodeTrainConfig(
    hidden=16, epochs=2, batch_size=32, lr=0.01, device="cpu", seed=5, patience=0
)


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> GraphDir:
    return GraphDir.open(
        planted_graph(tmp_path_factory.mktemp("fresh") / "g", num_nodes=200, features=8)
    )


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


class BatchZeroFailure(RuntimeError):
    pass


def test_a_fresh_run_failing_at_batch_0_keeps_the_previous_checkpoints(
    graph: GraphDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    train_graph_dir(graph, CONFIG, recording=RunRecording(progress=False, checkpoint_dir=tmp_path))
    before = snapshot(tmp_path)
    assert sorted(before) == ["epoch-1.pt", "epoch-2.pt"]
    (tmp_path / ".epoch-3.pt.x.tmp").write_bytes(b"half a file")  # a killed write's leftover

    seen: list[dict[str, bytes]] = []

    def fail(self: OptimizerStep, loss: torch.Tensor) -> None:
        seen.append(snapshot(tmp_path))  # what is on disk while the fresh run trains
        raise BatchZeroFailure("injected failure at the first optimiser step")

    with monkeypatch.context() as patch:
        patch.setattr(OptimizerStep, "__call__", fail)
        with pytest.raises(BatchZeroFailure):
            train_graph_dir(
                graph,
                dataclasses.replace(CONFIG, lr=0.02),
                recording=RunRecording(progress=False, checkpoint_dir=tmp_path),
            )
    assert len(seen) == 1 and seen[0] == before  # untouched while the run trained
    assert snapshot(tmp_path) == before  # and after it failed (the stray temp went)

    # The kept checkpoint is still the one --resume continues from.
    resumed = train_graph_dir(
        graph,
        dataclasses.replace(CONFIG, epochs=3),
        recording=RunRecording(progress=False, checkpoint_dir=tmp_path, resume=True),
    )
    assert resumed.resumed_from_epoch == 2 and resumed.stopped_epoch == 3


def test_a_fresh_run_removes_the_previous_checkpoints_after_its_first(
    graph: GraphDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    train_graph_dir(
        graph,
        dataclasses.replace(CONFIG, epochs=3),
        recording=RunRecording(progress=False, checkpoint_dir=tmp_path, keep_checkpoints=3),
    )
    old = snapshot(tmp_path)
    assert sorted(old) == ["epoch-1.pt", "epoch-2.pt", "epoch-3.pt"]
    on_disk: list[list[str]] = []
    step = OptimizerStep.__call__

    def first_step(self: OptimizerStep, loss: torch.Tensor) -> None:
        if not on_disk:  # the fresh run's first batch: nothing removed yet
            on_disk.append(sorted(p.name for p in tmp_path.iterdir()))
        step(self, loss)

    def after_epoch(epoch: int, path: Path | None) -> None:
        on_disk.append(sorted(p.name for p in tmp_path.iterdir()))

    monkeypatch.setattr(OptimizerStep, "__call__", first_step)
    fresh = train_graph_dir(
        graph,
        dataclasses.replace(CONFIG, lr=0.02),
        recording=RunRecording(
            progress=False, checkpoint_dir=tmp_path, keep_checkpoints=3, on_epoch_end=after_epoch
        ),
    )
    assert fresh.resumed_from_epoch == 0
    # Kept while the first epoch trains; gone right after the first checkpoint.
    assert on_disk == [sorted(old), ["epoch-1.pt"], ["epoch-1.pt", "epoch-2.pt"]]
    latest = CheckpointDir(tmp_path).latest()
    assert latest is not None and latest.epoch == 2
    assert latest.state["config"]["lr"] == 0.02
    assert (tmp_path / "epoch-1.pt").read_bytes() != old["epoch-1.pt"]


def test_a_fresh_checkpoint_dir_tells_its_own_files_apart(tmp_path: Path) -> None:
    """The previous run's files are not this run's: ``latest()`` ignores them until
    the first save, which removes them; attaching a file to epoch ``k`` first drops
    the previous ``epoch-<k>.pt`` (whose file of that name is replaced), never another."""
    previous = CheckpointDir(tmp_path, keep=3)
    source = tmp_path.parent / f"{tmp_path.name}-table.npy"
    for epoch in (1, 2, 3):
        source.write_bytes(b"old %d" % epoch)
        record = previous.attach(epoch, "embeddings.npy", source)
        previous.save(epoch, {"epoch": epoch, "files": record})
    assert previous.epochs() == [1, 2, 3]

    fresh = CheckpointDir(tmp_path, keep=3)
    fresh.start_fresh()
    assert fresh.latest() is None  # never resumes from the previous run's files
    source.write_bytes(b"new 1")
    fresh.attach(1, "embeddings.npy", source)
    assert fresh.epochs() == [2, 3]  # epoch-1.pt went with its replaced file
    assert (tmp_path / "epoch-2.embeddings.npy").read_bytes() == b"old 2"
    fresh.save(1, {"epoch": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch-1.embeddings.npy", "epoch-1.pt"]
    assert (tmp_path / "epoch-1.embeddings.npy").read_bytes() == b"new 1"
    fresh.save(2, {"epoch": 2})  # later saves prune as usual
    assert fresh.epochs() == [1, 2]


@pytest.mark.parametrize("dataset", ["../../../escape", "a/b", "cora\n", "..", ".hidden"])
def test_default_checkpoint_dir_refuses_unsafe_names(tmp_path: Path, dataset: str) -> None:
    with pytest.raises(InputError, match="dataset name"):
        default_checkpoint_dir(tmp_path, dataset, "sage", 0)
    with pytest.raises(InputError, match="model name"):
        default_checkpoint_dir(tmp_path, "cora", f"{dataset}", 0)
    assert default_checkpoint_dir(tmp_path, "cora", "sage", 0) == (
        tmp_path / "checkpoints" / "cora-sage-seed0"
    )
