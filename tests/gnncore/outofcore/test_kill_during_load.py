"""Issue 15, item 8: a HierBatching ``gnncore train`` killed while a mega-batch loads
resumes from its checkpoint exactly, and leaves its partitioned store as it was; a
budget too small for one partition is refused up front with the minimum it needs."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import one_intra_op_thread, planted_graph
from gnncore.outofcore.store import PartitionedStore, write_partitioned_store
from gnncore.partition import partition_graph
from gnncore.store import GraphDir
from gnncore.train import CheckpointDir
from tests.state import assert_same_state

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[GraphDir, Path, PartitionedStore]:
    root = tmp_path_factory.mktemp("kill-load")
    graph = GraphDir.open(planted_graph(root / "g", num_nodes=400, degree=8))
    partition_graph(graph.path, root / "part", method="metis", parts=8, seed=0)
    store = write_partitioned_store(graph.path, root / "part", root / "store", static_fraction=0.02)
    return graph, root / "part", store


def _snapshot(directory: Path) -> dict[str, tuple[int, int, int, str]]:
    """Every entry under ``directory``: mode, size, mtime and (files) sha256."""
    out = {}
    for path in sorted([directory, *directory.rglob("*")]):
        st = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
        out[str(path.relative_to(directory))] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return out


def test_hierbatching_run_killed_mid_load_resumes_exactly_and_leaves_the_store_intact(
    built: tuple[GraphDir, Path, PartitionedStore], tmp_path: Path
) -> None:
    """SIGKILL from the loader thread halfway through reading a prefetched mega-batch
    of epoch 2 (after checkpoint 1): ``--resume`` goes on from epoch 1 and ends with
    the parameters, optimizer and random state of an uninterrupted run; the killed
    MLflow run is marked FAILED; the store verifies clean and no file under it changed."""
    from gnncore.cli.main import main as gnncore
    from gnncore.tracking import FAILED, FINISHED, RUNNING
    from gnncore.tracking.mlflow import MlflowTracker, default_tracking_uri

    graph, part, store = built
    before = _snapshot(store.path)
    marker = tmp_path / "killed-at.json"
    # 8 partitions in mega-batches of 4: 2 loads per epoch, the 2nd a prefetch.
    common = [
        str(graph.path),
        "--mode",
        "hierbatching",
        "--store",
        str(store.path),
        "--mega-batch-parts",
        "4",
        "--epochs",
        "3",
        "--seed",
        "7",
        "--fanouts",
        "5,5",
        "--batch-size",
        "16",
        "--hidden",
        "16",
        "--lr",
        "0.01",
        "--patience",
        "0",
        "--device",
        "cpu",
        "--no-progress",
    ]

    def train(kill_epoch: int, name: str, root: Path, *extra: str) -> subprocess.Popen[str]:
        command = [
            sys.executable,
            str(HERE / "kill_during_load.py"),
            str(kill_epoch),
            "2",
            str(marker),
            *common,
            "--data-root",
            str(root),
            "--checkpoint-dir",
            str(tmp_path / name),
            "--json",
            str(tmp_path / f"{name}.json"),
            *extra,
        ]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        return subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tmp_path,
        )

    def finish(process: subprocess.Popen[str]) -> tuple[int, str]:
        _, err = process.communicate(timeout=300)
        return process.returncode, err[-3000:]

    def in_process(name: str, root: Path, *extra: str) -> int:
        """A run that is not killed, in this process (no kill hooks: they would stay)."""
        out = ["--checkpoint-dir", str(tmp_path / name), "--json", str(tmp_path / f"{name}.json")]
        with one_intra_op_thread():
            return gnncore(["train", *common, "--data-root", str(root), *out, *extra])

    # The uninterrupted reference (its own data root, so its own MLflow database).
    assert in_process("whole", tmp_path / "whole-root") == 0
    root = tmp_path / "root"
    code, err = finish(train(2, "killed", root))
    assert code == -signal.SIGKILL, err
    where = json.loads(marker.read_text())
    assert where["thread"].startswith("gnncore-megabatch")  # the loader, not the trainer
    assert where["epoch"] == 2 and where["load"] == 2 and len(where["parts"]) == 4
    lo, half, hi = where["rows"]
    assert lo < half < hi  # mid-read
    assert not (tmp_path / "killed.json").exists()
    assert CheckpointDir(tmp_path / "killed").epochs() == [1]

    tracker = MlflowTracker(default_tracking_uri(root))
    (killed_run,) = tracker.client.search_runs([tracker.experiment_id])
    assert killed_run.info.status == RUNNING

    assert in_process("killed", root, "--resume") == 0

    summary = json.loads((tmp_path / "killed.json").read_text())
    reference = json.loads((tmp_path / "whole.json").read_text())
    assert summary["mode"] == reference["mode"] == "hierbatching"
    assert summary["resumed_from_epoch"] == 1 and reference["resumed_from_epoch"] == 0
    assert summary["stopped_epoch"] == 3
    for key in ("test_accuracy", "test_macro_f1", "val_accuracy", "final_train_loss", "best_epoch"):
        assert summary[key] == reference[key], key

    a, b = CheckpointDir(tmp_path / "whole").latest(), CheckpointDir(tmp_path / "killed").latest()
    assert a is not None and b is not None and a.epoch == b.epoch == 3
    for key in ("model", "optimizer"):
        assert_same_state(a.state[key], b.state[key], key)
    # The mega-batch generator (partition groups, shuffles, sampler seeds) included.
    for key in ("torch", "generator", "samplers"):
        assert_same_state(a.state["rng"][key], b.state["rng"][key], key)
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
    assert new.data.tags["resumed_from_epoch"] == "1"
    assert new.data.tags["resumed_from_run_id"] == killed_run.info.run_id
    history = client.get_metric_history(new.info.run_id, "hb_bytes_read")
    assert sorted(m.step for m in history) == [1, 2, 3]

    # The store: every checksum matches its manifest, and nothing was written to it.
    verify = tmp_path / "verify.json"
    args = [str(graph.path), str(part), str(store.path), "--verify", "--json", str(verify)]
    assert gnncore(["store", *args]) == 0
    assert json.loads(verify.read_text())["verified"] is True
    PartitionedStore.open(store.path).verify()
    assert _snapshot(store.path) == before


def test_a_budget_below_one_partition_is_refused_up_front_with_the_minimum(
    built: tuple[GraphDir, Path, PartitionedStore],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--memory-budget 1KiB``: one error line naming the bytes one partition and the
    static cache need, before any MLflow run or checkpoint is made."""
    from gnncore.cli.main import main as gnncore
    from gnncore.outofcore.megabatch import data_bytes

    graph, _, store = built
    root = tmp_path / "root"
    code = gnncore(
        [
            "train",
            str(graph.path),
            "--mode",
            "hierbatching",
            "--store",
            str(store.path),
            "--memory-budget",
            "1KiB",
            "--epochs",
            "1",
            "--device",
            "cpu",
            "--no-progress",
            "--data-root",
            str(root),
            "--checkpoint-dir",
            str(tmp_path / "ckpt"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    lines = err.splitlines()
    assert len(lines) == 1, err
    r_s = store.num_static / store.num_nodes
    need = int(2 * (r_s + 1 / store.parts) * data_bytes(store))
    assert need > 1024
    assert lines[0].startswith("gnncore train: error: ")
    assert "memory budget 1024 bytes" in lines[0]
    assert f"needs about {need} bytes" in lines[0]
    assert str(store.path) in lines[0]
    assert not (tmp_path / "ckpt").exists()
    assert not root.exists()  # refused before the MLflow store was opened
