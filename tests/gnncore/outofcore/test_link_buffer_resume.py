"""Resuming link prediction through a partition buffer: the table on disk is
snapshotted beside every checkpoint and restored from it, so a run that crashes
(after a checkpoint, mid-epoch, or between a snapshot and its checkpoint) and
resumes ends exactly like an uninterrupted one; a damaged snapshot is refused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from conftest import tiny_kg
from gnncore.outofcore.link_buffer import NodePartitions, link_buffer_source
from gnncore.store import GraphDir
from gnncore.train import LinkTask, LinkTrainConfig, RunHooks, fit, link_splits
from gnncore.train.core.checkpoint import CheckpointDir, CheckpointError
from gnncore.train.link.data import LinkSplits


class Crash(RuntimeError):
    pass


@pytest.fixture(scope="module")
def splits(tmp_path_factory: pytest.TempPathFactory) -> LinkSplits:
    return link_splits(GraphDir.open(tiny_kg(tmp_path_factory.mktemp("kg") / "graph")))


def config(ordering: str) -> LinkTrainConfig:
    # With these settings the best validation epoch is an earlier one (beta 3,
    # comet 4 of 5), so the best table is carried across checkpoints as well.
    return LinkTrainConfig(
        dim=16,
        batch_size=64,
        num_negatives=64,
        epochs=5,
        lr=0.2,
        device="cpu",
        patience=0,
        mode="partition_buffer",
        buffer_partitions=8,
        buffer_capacity=4,
        buffer_ordering=ordering,
    )


def train(
    splits: LinkSplits,
    cfg: LinkTrainConfig,
    work: Path,
    checkpoints: Path,
    resume: bool = False,
    on_epoch_end: Callable[[int, Path | None], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Train through a buffer in ``work``; the result and the final tables on disk.
    A crash leaves ``work`` as a killed process would (not closed)."""
    source = link_buffer_source(splits, cfg, work, log)
    result = fit(
        LinkTask(splits),
        cfg,
        source=source,
        hooks=RunHooks(
            progress=False,
            checkpoints=CheckpointDir(checkpoints, keep=2),
            resume=resume,
            on_epoch_end=on_epoch_end,
        ),
    )
    out = {
        "result": result,
        "weight": np.array(source.disk.table("weight")),
        "sum": np.array(source.disk.table("sum")),
        "best": source.node_embeddings().numpy(),  # restore_best ran before the test
    }
    source.close()
    return out


def assert_same_run(a: dict[str, Any], b: dict[str, Any]) -> None:
    ra, rb = a["result"], b["result"]
    assert ra.val_mrr == rb.val_mrr and ra.train_loss == rb.train_loss
    assert ra.best_epoch == rb.best_epoch and ra.test.mrr == rb.test.mrr
    for (name, x), y in zip(ra.model.state_dict().items(), rb.model.state_dict().values()):
        assert torch.equal(x, y), name  # the best table and the decoder's relations
    for name in ("weight", "sum", "best"):
        assert np.array_equal(a[name], b[name]), name


def snapshot_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.suffix == ".npy"}


@pytest.fixture(scope="module", params=["beta", "comet"])
def uninterrupted(
    request: pytest.FixtureRequest, splits: LinkSplits, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, dict[str, Any], Path]:
    tmp = tmp_path_factory.mktemp(f"full-{request.param}")
    run = train(splits, config(request.param), tmp / "work", tmp / "ckpt")
    return request.param, run, tmp / "ckpt"


def original_order(run: dict[str, Any]) -> np.ndarray:
    """Rows of the on-disk table (the buffer's node ids) of the original nodes."""
    cfg = run["result"].config
    return NodePartitions.random(len(run["best"]), cfg.buffer_partitions, cfg.seed).node_map


