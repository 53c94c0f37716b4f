"""Exact evaluation of out-of-core runs in a partitioned store's order (issue 27,
"the whole chain beyond memory"): the same metrics as the graph's order."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from conftest import planted_graph
from gnncore.outofcore.order import StoreOrder
from gnncore.outofcore.store import PartitionedStore, write_partitioned_store
from gnncore.partition import partition_graph
from gnncore.store import GraphDir, GraphDirFeatureStore
from gnncore.train import NodeTrainConfig, build_model
from gnncore.train.core.evalorder import EvaluationOrder
from gnncore.train.core.layerwise import Adjacency
from gnncore.train.node.exact import EvaluationCost, LayerwiseEvaluation, choose

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
    stored: tuple[GraphDir, PartitionedStore], name: str, normalize: bool
) -> None:
    """Validation and test together, in memory and with the hidden layer on disk
    (each part's rows read once, or, with a part cache too small, row by row):
    the store order gives the graph order's accuracy and macro-F1, and reads
    each part of the features once, in order, when the cache holds a part."""
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
    for memory, whole_parts in ((None, True), (8 * part, True), (part, False)):
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
        bounds = order.bounds.tolist()
        assert ranges == (list(zip(bounds[:-1], bounds[1:], strict=True)) if whole_parts else [])
