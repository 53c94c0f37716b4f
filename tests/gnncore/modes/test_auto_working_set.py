"""Mode auto counts training's working set (issue 27, the whole chain): in_memory only
when the data *and* the model, the batches in flight and exact evaluation's memory fit
what the whole-process budget leaves after the process's own overhead."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gnncore.errors import ConfigError
from gnncore.modes import choose_mode, training_bytes
from gnncore.modes.choose import working_set
from gnncore.store import GraphDir
from gnncore.synth import SynthSpec, generate_graph
from gnncore.train import LinkTrainConfig, NodeTrainConfig
from gnncore.train.core.models import build_model
from gnncore.train.core.workingset import PARAM_STATE_BYTES, model_bytes, sampled_nodes
from gnncore.usage import STAGE_MARGIN, current_rss_bytes

MIB = 1 << 20
#: Room either side of an estimate: more than the process's RSS moves between this
#: test's reading and choose_mode's own.
SLACK = 4 * MIB


@pytest.fixture(scope="module")
def graph(tmp_path_factory) -> GraphDir:
    """20,000 nodes x 64 features (4.9 MiB): hidden 256 makes exact evaluation's
    hidden layer 19.5 MiB, the training batches ~100 MiB."""
    root = tmp_path_factory.mktemp("working")
    spec = SynthSpec(num_nodes=20_000, avg_degree=4, num_classes=4, num_features=64, seed=3)
    generate_graph(root / "g", spec, memory_budget=None)
    return GraphDir.open(root / "g")


def _budget(room: int) -> int:
    """A whole-process budget leaving ``room`` bytes after what this process holds."""
    return current_rss_bytes() + STAGE_MARGIN + room


@pytest.mark.parametrize(("model", "heads"), [("sage", 1), ("gcn", 1), ("gat", 4), ("none", 1)])
def test_the_model_estimate_is_the_parameters_with_their_adam_state(model, heads):
    built = build_model(model, 64, 32, 5, 3, 0.5, heads if model == "gat" else None)
    params = sum(p.numel() for p in built.parameters())
    assert model_bytes(model, [64, 32, 32, 5], heads) == PARAM_STATE_BYTES * params


def test_batches_grow_with_fanouts_batch_size_width_and_prefetch_depth(graph):
    assert sampled_nodes(10, (5, 2), 3.0, 10_000) == 10 + 50 + 100
    assert sampled_nodes(10, (-1,), 3.0, 10_000) == 40  # -1: the average degree
    assert sampled_nodes(10_000, (5, 5), 3.0, 20_000) == 20_000  # at most every node
    base = NodeTrainConfig(batch_size=64, fanouts=(5, 5), hidden=32, prefetch_depth=2)
    one = working_set(graph, base).batches
    deeper = working_set(graph, dataclasses.replace(base, prefetch_depth=6)).batches
    avg = np.asarray(graph.indices).size / graph.manifest.num_nodes
    nodes = sampled_nodes(64, (5, 5), avg, graph.manifest.num_nodes)
    per_batch = nodes * (4 * graph.manifest.num_features + 24)
    assert deeper - one == 4 * per_batch  # four more batches prepared ahead
    assert working_set(graph, dataclasses.replace(base, batch_size=128)).batches > one
    assert working_set(graph, dataclasses.replace(base, fanouts=(10, 5))).batches > one


def test_exact_evaluation_holds_a_hidden_layer_only_with_a_layerwise_model(graph):
    n = graph.manifest.num_nodes
    exact = working_set(graph, NodeTrainConfig(hidden=256, fanouts=(5, 5)))
    assert exact.eval_layers == n * 256 * 4  # two layers: one held hidden layer
    three = working_set(graph, NodeTrainConfig(hidden=256, fanouts=(5, 5, 5)))
    assert three.eval_layers == 2 * n * 256 * 4
    sampled = working_set(graph, NodeTrainConfig(hidden=256, fanouts=(5, 5), eval_fanouts=(5, 5)))
    assert sampled.eval_layers == 0
    # Training and evaluation take turns: the larger of the two counts, with the model.
    assert exact.total() == exact.model + max(exact.batches, exact.evaluation + exact.eval_layers)
    assert exact.total(False) == exact.model + max(exact.batches, exact.evaluation)


def test_the_choice_flips_where_data_plus_working_set_meet_the_room(graph):
    config = NodeTrainConfig(hidden=256, fanouts=(5, 5), batch_size=256)
    data = sum(training_bytes(graph, config).values())
    work = working_set(graph, config)
    assert work.eval_layers > 4 * SLACK and work.total(False) > 4 * SLACK
    # Room for everything: in memory, its hidden layer too.
    roomy = choose_mode(graph, config, _budget(data + work.total() + SLACK))
    assert roomy.mode == "in_memory" and roomy.working_bytes == work.total()
    assert "layers on disk" not in roomy.reason
    assert roomy.params()["mode_working_bytes"] == work.total()
    assert roomy.overhead_bytes > 0 and "this process holds" in roomy.reason
    # Not for the hidden layer: still in memory, the layer spilled (not counted).
    spill = choose_mode(graph, config, _budget(data + work.total(False) + SLACK))
    assert spill.mode == "in_memory" and spill.working_bytes == work.total(False)
    assert "evaluation layers on disk" in spill.reason
    # The data alone fits, the working set does not: out of core.
    assert data + SLACK < work.total(False)
    tight = _budget(data + work.total(False) - SLACK)
    out = choose_mode(graph, config, tight, store_available=True)
    assert out.mode == "hierbatching" and out.reason.startswith("the training data does not fit")
    assert out.memory_budget == str(tight)  # the whole process's, for the mega-batches
    with pytest.raises(ConfigError, match="working set"):
        choose_mode(graph, config, tight, store_available=False)


def test_the_config_budget_bounds_the_whole_process_too(graph):
    config = NodeTrainConfig(hidden=256, fanouts=(5, 5), batch_size=256)
    need = sum(training_bytes(graph, config).values()) + working_set(graph, config).total()
    own = NodeTrainConfig(
        hidden=256, fanouts=(5, 5), batch_size=256, memory_budget=str(_budget(need + SLACK))
    )
    chosen = choose_mode(graph, own, budget_bytes=1 << 50)
    assert chosen.mode == "in_memory" and chosen.reason.count("memory_budget") == 1
    assert chosen.budget_bytes == own.memory_budget_bytes
    assert chosen.apply(own).memory_budget == own.memory_budget
    # A caller's budget reaches the resolved config (exact evaluation reads it).
    caller = choose_mode(graph, config, _budget(need + SLACK))
    assert caller.apply(config).memory_budget == str(caller.budget_bytes)


def test_link_prediction_counts_its_batches_and_scores(graph):
    config = LinkTrainConfig(dim=32, batch_size=256, num_negatives=64, eval_negatives=100)
    work = working_set(graph, config)
    assert work.model == 0  # encoder none: the embedding table is training data
    assert work.evaluation == config.eval_batch_size * 100 * 4 * 2
    assert work.batches >= 256 * 64 * 4 * 2
    gnn = working_set(graph, LinkTrainConfig(model="sage", dim=32, fanouts=(5,)))
    assert gnn.model == model_bytes("sage", [graph.manifest.num_features, 32])


def test_every_neighbour_hops_are_sized_by_the_degree_a_neighbour_has(graph):
    """A neighbour is reached through its in-edges, so hubs dominate a second
    every-neighbour hop: the mean degree underestimates a real batch, the
    neighbour degree ``sum(d^2) / sum(d)`` does not (HierBatching's exact
    evaluation was sized from the mean and went past its budget)."""
    from gnncore.train.core.workingset import neighbour_degree

    indptr, indices = np.asarray(graph.indptr), np.asarray(graph.indices)
    degrees = np.diff(indptr)
    expected = float((degrees.astype(np.float64) ** 2).sum() / degrees.sum())
    assert neighbour_degree(indptr, block=999) == pytest.approx(expected)
    assert expected > 2 * degrees.mean()  # the generator's degrees are heavy-tailed
    seeds = np.random.default_rng(0).choice(len(degrees), 64, replace=False)
    first = np.concatenate([indices[indptr[v] : indptr[v + 1]] for v in seeds])
    hop1 = np.union1d(seeds, first)
    second = np.concatenate([indices[indptr[v] : indptr[v + 1]] for v in hop1])
    real = len(np.union1d(hop1, second))
    n, avg = len(degrees), degrees.mean()
    assert sampled_nodes(64, (-1, -1), avg, n) < real
    assert sampled_nodes(64, (-1, -1), avg, n, neighbour_degree=expected) >= real
