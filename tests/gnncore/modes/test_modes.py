"""Training modes through train_graph_dir: in memory equals memory-mapped, HierBatching
reads a partitioned store of the same graph and logs what it read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from conftest import planted_graph
from gnncore.modes import RunInputs, RunRecording, train_graph_dir
from gnncore.outofcore.store import write_partitioned_store
from gnncore.partition import partition_graph
from gnncore.store import GraphDir
from gnncore.train import NodeTrainConfig
from gnncore.train.node.config import ConfigError

SMALL = {"epochs": 3, "hidden": 16, "fanouts": (5, 5), "batch_size": 32, "device": "cpu"}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("modes")
    graph = GraphDir.open(planted_graph(root / "g", num_nodes=500, degree=8))
    partition_graph(graph.path, root / "part", method="metis", parts=8, seed=0)
    store = write_partitioned_store(graph.path, root / "part", root / "store", static_fraction=0.02)
    return graph, store


def _run_logged(graph: GraphDir, store, config: NodeTrainConfig, lines: list[str]):
    """``train_graph_dir`` over ``store`` with its progress lines appended to ``lines``."""
    return train_graph_dir(
        graph,
        config,
        inputs=RunInputs(store=store.path),
        recording=RunRecording(progress=lines.append),
    )


def test_in_memory_trains_exactly_as_memory_mapped(built):
    graph, _ = built
    mapped = train_graph_dir(
        graph, NodeTrainConfig(**SMALL, mode="mmap"), recording=RunRecording(progress=False)
    )
    loaded = train_graph_dir(
        graph, NodeTrainConfig(**SMALL, mode="in_memory"), recording=RunRecording(progress=False)
    )
    for a, b in zip(mapped.model.parameters(), loaded.model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert mapped.test_accuracy == loaded.test_accuracy


def test_hierbatching_needs_a_store_of_this_graph(built, tmp_path):
    graph, store = built
    config = NodeTrainConfig(**SMALL, mode="hierbatching")
    with pytest.raises(ConfigError, match="gnncore store"):
        train_graph_dir(graph, config, recording=RunRecording(progress=False))
    other = GraphDir.open(planted_graph(tmp_path / "other", num_nodes=500, degree=8, seed=3))
    with pytest.raises(ConfigError, match="another graph"):
        train_graph_dir(
            other,
            config,
            inputs=RunInputs(store=store.path),
            recording=RunRecording(progress=False),
        )
    with pytest.raises(ConfigError, match="'partition_buffer', not 'mmap'"):
        train_graph_dir(
            graph,
            NodeTrainConfig(**SMALL, mode="mmap"),
            inputs=RunInputs(store=store.path),
            recording=RunRecording(progress=False),
        )
    with pytest.raises(ConfigError, match="memory_budget"):
        NodeTrainConfig(**SMALL, mode="hierbatching", memory_budget="lots").validate()


def test_hierbatching_logs_one_line_per_mega_batch(built):
    graph, store = built
    lines: list[str] = []
    config = NodeTrainConfig(**SMALL, mode="hierbatching", mega_batch_parts=4)
    result = _run_logged(graph, store, config, lines)
    assert result.test_accuracy > 0.6  # chance: 0.25
    train_lines = [line for line in lines if line.startswith("train mega-batch")]
    assert len(train_lines) == 3 * 2  # 3 epochs, 8 partitions in groups of 4
    assert any(line.startswith("epoch 3/3") for line in lines)


def test_partition_buffer_trains_each_partition_in_once_per_epoch(built):
    graph, store = built
    lines: list[str] = []
    config = NodeTrainConfig(**SMALL, mode="partition_buffer", mega_batch_parts=3)
    result = _run_logged(graph, store, config, lines)
    assert result.test_accuracy > 0.6  # chance: 0.25
    states = [line for line in lines if line.startswith("train buffer state")]
    assert len(states) == 3 * (store.parts - 3 + 1)  # 3 epochs of p - c + 1 states
    assert all("(1 read)" in line for line in states if " state 1:" not in line)


def test_cli_hierbatching_run_records_mode_budget_and_bytes_read(built, tmp_path):
    from gnncore.cli.main import main
    from gnncore.outofcore.megabatch import data_bytes
    from gnncore.tracking.mlflow import MlflowTracker, default_tracking_uri

    graph, store = built
    root = tmp_path / "root"
    command = [
        "train",
        str(graph.path),
        "--mode",
        "hierbatching",
        "--store",
        str(store.path),
        "--memory-budget",
        "4GiB",
        "--epochs",
        "2",
        "--hidden",
        "16",
        "--fanouts",
        "5,5",
        "--device",
        "cpu",
        "--no-progress",
        "--data-root",
        str(root),
        "--json",
        str(tmp_path / "out.json"),
    ]
    assert main(command) == 0  # the CLI in this process: no interpreter importing torch again
    summary = json.loads(Path(tmp_path / "out.json").read_text())
    assert summary["mode"] == "hierbatching"
    tracker = MlflowTracker(default_tracking_uri(root))
    (run,) = tracker.client.search_runs([tracker.experiment_id])
    params = run.data.params
    assert params["mode"] == "hierbatching"
    assert params["memory_budget_bytes"] == str(4 << 30)  # the whole process's
    assert params["mega_batch_parts_used"] == str(store.parts)  # 4 GiB holds it all
    history = tracker.client.get_metric_history(run.info.run_id, "hb_bytes_read")
    assert [m.value for m in history] == [float(data_bytes(store))] * 2


def test_hierbatching_evaluates_exactly_on_the_whole_graph(built):
    """Exact evaluation (no ``eval_fanouts``) of an out-of-core run is layer-wise
    over the whole graph, as predictions are: its test accuracy is the final
    model's on every neighbour, not on the neighbours a mega-batch holds. With
    ``eval_fanouts`` it still samples inside the mega-batches."""
    graph, store = built
    lines: list[str] = []
    config = NodeTrainConfig(**SMALL, mode="hierbatching", mega_batch_parts=2)
    result = _run_logged(graph, store, config, lines)
    assert result.evaluation["test"].startswith("layer-wise")
    assert not any("val mega-batch" in line or "test mega-batch" in line for line in lines)
    x = torch.from_numpy(graph.array("features").copy())
    indptr = torch.from_numpy(graph.indptr.astype("int64"))
    sources = torch.from_numpy(graph.indices.astype("int64"))
    targets = torch.repeat_interleave(torch.arange(len(indptr) - 1), indptr.diff())
    model = result.model.eval()
    with torch.no_grad():
        predicted = model(x, torch.stack([sources, targets])).argmax(dim=-1)
    test = torch.from_numpy(graph.split("test").astype("int64"))
    labels = torch.from_numpy(graph.array("labels").astype("int64"))
    exact = (predicted[test] == labels[test]).double().mean().item()
    assert result.test_accuracy == pytest.approx(exact, abs=1e-9)

    lines.clear()
    sampled = NodeTrainConfig(**SMALL, mode="hierbatching", mega_batch_parts=2, eval_fanouts=(5, 5))
    _run_logged(graph, store, sampled, lines)
    assert any(line.startswith("test mega-batch") for line in lines)
