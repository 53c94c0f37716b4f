"""Exact evaluation of out-of-core runs in a partitioned store's order (issue 27,
"the whole chain beyond memory"): the same metrics as the graph's order,
validation and test in one layer-wise pass per epoch, and no mega-batch
evaluation batches built for a run that evaluates layer-wise."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest
import torch

from conftest import planted_graph
from gnncore.modes import RunInputs, RunRecording, node_data, train_graph_dir
from gnncore.outofcore.order import StoreOrder
from gnncore.outofcore.store import PartitionedStore, write_partitioned_store
from gnncore.outofcore.training import hierbatching_batches
from gnncore.partition import partition_graph
from gnncore.store import GraphDir, GraphDirFeatureStore, GraphDirGraphStore
from gnncore.train import NodeTrainConfig, build_model
from gnncore.train.core import projected
from gnncore.train.core.evalorder import EvaluationOrder
from gnncore.train.core.layerwise import Adjacency
from gnncore.train.fitting import RunHooks, fit
from gnncore.train.node.exact import EvaluationCost, KeptTest, LayerwiseEvaluation, choose
from gnncore.train.node.metrics import ClassificationMetrics
from gnncore.train.node.task import NodeTask

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*torch.jit.script.* is deprecated:DeprecationWarning",
    "ignore:The given NumPy array is not writable:UserWarning",
)

FEATURES, HIDDEN = 16, 8
SMALL = {"epochs": 1, "hidden": HIDDEN, "fanouts": (5, 5), "batch_size": 32, "device": "cpu"}


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[GraphDir, PartitionedStore]:
    root = tmp_path_factory.mktemp("eval-order")
    graph = GraphDir.open(planted_graph(root / "g", num_nodes=600, features=FEATURES))
    partition_graph(graph.path, root / "part", method="metis", parts=4, seed=0)
    store = write_partitioned_store(graph.path, root / "part", root / "store", static_fraction=0.02)
    return graph, store


def _split(graph: GraphDir, name: str) -> torch.Tensor:
    return torch.from_numpy(graph.split(name).astype(np.int64))


def _counted(order: EvaluationOrder, ranges: list[tuple[int, int]]) -> EvaluationOrder:
    """``order`` whose sequential range reads are appended to ``ranges``."""
    read_range = order.read_range

    def read(lo: int, hi: int) -> torch.Tensor:
        ranges.append((lo, hi))
        return read_range(lo, hi)

    return dataclasses.replace(order, read_range=read)


@pytest.mark.parametrize("name", ["sage", "gcn"])
@pytest.mark.parametrize("normalize", [False, True])
def test_store_order_metrics_equal_the_graph_order_ones(
    stored: tuple[GraphDir, PartitionedStore],
    name: str,
    normalize: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Validation and test together, in memory and with the hidden layer on disk
    (the first layer projected, its products in memory or on disk; or part by
    part, each part's rows read once and the cut edges' sources row by row):
    the store order gives the graph order's accuracy and macro-F1, and reads
    the features once, in order, when the first layer is projected."""
    graph, store = stored
    torch.manual_seed(5)
    model = build_model(name, FEATURES, HIDDEN, graph.manifest.num_classes, 2, 0.0).eval()
    adjacency = Adjacency(np.asarray(graph.indptr), np.asarray(graph.indices))
    features = GraphDirFeatureStore(graph)
    config = NodeTrainConfig(**SMALL, model=name)
    splits = (_split(graph, "val"), _split(graph, "test"))
    val, _ = choose("validation", model, adjacency, splits[0], config)
    test, _ = choose("test", model, adjacency, splits[1], config)
    assert val is not None and test is not None
    joint = val.joined(test, ("val", "test"))
    device = torch.device("cpu")
    expected = joint.measure(model, features, device, normalize_features=normalize)
    assert joint.passes == 1
    order = StoreOrder.of_store(store, graph).evaluation_order(graph)
    part = int(np.diff(order.bounds).max()) * FEATURES * 4
    for memory in (None, 8 * part, part, -part):
        if memory == -part:  # reading a cut edge's source row apart is cheap: part by part
            monkeypatch.setattr(projected, "ROW_READ_BYTES", 1)
            memory = part
        ranges: list[tuple[int, int]] = []
        cost = EvaluationCost(1, 2, 1 << 40, memory)  # layers that never fit: spilled
        assert cost.spill is (memory is not None)
        ordered = LayerwiseEvaluation(
            adjacency, dict(joint.splits), joint.rows, 64, cost, _counted(order, ranges)
        )
        got = ordered.measure(model, features, device, normalize_features=normalize)
        ordered.close()
        for split in ("val", "test"):
            assert got[split].accuracy == pytest.approx(expected[split].accuracy, abs=1e-12)
            assert got[split].macro_f1 == pytest.approx(expected[split].macro_f1, abs=1e-9)
        # the features read at most once, in node order: (the first layer
        # narrows: projected before aggregating, its products in memory or on
        # disk) in spans of the rows it needs, or part by part, row by row
        assert (len(ranges) > 0) is (projected.ROW_READ_BYTES > 1)
        assert all(lo < hi for lo, hi in ranges)
        assert all(hi <= lo for (_, hi), (lo, _) in zip(ranges, ranges[1:], strict=False))


