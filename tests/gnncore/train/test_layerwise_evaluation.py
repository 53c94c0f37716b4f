"""Exact evaluation through the layer-wise engine (gnncore.train.node.exact) equals
today's sampled evaluation with every neighbour, and leaves training unchanged."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from conftest import require_dataset
from gnncore.io import ingest
from gnncore.sampler import build_sampler
from gnncore.store import GraphDir, GraphDirFeatureStore, GraphDirGraphStore
from gnncore.synth import SynthSpec, generate_graph
from gnncore.train import NodeTrainConfig, build_model
from gnncore.train.core.layerwise import (
    Adjacency,
    block,
    block_of,
    layerwise_subset,
    rows_per_layer,
)
from gnncore.train.fitting import RunHooks, fit
from gnncore.train.node.exact import EvaluationCost, choose, sampled_cost, union_ids
from gnncore.train.node.loop import evaluate, make_loader
from gnncore.train.node.task import NodeTask

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*torch.jit.script.* is deprecated:DeprecationWarning"
)

CONFIG = NodeTrainConfig(hidden=32, epochs=2, batch_size=64, lr=0.01, device="cpu", seed=3)


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> GraphDir:
    """3,000 generated nodes, mean degree 8, 5 classes, 24 features."""
    out = tmp_path_factory.mktemp("layerwise-eval") / "g"
    spec = SynthSpec(num_nodes=3000, avg_degree=8, num_classes=5, num_features=24, seed=11)
    generate_graph(out, spec, memory_budget=None)
    return GraphDir.open(out)


@pytest.fixture(scope="module")
def cora(tmp_path_factory: pytest.TempPathFactory) -> GraphDir:
    raw = require_dataset("planetoid", "Cora")
    if not (raw / "raw" / "ind.cora.x").is_file():
        pytest.skip(f"Cora raw files not found under {raw}")
    out = tmp_path_factory.mktemp("cora") / "cora"
    ingest(raw, out)
    return GraphDir.open(out)


def _splits(graph: GraphDir) -> list[torch.Tensor]:
    return [torch.from_numpy(graph.split(s).astype(np.int64)) for s in ("train", "val", "test")]


def _train(graph: GraphDir, config: NodeTrainConfig, sampled: bool) -> tuple[object, NodeTask]:
    """Train with exact evaluation, layer-wise or (``sampled``) through the
    all-neighbour sampler that exact evaluation used before."""
    features, topology = GraphDirFeatureStore(graph), GraphDirGraphStore(graph)
    eval_sampler = None
    if sampled:
        fanouts = (-1,) * config.num_layers
        eval_sampler = build_sampler(config.sampler, topology, fanouts, seed=config.seed + 1)
    task = NodeTask(
        features,
        topology,
        _splits(graph),
        graph.manifest.num_classes,
        eval_sampler=eval_sampler,
    )
    return fit(task, config, None, RunHooks(None, False, None, False, None)), task


def _predictions(graph: GraphDir, model: torch.nn.Module, config: NodeTrainConfig) -> tuple:
    """Test-set predictions both ways for one model: sampled loader, layer-wise."""
    features, topology = GraphDirFeatureStore(graph), GraphDirGraphStore(graph)
    test = _splits(graph)[2]
    sampler = build_sampler("dense", topology, (-1,) * config.num_layers, seed=1)
    loader = make_loader((features, topology), sampler, test, 97, config, torch.device("cpu"))
    sampled = evaluate(model, loader, torch.device("cpu"))
    adjacency = Adjacency(sampler.indptr, sampler.indices)
    evaluation, cost = choose("test", model, adjacency, test, config)
    assert evaluation is not None and cost is not None and cost.use_layerwise
    exact = evaluation(model, features, torch.device("cpu"))
    return sampled, exact


@pytest.mark.parametrize("name", ["sage", "gat", "gin"])
def test_layerwise_metrics_equal_sampled_exact_evaluation(synth: GraphDir, name: str) -> None:
    config = dataclasses.replace(CONFIG, model=name)
    torch.manual_seed(0)
    model = build_model(name, 24, 32, synth.manifest.num_classes, 2, 0.0).eval()
    sampled, exact = _predictions(synth, model, config)
    assert exact.accuracy == sampled.accuracy
    assert exact.macro_f1 == pytest.approx(sampled.macro_f1, abs=1e-12)


@pytest.mark.parametrize("name", ["sage", "gat", "gin"])
def test_training_with_layerwise_evaluation_equals_sampled(synth: GraphDir, name: str) -> None:
    """Same validation curve, same test figures, bit-identical weights: evaluation
    does not consume training's random stream differently."""
    config = dataclasses.replace(CONFIG, model=name, normalize_features=name == "gin")
    layerwise, task = _train(synth, config, sampled=False)
    sampled, old = _train(synth, config, sampled=True)
    assert all(way.startswith("layer-wise (cost") for way in task.evaluation_ways.values())
    assert old.evaluation_ways == {"val": "sampled: the caller's evaluation sampler"} | {
        "test": "sampled: the caller's evaluation sampler"
    }
    # The run's result (its JSON summary, MLflow tags, Dagster metadata) says so too.
    assert layerwise.evaluation == task.evaluation_ways  # type: ignore[attr-defined]
    assert layerwise.val_accuracy == sampled.val_accuracy  # type: ignore[attr-defined]
    assert layerwise.test_accuracy == sampled.test_accuracy  # type: ignore[attr-defined]
    for key, value in layerwise.model.state_dict().items():  # type: ignore[attr-defined]
        assert torch.equal(value, sampled.model.state_dict()[key]), key  # type: ignore[attr-defined]