def test_the_checkpoints_carry_snapshots_of_the_table(uninterrupted) -> None:
    ordering, run, ckpt = uninterrupted
    store = CheckpointDir(ckpt)
    assert store.epochs() == [4, 5]  # older checkpoints and their snapshots pruned
    names = sorted(p.name for p in ckpt.iterdir())
    assert not [n for n in names if n.startswith(".")]  # no temporaries left
    best_epoch = run["result"].best_epoch
    assert best_epoch < 5  # the settings above: the best table is an earlier epoch's
    latest = store.latest()
    assert latest is not None
    files = latest.state["files"]
    assert files["best_epoch"] == best_epoch and files["best"]["name"] == "epoch-5.best.npy"
    assert np.array_equal(np.load(ckpt / "epoch-5.embeddings.npy"), run["weight"])
    assert np.array_equal(np.load(ckpt / "epoch-5.adagrad.npy"), run["sum"])
    best = np.load(ckpt / "epoch-5.best.npy")  # rows in the buffer's node order
    assert np.array_equal(best[original_order(run)], run["best"])
    # The best table is never copied again: later snapshots hard-link it.
    assert (ckpt / "epoch-5.best.npy").stat().st_nlink >= 2
    for record in files.values():
        if isinstance(record, dict):
            assert (ckpt / record["name"]).stat().st_size == record["bytes"]


@pytest.mark.parametrize("crash", ["after_checkpoint", "mid_epoch", "before_checkpoint"])
def test_a_crashed_run_resumes_to_the_uninterrupted_result(
    uninterrupted, splits: LinkSplits, tmp_path: Path, crash: str, monkeypatch
) -> None:
    """Crash after checkpoint 3, in the middle of epoch 4 (some partitions already
    written back to the live table), or after epoch 4's snapshot but before its
    checkpoint file; resume in the same work directory: same parameters, tables
    on disk, best table and snapshots as the uninterrupted run."""
    ordering, full, full_ckpt = uninterrupted
    cfg = config(ordering)
    work, ckpt = tmp_path / "work", tmp_path / "ckpt"
    epochs_started: list[str] = []

    def after_checkpoint(epoch: int, path: Path | None) -> None:
        if crash == "after_checkpoint" and epoch == 3:
            raise Crash("after checkpoint 3")

    def mid_epoch(line: str) -> None:
        if line.startswith("buffer state 1:"):
            epochs_started.append(line)
        if crash == "mid_epoch" and len(epochs_started) == 4 and line.startswith("buffer state 3:"):
            raise Crash("in epoch 4")

    if crash == "before_checkpoint":
        save = CheckpointDir.save

        def failing_save(self: CheckpointDir, epoch: int, state: Any) -> Path:
            if epoch == 4:
                raise Crash("before checkpoint 4")
            return save(self, epoch, state)

        monkeypatch.setattr(CheckpointDir, "save", failing_save)
    with pytest.raises(Crash):
        train(splits, cfg, work, ckpt, on_epoch_end=after_checkpoint, log=mid_epoch)
    monkeypatch.undo()
    assert CheckpointDir(ckpt).epochs() == [2, 3]
    if crash == "mid_epoch":  # the live table holds part of epoch 4
        live = np.load(work / "embeddings.npy")
        assert not np.array_equal(live, np.load(ckpt / "epoch-3.embeddings.npy"))
    if crash == "before_checkpoint":  # epoch 4's snapshot, without its checkpoint
        assert (ckpt / "epoch-4.embeddings.npy").is_file()

    resumed = train(splits, cfg, work, ckpt, resume=True)
    assert resumed["result"].resumed_from_epoch == 3
    assert_same_run(full, resumed)
    assert snapshot_files(ckpt) == snapshot_files(full_ckpt)
    assert sorted(p.name for p in ckpt.iterdir()) == sorted(p.name for p in full_ckpt.iterdir())


@pytest.fixture
def crashed(splits: LinkSplits, tmp_path: Path) -> tuple[LinkTrainConfig, Path, Path]:
    """A comet run that crashed after checkpoint 2."""
    cfg = config("comet")

    def crash(epoch: int, path: Path | None) -> None:
        if epoch == 2:
            raise Crash("after checkpoint 2")

    with pytest.raises(Crash):
        train(splits, cfg, tmp_path / "work", tmp_path / "ckpt", on_epoch_end=crash)
    return cfg, tmp_path / "work", tmp_path / "ckpt"


