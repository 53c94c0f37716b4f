"""A restarted fresh distributed run never resumes the checkpoints it found: they
are a previous run's, kept until the fresh run writes its first checkpoint, so a
restart after an attempt that wrote none starts afresh again."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from conftest import planted_graph
from gnncore.cli.main import main
from gnncore.modes import RunRecording, train_graph_dir
from gnncore.partition.run import partition_graph
from gnncore.store import GraphDir
from gnncore.train import CheckpointDir, NodeTrainConfig
from tests.gnncore.distributed.test_distributed_launch import TRAIN, _rank_pid


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("restart-fresh")
    g = planted_graph(root / "g", num_nodes=1200, degree=8)
    partition_graph(g, root / "p", method="random", parts=2)
    return g, root / "p"


class EarlyKiller(threading.Thread):
    """SIGKILLs rank 1 of the first attempt soon after it starts, before the run
    writes any checkpoint; records the checkpoint directory's identity then."""

    def __init__(self, ckpt: Path, delay: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.ckpt, self.delay = ckpt, delay
        self.identity: frozenset[tuple[str, int, int]] | None = None

    def run(self) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (pid := _rank_pid(1)) is None:
            time.sleep(0.02)
        if pid is None:
            return
        time.sleep(self.delay)
        self.identity = CheckpointDir(self.ckpt).identity()
        os.kill(pid, signal.SIGKILL)


def test_a_restarted_fresh_run_does_not_resume_the_previous_runs_checkpoint(
    graph: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    g, part = graph
    ckpt = tmp_path / "ckpt"
    # The previous run: one process, one epoch, other settings.
    config = NodeTrainConfig(epochs=1, batch_size=16, hidden=8, device="cpu", seed=3)
    train_graph_dir(
        GraphDir.open(g), config, recording=RunRecording(progress=False, checkpoint_dir=ckpt)
    )
    previous = CheckpointDir(ckpt).identity()
    assert len(previous) == 1

    killer = EarlyKiller(ckpt)
    killer.start()
    out = tmp_path / "run.json"
    argv = ["train", str(g), "--nproc", "2", "--partition", str(part), *TRAIN,
            "--checkpoint-dir", str(ckpt), "--json", str(out), "--data-root",
            str(tmp_path / "data"), "--max-restarts", "1"]  # fmt: skip
    code = main(argv)
    killer.join(timeout=5)
    err = capsys.readouterr().err
    # Killed before the fresh run's first checkpoint: only the previous one was there.
    assert killer.identity == previous, "rank 1 was not killed before the first checkpoint"
    assert code == 0, err
    assert "restart 1 of 1 after: rank 1 of 2 exited with code -9" in err
    summary = json.loads(out.read_text())
    # Resuming would have loaded the previous run's checkpoint (or refused it).
    assert summary["resumed_from_epoch"] == 0 and summary["stopped_epoch"] == 4
    store = CheckpointDir(ckpt)
    assert store.epochs() == [3, 4] and not (store.identity() & previous)