def test_gcn_is_exact_full_graph_gcn_within_a_point_of_sampled(synth: GraphDir) -> None:
    """Layer-wise GCN uses full-graph degrees (what `gnncore predict` computes);
    sampled evaluation gives the outermost hop degree 1. On this graph the two
    accuracies stay within 0.02 of each other; the layer-wise logits equal the
    model's forward over the whole graph."""
    config = dataclasses.replace(CONFIG, model="gcn")
    result, task = _train(synth, config, sampled=False)
    assert task.evaluation_ways["test"].startswith("layer-wise")
    model = result.model.eval()  # type: ignore[attr-defined]
    sampled, exact = _predictions(synth, model, config)
    assert abs(exact.accuracy - sampled.accuracy) <= 0.02
    x = torch.from_numpy(np.array(synth.features()))
    indptr, indices = np.asarray(synth.indptr), np.asarray(synth.indices)
    dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    edge_index = torch.from_numpy(np.stack([np.asarray(indices, np.int64), dst]))
    full = model(x, edge_index).argmax(-1)
    test = _splits(synth)[2]
    labels = torch.from_numpy(np.asarray(synth.labels()))
    assert exact.accuracy == pytest.approx(float((full[test] == labels[test]).float().mean()))


@pytest.mark.dataset
@pytest.mark.parametrize("name", ["sage", "gat", "gin", "gcn"])
def test_cora_layerwise_equals_sampled(cora: GraphDir, name: str) -> None:
    config = dataclasses.replace(CONFIG, model=name, normalize_features=True)
    torch.manual_seed(1)
    model = build_model(name, 1433, 32, 7, 2, 0.0).eval()
    sampled, exact = _predictions(cora, model, config)
    if name == "gcn":
        assert abs(exact.accuracy - sampled.accuracy) <= 0.05
    else:
        assert exact.accuracy == sampled.accuracy


def test_eval_fanouts_still_samples(synth: GraphDir) -> None:
    config = dataclasses.replace(CONFIG, epochs=1, eval_fanouts=(5, 5))
    _, task = _train(synth, config, sampled=False)
    assert task.evaluation_ways == {"val": "sampled: eval_fanouts (5, 5)"} | {
        "test": "sampled: eval_fanouts (5, 5)"
    }


def test_block_of_a_range_is_the_range_block(synth: GraphDir) -> None:
    adjacency = Adjacency(np.asarray(synth.indptr), np.asarray(synth.indices))
    ranged, chosen = block(adjacency, 100, 180), block_of(adjacency, torch.arange(100, 180))
    assert torch.equal(ranged.n_id, chosen.n_id)
    assert torch.equal(ranged.edge_index, chosen.edge_index)


def test_rows_per_layer_are_the_in_neighbourhoods(synth: GraphDir) -> None:
    indptr, indices = np.asarray(synth.indptr), np.asarray(synth.indices)
    adjacency = Adjacency(indptr, indices)
    targets = torch.tensor([5, 17, 2999])
    rows = rows_per_layer(adjacency, targets, 3)
    assert rows[2].tolist() == [5, 17, 2999]
    one_hop = set(targets.tolist())
    for t in targets.tolist():
        one_hop.update(int(s) for s in indices[indptr[t] : indptr[t + 1]])
    assert rows[1].tolist() == sorted(one_hop)
    assert set(rows[0].tolist()) >= one_hop


def test_cost_rule_picks_layerwise_for_a_large_evaluation_set(synth: GraphDir) -> None:
    indptr, indices = np.asarray(synth.indptr), np.asarray(synth.indices)
    adjacency = Adjacency(indptr, indices)
    model = build_model("sage", 24, 32, 5, 2, 0.0)
    everything = torch.arange(adjacency.num_nodes)
    evaluation, cost = choose("test", model, adjacency, everything, CONFIG)
    assert evaluation is not None and cost is not None
    assert cost.use_layerwise and cost.layerwise < cost.sampled
    # Sampling the whole graph with every neighbour costs at least L (N + E)
    # once per batch's overlap; layer-wise is L (N + E) exactly here.
    assert cost.layerwise == 2 * (adjacency.num_nodes + int(indptr[-1]))
    assert sampled_cost(adjacency, everything[:0], 2, 64, True) == 0


