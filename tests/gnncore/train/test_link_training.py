"""Link prediction end to end: splits, training, resume, the CLI and MLflow."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import planted_graph, tiny_kg
from gnncore.store import GraphDir, GraphDirFeatureStore
from gnncore.train import LinkTask, LinkTrainConfig, RunHooks, fit, link_splits
from gnncore.train.core.checkpoint import CheckpointDir
from gnncore.train.link.data import message_passing_csc
from gnncore.train.node.config import ConfigError
from tests.gnncore.train.kill_after_checkpoint import run_in_process
from tests.state import assert_same_state

#: Expected filtered MRR of random scores over the tiny KG's 80 entities: about
#: H(80) / 80 = 0.062 (fewer candidates after filtering, so a little higher).
#: A model that finds the answer's community of 10 reaches about H(10) / 10 = 0.29.
RANDOM_MRR = 0.08
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def kg(tmp_path_factory: pytest.TempPathFactory) -> GraphDir:
    return GraphDir.open(tiny_kg(tmp_path_factory.mktemp("kg") / "graph"))


def fast(**kw) -> LinkTrainConfig:
    settings = dict(
        dim=16, batch_size=64, num_negatives=64, epochs=6, lr=0.2, device="cpu", patience=0
    )
    settings.update(kw)
    return LinkTrainConfig(**settings)


def test_distmult_learns_the_planted_relations(kg: GraphDir) -> None:
    result = fit(LinkTask(link_splits(kg)), fast(), hooks=RunHooks(progress=False))
    summary = result.summary()
    assert summary["test_mrr"] > 3 * RANDOM_MRR
    assert summary["test_hits@10"] > 0.5
    assert summary["num_test_queries"] == 2 * len(link_splits(kg).test)
    assert result.train_loss[-1] < result.train_loss[0]
    assert result.best_val_mrr == max(result.val_mrr)


@pytest.mark.parametrize("negatives", ["uniform", "degree"])
def test_sage_encoder_learns_and_is_deterministic(kg: GraphDir, negatives: str) -> None:
    config = fast(model="sage", fanouts=(5,), epochs=4, negative_sampling=negatives)
    first = fit(LinkTask(link_splits(kg)), config, hooks=RunHooks(progress=False))
    second = fit(LinkTask(link_splits(kg)), config, hooks=RunHooks(progress=False))
    assert first.test.mrr > 2 * RANDOM_MRR
    for (name, a), b in zip(first.model.state_dict().items(), second.model.state_dict().values()):
        assert torch.equal(a, b), name
    assert first.throughput[0]["edges_per_batch"] > 0  # neighbourhoods were sampled


def test_resume_after_a_crash_matches_an_uninterrupted_run(kg: GraphDir, tmp_path: Path) -> None:
    """Crash after epoch 2, resume with other prefetch threads: same parameters as an
    uninterrupted run without prefetching."""
    config = fast(model="sage", fanouts=(4,), epochs=4, dropout=0.2)
    full = fit(
        LinkTask(link_splits(kg)),
        fast(model="sage", fanouts=(4,), epochs=4, dropout=0.2, prefetch_workers=0),
        hooks=RunHooks(progress=False),
    )

    def crash(epoch: int, path: Path | None) -> None:
        if epoch == 2:
            raise RuntimeError("simulated crash")

    with pytest.raises(RuntimeError, match="simulated crash"):
        fit(
            LinkTask(link_splits(kg)),
            config,
            hooks=RunHooks(progress=False, checkpoints=tmp_path / "ckpt", on_epoch_end=crash),
        )
    resumed = fit(
        LinkTask(link_splits(kg)),
        fast(model="sage", fanouts=(4,), epochs=4, dropout=0.2, prefetch_workers=2),
        hooks=RunHooks(progress=False, checkpoints=tmp_path / "ckpt", resume=True),
    )
    assert resumed.resumed_from_epoch == 2
    assert resumed.val_mrr == full.val_mrr
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name


def test_cli_partition_buffer_run_killed_after_a_checkpoint_resumes_exactly(
    kg: GraphDir, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``gnncore train --task link --mode partition_buffer`` SIGKILLed right after
    checkpoint 2 (its live table files left as they were), then ``--resume``: the
    metrics, the last checkpoint (dense parameters, Adagrad state, RNG) and the
    snapshots of the on-disk table (embeddings, Adagrad sums, best epoch's table)
    are those of an uninterrupted run. A damaged snapshot is refused in one line
    naming it."""
    from gnncore.cli.main import main

    def common(root: str) -> list[str]:
        return [
            str(kg.path),
            *("--task", "link", "--model", "none", "--dim", "16", "--epochs", "4"),
            *("--batch-size", "64", "--negatives", "64", "--lr", "0.2", "--patience", "0"),
            *("--mode", "partition_buffer", "--buffer-partitions", "8"),
            *("--buffer-capacity", "4", "--buffer-ordering", "beta"),
            *("--device", "cpu", "--no-progress", "--data-root", str(tmp_path / root)),
        ]

    def argv(kill_after: int, name: str, *extra: str) -> list[str]:
        out = ("--checkpoint-dir", str(tmp_path / name), "--json", str(tmp_path / f"{name}.json"))
        return [str(kill_after), *common("root"), *out, *extra]

    def killed_run(kill_after: int, name: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, str(HERE / "kill_after_checkpoint.py"), *argv(kill_after, name)]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        return subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path
        )

    # The runs that are not killed go in this process (the same arithmetic: one thread).
    assert run_in_process(argv(0, "whole")) == 0
    killed = killed_run(2, "killed")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert not (tmp_path / "killed.json").exists()
    assert CheckpointDir(tmp_path / "killed").epochs() == [1, 2]
    assert (tmp_path / "killed" / "epoch-2.embeddings.npy").is_file()
    live = tmp_path / "killed.partition-buffer"  # the live tables the kill left
    assert live.is_dir() and any(live.iterdir())

    # A damaged snapshot (a copy of the killed run's checkpoints): one line, the file named.
    damaged = tmp_path / "damaged"
    shutil.copytree(tmp_path / "killed", damaged)
    snapshot = damaged / "epoch-2.adagrad.npy"
    data = bytearray(snapshot.read_bytes())
    data[-5] ^= 0x10
    snapshot.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["train", *common("other-root"), "--checkpoint-dir", str(damaged), "--resume"]) == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"gnncore train: error: {snapshot}: damaged"), error

    assert run_in_process(argv(0, "killed", "--resume")) == 0
    # The resumed run worked in the same place and removed it when it ended.
    assert not live.exists() and not list(tmp_path.glob("*partition-buffer*"))
    summary = json.loads((tmp_path / "killed.json").read_text())
    reference = json.loads((tmp_path / "whole.json").read_text())
    assert summary["resumed_from_epoch"] == 2 and summary["stopped_epoch"] == 4
    for key in ("test_mrr", "test_hits@10", "val_mrr", "final_train_loss", "best_epoch"):
        assert summary[key] == reference[key], key

    a, b = CheckpointDir(tmp_path / "whole").latest(), CheckpointDir(tmp_path / "killed").latest()
    assert a is not None and b is not None and a.epoch == b.epoch == 4
    for key in ("model", "optimizer"):
        assert_same_state(a.state[key], b.state[key], key)
    for key in ("torch", "generator"):
        assert_same_state(a.state["rng"][key], b.state["rng"][key], key)
    assert a.state["files"] == b.state["files"]  # names, sizes and sha256 of the snapshots
    files = sorted(p.name for p in (tmp_path / "whole").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "killed").iterdir())
    for name in files:
        if name.endswith(".npy"):
            assert (tmp_path / "whole" / name).read_bytes() == (
                tmp_path / "killed" / name
            ).read_bytes(), name