@pytest.mark.parametrize(
    "file, damage, message",
    [
        ("epoch-2.embeddings.npy", "missing", "missing"),
        ("epoch-2.adagrad.npy", "truncated", "truncated or damaged"),
        ("epoch-2.adagrad.npy", "flipped", "damaged"),
        ("epoch-2.embeddings.npy", "flipped", "damaged"),
    ],
)
def test_a_damaged_snapshot_is_refused_naming_the_file(
    splits: LinkSplits, crashed, file: str, damage: str, message: str
) -> None:
    cfg, work, ckpt = crashed
    path = ckpt / file
    if damage == "missing":
        path.unlink()
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:-4])
    else:
        data = bytearray(path.read_bytes())
        data[-7] ^= 0x01  # one bit of one float
        path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError) as caught:
        train(splits, cfg, work, ckpt, resume=True)
    text = str(caught.value)
    assert text.startswith(f"{path}: {message}") and "\n" not in text


def test_a_checkpoint_without_a_snapshot_is_refused(splits: LinkSplits, crashed) -> None:
    """A buffered run's checkpoint that records no snapshot (written before
    snapshots existed) cannot be resumed: its table is lost."""
    cfg, work, ckpt = crashed
    path = ckpt / "epoch-2.pt"
    state = torch.load(path, weights_only=True)
    del state["files"]
    torch.save(state, path)
    with pytest.raises(CheckpointError, match="records no snapshot") as caught:
        train(splits, cfg, work, ckpt, resume=True)
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)


def test_a_fresh_run_removes_the_old_snapshots(splits: LinkSplits, crashed) -> None:
    cfg, work, ckpt = crashed
    (ckpt / ".epoch-7.embeddings.npy.x.tmp").write_bytes(b"partial")  # a killed write
    train(splits, cfg, work, ckpt)  # resume=False: a fresh start
    kept = [f"epoch-{e}.{n}" for e in (4, 5) for n in ("pt", "embeddings.npy", "adagrad.npy")]
    assert sorted(p.name for p in ckpt.iterdir()) == sorted([*kept, "epoch-5.best.npy"])


def test_checkpoint_dir_attaches_links_restores_and_prunes_files(tmp_path: Path) -> None:
    """The generic part: files attached to a checkpoint go with it."""
    store = CheckpointDir(tmp_path / "ckpt", keep=2)
    table = tmp_path / "table.bin"
    table.write_bytes(b"0123456789" * 1000)
    first = store.attach(1, "table.bin", table)
    assert first["name"] == "epoch-1.table.bin" and first["bytes"] == 10_000
    store.save(1, {"epoch": 1, "files": {"t": first}})
    linked = store.attach_link(2, "table.bin", first)
    assert linked == {**first, "name": "epoch-2.table.bin"}
    assert (store.directory / "epoch-2.table.bin").stat().st_nlink == 2
    store.save(2, {"epoch": 2})
    store.attach(7, "table.bin", table)  # an abandoned attempt's file, no checkpoint
    store.attach(3, "table.bin", table)
    store.save(3, {"epoch": 3})
    assert sorted(p.name for p in store.directory.iterdir()) == [
        "epoch-2.pt",
        "epoch-2.table.bin",
        "epoch-3.pt",
        "epoch-3.table.bin",
    ]
    target = tmp_path / "restored.bin"
    target.write_bytes(b"live")
    store.restore_file(linked, target)
    assert target.read_bytes() == table.read_bytes()
    (store.directory / "epoch-2.table.bin").write_bytes(b"1" + table.read_bytes()[1:])
    target.write_bytes(b"live")
    with pytest.raises(CheckpointError, match="epoch-2.table.bin: damaged"):
        store.restore_file(linked, target)
    assert target.read_bytes() == b"live"  # left as it was
    with pytest.raises(CheckpointError, match="records the file"):
        store.restore_file({**linked, "name": "../table.bin"}, target)
    assert not [p for p in tmp_path.rglob(".*.tmp")]
    store.clear()
    assert list(store.directory.iterdir()) == []