def test_the_sampled_count_stops_once_it_is_sure_to_exceed_the_limit(synth: GraphDir) -> None:
    adjacency = Adjacency(np.asarray(synth.indptr), np.asarray(synth.indices))
    everything = torch.arange(adjacency.num_nodes)
    full = sampled_cost(adjacency, everything, 2, 64, True)
    # A limit the estimate exceeds: a partial count, still above the limit.
    limit = full // 50
    partial = sampled_cost(adjacency, everything, 2, 64, True, limit)
    assert limit < partial < full
    # A limit it does not reach: the same count as without one.
    assert sampled_cost(adjacency, everything, 2, 64, True, full) == full
    assert sampled_cost(adjacency, everything, 2, 64, False, None) > full  # untrimmed


def test_cost_rule_spills_the_layers_when_they_do_not_fit() -> None:
    cost = EvaluationCost(layerwise=10, sampled=100, layer_bytes=1 << 30, memory=1 << 30)
    assert not cost.fits and cost.spill and cost.use_layerwise
    assert not EvaluationCost(10, 100, 1 << 20, None).spill
    assert not EvaluationCost(100, 10, 1 << 20, None).use_layerwise
    # The way a run reports names the sizes that sent the layers to disk.
    assert cost.describe().startswith(
        "layer-wise, hidden layers on disk: 1.0 GiB exceed half of the memory available (512.0 MiB)"
    )
    assert EvaluationCost(100, 10, 1 << 20, None).describe().startswith("sampled: cheaper")


@pytest.mark.parametrize("name", ["sage", "gcn"])
def test_layers_on_disk_give_the_in_memory_outputs(
    synth: GraphDir, name: str, tmp_path: Path
) -> None:
    """A subset's hidden layers in files (zeros between its rows) give the same
    output rows bit for bit, and the files are gone afterwards; an evaluation
    whose layers do not fit reports the same metrics as one whose layers do."""
    torch.manual_seed(0)
    model = build_model(name, 24, 32, synth.manifest.num_classes, 3, 0.0).eval()
    features, topology = GraphDirFeatureStore(synth), GraphDirGraphStore(synth)
    sampler = build_sampler("dense", topology, (-1, -1, -1), seed=1)
    adjacency = Adjacency(sampler.indptr, sampler.indices)
    test = _splits(synth)[2]
    rows = rows_per_layer(adjacency, test, 3)
    assert len(rows[0]) < synth.num_nodes  # a real subset: gaps to fill with zeros

    def inputs(n_id: torch.Tensor) -> torch.Tensor:
        return features.get_tensor(group_name=None, attr_name="x", index=n_id)

    def outputs(**kwargs: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
        with torch.no_grad():
            return list(layerwise_subset(model, adjacency, inputs, rows, batch_size=37, **kwargs))

    memory, disk = outputs(), outputs(layer_dir=tmp_path)
    assert len(memory) == len(disk) > 1
    for (nodes_m, out_m), (nodes_d, out_d) in zip(memory, disk, strict=True):
        assert torch.equal(nodes_m, nodes_d) and torch.equal(out_m, out_d)
    assert list(tmp_path.iterdir()) == []

    config = dataclasses.replace(CONFIG, model=name, fanouts=(5, 5, 5))
    evaluation, cost = choose("test", model, adjacency, test, config)
    assert evaluation is not None and cost is not None and not cost.spill
    in_memory = evaluation(model, features, torch.device("cpu"))
    evaluation.cost = dataclasses.replace(cost, layer_bytes=1 << 40, memory=1 << 30)
    assert evaluation.cost.spill
    assert evaluation(model, features, torch.device("cpu")) == in_memory


def test_fit_of_a_plain_node_task_reports_the_same_test_accuracy(synth: GraphDir) -> None:
    """fit of a NodeTask without an evaluation sampler goes layer-wise by itself."""
    features, topology = GraphDirFeatureStore(synth), GraphDirGraphStore(synth)
    config = dataclasses.replace(CONFIG, epochs=1)
    result = fit(
        NodeTask(features, topology, _splits(synth), synth.manifest.num_classes),
        config,
        hooks=RunHooks(progress=False),
    )
    sampled, _ = _train(synth, config, sampled=True)
    assert result.test_accuracy == sampled.test_accuracy  # type: ignore[attr-defined]


def test_union_ids_is_the_sorted_union() -> None:
    a, b = torch.tensor([0, 3, 7]), torch.tensor([1, 3, 9])
    assert union_ids(a, b, 10).tolist() == [0, 1, 3, 7, 9]
    assert union_ids(a, torch.tensor([], dtype=torch.long), 10).tolist() == [0, 3, 7]
    assert union_ids(a, b, 10).dtype == torch.int64