def test_plain_graphs_are_split_without_leaking_into_message_passing(tmp_path: Path) -> None:
    graph = GraphDir.open(planted_graph(tmp_path / "g"))
    splits = link_splits(graph, val_fraction=0.1, test_fraction=0.1)
    total = graph.manifest.num_undirected_edges
    assert len(splits.test) == int(total * 0.1) and len(splits.val) == int(total * 0.1)
    assert len(splits.train) + len(splits.val) + len(splits.test) == total
    assert splits.source == "edges" and splits.num_relations == 1
    indptr, indices = message_passing_csc(splits.train, graph.num_nodes)
    joined = {
        (int(indices[e]), v)
        for v in range(graph.num_nodes)
        for e in range(indptr[v], indptr[v + 1])
    }
    assert len(joined) == 2 * len(splits.train)
    for h, _, t in splits.test.tolist():
        assert (h, t) not in joined and (t, h) not in joined


def test_gnn_encoder_reads_features_when_the_graph_has_them(tmp_path: Path) -> None:
    graph = GraphDir.open(planted_graph(tmp_path / "g", num_nodes=300))
    config = fast(model="sage", fanouts=(5,), decoder="dot", epochs=3, lr=0.05)
    result = fit(
        LinkTask(link_splits(graph), feature_store=GraphDirFeatureStore(graph)),
        config,
        hooks=RunHooks(progress=False),
    )
    assert result.model.embedding is None  # features in, no embedding table
    assert result.test.mrr > 0.05  # 300 candidates: random is about 0.02