def _fit(graph: GraphDir, config: NodeTrainConfig) -> tuple[object, NodeTask]:
    task = NodeTask(
        GraphDirFeatureStore(graph),
        GraphDirGraphStore(graph),
        [_split(graph, name) for name in ("train", "val", "test")],
        graph.manifest.num_classes,
    )
    return fit(task, config, None, RunHooks(None, False, None, False, None)), task


def test_validation_and_test_take_one_pass_per_epoch(
    stored: tuple[GraphDir, PartitionedStore],
) -> None:
    """Three epochs: three layer-wise passes, each of validation and test; the
    reported test figures are those of the restored (best validation) model
    measured on its own, as a separate test pass measured them."""
    graph, _ = stored
    config = NodeTrainConfig(**{**SMALL, "epochs": 3}, model="sage", lr=0.02)
    result, task = _fit(graph, config)
    joint = task.joint_evaluation
    assert joint is not None and joint.passes == 3
    assert list(joint.splits) == ["val", "test"]
    assert task.evaluation_ways["test"].endswith("validation and test in one pass")
    model = result.model.eval()  # type: ignore[attr-defined]
    adjacency = Adjacency(np.asarray(graph.indptr), np.asarray(graph.indices))
    alone, _ = choose("test", model, adjacency, _split(graph, "test"), config)
    assert alone is not None
    separate = alone(model, GraphDirFeatureStore(graph), torch.device("cpu"))
    assert result.test_accuracy == separate.accuracy  # type: ignore[attr-defined]
    assert result.test_macro_f1 == pytest.approx(separate.macro_f1, abs=1e-12)  # type: ignore[attr-defined]
    best = result.best_epoch - 1  # type: ignore[attr-defined]
    assert result.val_accuracy[best] == result.best_val_accuracy  # type: ignore[attr-defined]


def test_an_out_of_core_run_evaluates_in_store_order_in_one_pass(
    stored: tuple[GraphDir, PartitionedStore], caplog: pytest.LogCaptureFixture
) -> None:
    """``gnncore train --mode hierbatching`` with exact evaluation: one pass of
    validation and test in the store's order for one epoch (its log line), the
    test accuracy the final model's over every neighbour."""
    graph, store = stored
    config = NodeTrainConfig(**SMALL, mode="hierbatching", mega_batch_parts=2)
    with caplog.at_level(logging.INFO, logger="gnncore.train.node.exact"):
        result = train_graph_dir(
            graph,
            config,
            inputs=RunInputs(store=store.path),
            recording=RunRecording(progress=False),
        )
    passes = [
        r.getMessage() for r in caplog.records if "layer-wise evaluation pass" in r.getMessage()
    ]
    assert len(passes) == 1
    assert passes[0].startswith(
        "layer-wise evaluation pass 1 (val, test); in the partitioned store"
    )
    assert "partitioned store (4 parts)'s order" in result.evaluation["test"]
    model = result.model.eval()
    x = torch.from_numpy(graph.array("features").copy())
    indptr = torch.from_numpy(graph.indptr.astype("int64"))
    sources = torch.from_numpy(graph.indices.astype("int64"))
    targets = torch.repeat_interleave(torch.arange(len(indptr) - 1), indptr.diff())
    with torch.no_grad():
        predicted = model(x, torch.stack([sources, targets])).argmax(dim=-1)
    test = _split(graph, "test")
    labels = torch.from_numpy(graph.array("labels").astype("int64"))
    exact = (predicted[test] == labels[test]).double().mean().item()
    assert result.test_accuracy == pytest.approx(exact, abs=1e-9)


def test_kept_test_metrics_only_for_the_weights_they_were_measured_on() -> None:
    """A later, worse epoch does not replace the kept figures; a model whose
    weights differ from the kept ones (a resumed run's older best) gets none."""
    model = torch.nn.Linear(3, 2)
    kept = KeptTest()
    first, second = ClassificationMetrics(0.5, 0.4, 10), ClassificationMetrics(0.7, 0.6, 10)
    kept.offer(model, ClassificationMetrics(0.8, 0.8, 10), first)
    best = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        model.weight.add_(1.0)
    kept.offer(model, ClassificationMetrics(0.6, 0.6, 10), second)  # worse: not kept
    assert kept.take(model) is None
    model.load_state_dict(best)
    assert kept.take(model) is first


def test_layerwise_runs_build_no_mega_batch_evaluation(
    stored: tuple[GraphDir, PartitionedStore],
) -> None:
    """Exact evaluation: no evaluation batches, the store's order instead; with
    ``eval_fanouts`` the mega-batch batches as before, and no order."""
    graph, store = stored
    exact = NodeTrainConfig(**SMALL, mode="hierbatching", mega_batch_parts=2)
    _, evals = hierbatching_batches(store, exact, eval_batches=False)
    assert evals is None
    data = node_data(graph, exact, store.path)
    assert data.eval_batches is None and data.eval_order is not None
    assert np.array_equal(data.eval_order.node_map, np.asarray(store.array("node_map")))
    sampled = dataclasses.replace(exact, eval_fanouts=(5, 5))
    data = node_data(graph, sampled, store.path)
    assert data.eval_order is None and data.eval_batches is not None
    assert [len(batches) > 0 for batches in data.eval_batches] == [True, True]
