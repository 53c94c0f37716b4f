"""Mode auto (issue 27, item 2): training picks in_memory when the graph's training
data fits the budget, else its out-of-core mode, and says why."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conftest import planted_graph, tiny_kg
from gnncore.errors import ConfigError
from gnncore.memory import memory_available
from gnncore.modes import (
    RunInputs,
    RunRecording,
    choose_mode,
    resolve_mode,
    train_graph_dir,
    training_bytes,
)
from gnncore.modes.choose import distributed_config, working_set
from gnncore.outofcore.store import write_partitioned_store
from gnncore.partition import partition_graph
from gnncore.sizes import format_size
from gnncore.store import GraphDir
from gnncore.synth import SynthSpec, generate_graph
from gnncore.train import LinkTrainConfig, NodeTrainConfig
from gnncore.usage import STAGE_MARGIN, current_rss_bytes

SMALL = {"epochs": 2, "hidden": 16, "batch_size": 64, "fanouts": (5, 5), "device": "cpu"}
GIB = 1 << 30
#: A whole-process budget with room whatever this process already holds (an xdist
#: worker held 984 MiB by the time these ran in make test: 1 GiB left it nothing).
ROOMY = 64 * GIB


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> GraphDir:
    return GraphDir.open(planted_graph(tmp_path_factory.mktemp("auto") / "g"))


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """A generated graph with 40 MiB of features (10,000 nodes x 1,024 floats) and a
    partitioned store of it (32 partitions)."""
    root = tmp_path_factory.mktemp("wide")
    spec = SynthSpec(num_nodes=10_000, avg_degree=4, num_classes=4, num_features=1024, seed=1)
    generate_graph(root / "g", spec, memory_budget=None)
    graph = GraphDir.open(root / "g")
    partition_graph(graph.path, root / "part", method="metis", parts=32, seed=0)
    store = write_partitioned_store(graph.path, root / "part", root / "store", static_fraction=0.01)
    return graph, store


def test_the_estimate_counts_what_in_memory_holds(small):
    m = small.manifest
    parts = training_bytes(small, NodeTrainConfig())
    assert parts["features"] == m.num_nodes * m.num_features * 4
    assert parts["topology"] == 8 * (m.num_nodes + 1) + 8 * len(np.asarray(small.indices))
    assert parts["labels"] == 8 * m.num_nodes
    assert parts["splits"] == 8 * sum(len(small.split(s)) for s in ("train", "val", "test"))


def test_auto_with_room_trains_in_memory_with_the_same_results(small):
    runs = {
        mode: train_graph_dir(
            small,
            NodeTrainConfig(mode=mode, **SMALL),
            recording=RunRecording(progress=False),
            budget=ROOMY,
        )
        for mode in ("auto", "in_memory", "mmap")
    }
    auto = runs["auto"]
    assert auto.config.mode == "in_memory"
    assert auto.mode_choice is not None
    assert auto.mode_choice["mode"] == "in_memory" and auto.mode_choice["requested"] == "auto"
    assert auto.mode_choice["reason"].startswith("the training data fits")
    assert auto.mode_choice["budget_bytes"] == ROOMY
    estimate = sum(training_bytes(small, NodeTrainConfig()).values())
    assert auto.mode_choice["training_bytes"] == estimate
    # Today's explicit modes give the same losses and accuracies on the same seed.
    for mode in ("in_memory", "mmap"):
        other = runs[mode]
        assert other.config.mode == mode and other.mode_choice["reason"] == "explicit mode"
        assert other.train_loss == auto.train_loss
        assert other.val_accuracy == auto.val_accuracy
        assert other.test_accuracy == auto.test_accuracy


def test_an_explicit_mode_wins_over_the_budget(small):
    choice = resolve_mode(small, NodeTrainConfig(mode="mmap"), budget_bytes=1024)
    assert (choice.mode, choice.requested, choice.reason) == ("mmap", "mmap", "explicit mode")
    link = resolve_mode(small, LinkTrainConfig(mode="in_memory"), budget_bytes=1024)
    assert link.mode == "in_memory"


def test_a_callers_budget_bounds_the_whole_process(small):
    # Room for the data and the working set (model, batches, evaluation), 1 MiB spare.
    need = sum(training_bytes(small, NodeTrainConfig()).values())
    need += working_set(small, NodeTrainConfig()).total()
    held = current_rss_bytes()
    choice = choose_mode(small, NodeTrainConfig(), held + STAGE_MARGIN + need + (1 << 20))
    assert choice.mode == "in_memory" and choice.budget_bytes > held
    assert "this process holds" in choice.reason
    with pytest.raises(ConfigError, match="leaves nothing"):
        choose_mode(small, NodeTrainConfig(), held // 2, store_available=True)


def test_without_a_budget_auto_compares_with_the_memory_available(small):
    choice = choose_mode(small, NodeTrainConfig(), None)
    available = memory_available()
    assert available is not None  # Linux: /proc/meminfo
    assert choice.mode == "in_memory"
    assert "the memory available" in choice.reason
    assert choice.budget_bytes == pytest.approx(available, rel=0.2)


def test_the_refusal_names_the_budget_the_estimate_and_the_store(small):
    estimate = sum(training_bytes(small, NodeTrainConfig()).values())
    with pytest.raises(ConfigError) as refused:
        choose_mode(small, NodeTrainConfig(), budget_bytes=16 << 10, store_available=False)
    message = str(refused.value)
    assert format_size(16 << 10) in message and format_size(estimate) in message
    assert "partitioned_store" in message and "gnncore store" in message
    # The config's own memory_budget wins over the caller's budget.
    with pytest.raises(ConfigError, match="memory_budget 16KiB"):
        choose_mode(small, NodeTrainConfig(memory_budget="16KiB"), budget_bytes=GIB)
    # And train_graph_dir refuses before training.
    with pytest.raises(ConfigError, match="gnncore store"):
        train_graph_dir(
            small, NodeTrainConfig(**SMALL), recording=RunRecording(progress=False), budget=16 << 10
        )


def test_plans_and_options_the_out_of_core_mode_lacks_pick_mmap(small):
    assert choose_mode(small, NodeTrainConfig(), ROOMY, plans=True).mode == "mmap"
    assert choose_mode(small, NodeTrainConfig(locality_aware=True), ROOMY).mode == "mmap"
    workers = choose_mode(small, NodeTrainConfig(num_workers=1), 16 << 10, store_available=True)
    assert workers.mode == "mmap" and "num_workers=1" in workers.reason
    assert distributed_config(NodeTrainConfig()).mode == "mmap"
    assert distributed_config(NodeTrainConfig(mode="in_memory")).mode == "in_memory"


def test_a_resumed_auto_run_keeps_its_checkpoints_mode(small, tmp_path):
    first = train_graph_dir(
        small,
        NodeTrainConfig(**{**SMALL, "epochs": 1}),
        recording=RunRecording(progress=False, checkpoint_dir=tmp_path),
        budget=ROOMY,
    )
    assert first.config.mode == "in_memory"
    # A budget that would now refuse in_memory (and there is no store): resuming
    # keeps the checkpoint's mode instead of choosing again.
    resumed = train_graph_dir(
        small,
        NodeTrainConfig(**SMALL),
        recording=RunRecording(progress=False, checkpoint_dir=tmp_path, resume=True),
        budget=16 << 10,
    )
    assert resumed.resumed_from_epoch == 1 and resumed.config.mode == "in_memory"
    assert resumed.mode_choice["reason"].startswith("resumed")


def test_features_over_the_budget_train_out_of_core(wide):
    graph, store = wide
    # A whole-process budget: what this process holds, the margin, the working set
    # (model, batches in flight, evaluation) and 32 MiB for data.
    data = 32 << 20
    config = NodeTrainConfig(epochs=1, hidden=16, fanouts=(5,), batch_size=512, device="cpu")
    budget = current_rss_bytes() + STAGE_MARGIN + working_set(graph, config).total() + data
    assert graph.manifest.num_nodes * graph.manifest.num_features * 4 > data
    with pytest.raises(ConfigError, match="partitioned store"):
        train_graph_dir(graph, config, recording=RunRecording(progress=False), budget=budget)
    lines: list[str] = []
    result = train_graph_dir(
        graph,
        config,
        inputs=RunInputs(store=store.path),
        recording=RunRecording(progress=lines.append),
        budget=budget,
    )
    assert result.config.mode == "hierbatching"
    # Mega-batches are sized from the whole-process budget, handed on as it is.
    assert int(result.config.memory_budget) == budget
    assert result.mode_choice["training_bytes"] > data
    assert result.mode_choice["budget_bytes"] == budget
    assert lines[0].startswith("mode auto -> hierbatching: the training data does not fit")
    assert any(line.startswith("train mega-batch") for line in lines)
    assert len(result.train_loss) == 1 and np.isfinite(result.train_loss[0])
    assert result.test_accuracy > 0.25  # 4 classes


def test_link_with_learned_embeddings_over_the_budget_uses_the_partition_buffer(tmp_path):
    graph = GraphDir.open(tiny_kg(tmp_path / "kg"))
    config = LinkTrainConfig(
        dim=16, batch_size=128, num_negatives=128, epochs=1, device="cpu", patience=0
    )
    parts = training_bytes(graph, config)
    assert parts["embeddings"] == 8 * graph.manifest.num_nodes * 16
    # A whole-process budget the size of the data: what the process holds leaves it nothing.
    budget = sum(parts.values())
    config = dataclasses.replace(config, memory_budget=str(budget))
    result = train_graph_dir(graph, config, recording=RunRecording(progress=False))
    assert result.config.mode == "partition_buffer"
    assert result.mode_choice["reason"].startswith("the training data does not fit")
    assert 0 < result.test.mrr <= 1
    roomy = choose_mode(graph, dataclasses.replace(config, memory_budget=""), ROOMY)
    assert roomy.mode == "in_memory"
    gnn = choose_mode(graph, LinkTrainConfig(model="sage", dim=16, memory_budget=str(budget)))
    assert gnn.mode == "mmap" and "encoder 'sage'" in gnn.reason