def test_tracked_feature_model_is_logged_with_its_features(tmp_path: Path) -> None:
    """A GNN over node features exports with an (n_id, edge_index, x) example."""
    import mlflow

    from gnncore.modes import RunRecording, train_graph_dir
    from gnncore.tracking.mlflow import MlflowTracker

    graph = GraphDir.open(planted_graph(tmp_path / "g", num_nodes=200))
    tracker = MlflowTracker(f"sqlite:///{tmp_path}/mlflow.db", "links")
    result = train_graph_dir(
        graph,
        fast(model="sage", fanouts=(3,), epochs=1),
        recording=RunRecording(tracking=tracker, progress=False),
    )
    assert result.model_uri and result.run_id
    run = mlflow.MlflowClient(tracker.tracking_uri).get_run(result.run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "planted-link-sage-distmult"
    assert run.data.params["link_splits"] == "edges"


def test_edge_splits_train_both_orientations_without_reciprocal_relations(tmp_path: Path) -> None:
    graph = GraphDir.open(planted_graph(tmp_path / "g", num_nodes=200))
    result = fit(LinkTask(link_splits(graph)), fast(epochs=1), hooks=RunHooks(progress=False))
    # one relation, no reciprocal copy: the decoder knows relation 0 only
    assert result.model.decoder.relations.num_embeddings == 1


def test_sampled_evaluation_negatives_and_a_validation_subset(kg: GraphDir) -> None:
    splits = link_splits(kg)
    result = fit(
        LinkTask(splits),
        fast(epochs=2, eval_negatives=30, max_eval_triples=20),
        hooks=RunHooks(progress=False),
    )
    assert result.test.count == 2 * len(splits.test)  # the test split is always whole
    assert 0 < result.test.mrr <= 1 and result.test.mean_rank <= 31
    full = fit(LinkTask(splits), fast(epochs=2), hooks=RunHooks(progress=False))
    # fewer candidates than all 80 entities: the sampled protocol ranks higher
    assert result.test.mean_rank < full.test.mean_rank


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="fanouts"):
        LinkTrainConfig(model="none", fanouts=(5,)).validate()
    with pytest.raises(ConfigError, match="decoder"):
        LinkTrainConfig(decoder="transe").validate()
    with pytest.raises(ConfigError, match="negative_sampling"):
        LinkTrainConfig(negative_sampling="hard").validate()
    assert LinkTrainConfig(model="sage").fanouts == (10,)
    assert LinkTrainConfig().to_params()["task"] == "link"


def test_cli_trains_links_and_tracks_the_run(kg: GraphDir, tmp_path: Path) -> None:
    import mlflow

    from gnncore.cli.main import main

    out = tmp_path / "link.json"
    code = main(
        [
            "train",
            str(kg.path),
            "--task",
            "link",
            "--model",
            "none",
            "--dim",
            "16",
            "--epochs",
            "3",
            "--batch-size",
            "64",
            "--negatives",
            "64",
            "--device",
            "cpu",
            "--data-root",
            str(tmp_path / "root"),
            "--no-progress",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    summary = json.loads(out.read_text())
    assert summary["task"] == "link" and summary["resumed_from_epoch"] == 0
    assert summary["test_mrr"] > 2 * RANDOM_MRR
    assert 0 < summary["test_hits@10"] <= 1
    client = mlflow.MlflowClient(summary["mlflow_tracking_uri"])
    run = client.get_run(summary["mlflow_run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.params["task"] == "link" and run.data.params["decoder"] == "distmult"
    assert run.data.metrics["test_mrr"] == pytest.approx(summary["test_mrr"])
    assert "test_hits_at_10" in run.data.metrics
    history = client.get_metric_history(run.info.run_id, "val_mrr")
    assert [m.step for m in history] == [1, 2, 3]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert "curves.png" in artifacts
