"""gnncore.train.core.layerwise: layer by layer over node batches = the model on the whole graph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import planted_graph
from gnncore.sampler import build_sampler
from gnncore.store import GraphDir, GraphDirFeatureStore, GraphDirGraphStore
from gnncore.train import build_model
from gnncore.train.core.layerwise import Adjacency, block, layerwise_inference
from gnncore.train.core.nodebatches import node_batches


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> GraphDir:
    return GraphDir.open(planted_graph(tmp_path_factory.mktemp("lw") / "g", num_nodes=300))


def _full_edge_index(graph: GraphDir) -> torch.Tensor:
    indptr, indices = np.asarray(graph.indptr), np.asarray(graph.indices, dtype=np.int64)
    dst = np.repeat(np.arange(graph.num_nodes), np.diff(indptr))
    return torch.from_numpy(np.stack([indices, dst]))


def _layerwise(model: torch.nn.Module, graph: GraphDir, batch_size: int) -> torch.Tensor:
    x = torch.from_numpy(np.array(graph.features()))
    adjacency = Adjacency(np.asarray(graph.indptr), graph.indices)
    parts = list(
        layerwise_inference(model, adjacency, lambda n_id: x[n_id], batch_size=batch_size)  # type: ignore[arg-type]
    )
    assert [a for a, _, _ in parts] == sorted(a for a, _, _ in parts)
    assert parts[0][0] == 0 and parts[-1][1] == graph.num_nodes
    return torch.cat([out for _, _, out in parts])


def test_batches_cover_every_node_once_within_the_edge_budget() -> None:
    indptr = np.array([0, 5, 5, 40, 41, 43, 50, 50])  # node 2 alone has 35 in-edges
    batches = list(node_batches(indptr, batch_size=3, max_edges=10))
    assert batches == [(0, 2), (2, 3), (3, 6), (6, 7)]
    covered = np.concatenate([np.arange(a, b) for a, b in batches])
    np.testing.assert_array_equal(covered, np.arange(7))


def test_block_puts_the_targets_first() -> None:
    adjacency = Adjacency.from_edge_index(np.array([[3, 0, 1, 1, 2], [0, 1, 0, 2, 2]]), 4)
    blk = block(adjacency, 0, 2)  # targets 0, 1; self-loop 2 -> 2 dropped
    assert blk.n_id.tolist() == [0, 1, 3]
    edges = {(int(blk.n_id[s]), int(blk.n_id[d])) for s, d in blk.edge_index.t()}
    assert edges == {(3, 0), (1, 0), (0, 1)}


@pytest.mark.parametrize("name", ["sage", "gat", "gin", "gcn"])
def test_layerwise_equals_the_full_graph_forward(graph: GraphDir, name: str) -> None:
    """Every architecture, 2 and 3 layers, small batches: the exact full-graph
    output (GCN included: full-graph degrees)."""
    x = torch.from_numpy(np.array(graph.features()))
    edge_index = _full_edge_index(graph)
    for layers in (2, 3):
        torch.manual_seed(layers)
        heads = 2 if name == "gat" else None
        model = build_model(name, 16, 8, 4, layers, 0.5, heads=heads).eval()
        with torch.no_grad():
            full = model(x, edge_index)
        assert torch.allclose(_layerwise(model, graph, 37), full, atol=1e-5), (name, layers)


@pytest.mark.parametrize("name", ["sage", "gat", "gin"])
def test_layerwise_equals_sampled_evaluation_with_all_neighbours(
    graph: GraphDir, name: str
) -> None:
    """What training's evaluation computes (the NodeLoader over the project's
    sampler with every neighbour, trimmed forward): the same logits."""
    from torch_geometric.loader import NodeLoader

    from gnncore.train.node.loop import _forward

    topology = GraphDirGraphStore(graph)
    torch.manual_seed(0)
    model = build_model(name, 16, 8, 4, 2, 0.0).eval()
    loader = NodeLoader(
        (GraphDirFeatureStore(graph), topology),
        node_sampler=build_sampler("dense", topology, (-1, -1), seed=1),
        input_nodes=torch.arange(graph.num_nodes),
        batch_size=64,
    )
    with torch.no_grad():
        sampled = torch.cat([_forward(model, batch) for batch in loader])
    assert torch.allclose(_layerwise(model, graph, 50), sampled, atol=1e-5)


def test_high_degree_node_and_single_node_batches(tmp_path: Path) -> None:
    """A star (one hub with every other node as neighbour) with an edge budget
    below the hub's degree: the hub gets a batch of its own; outputs unchanged."""
    n = 40
    src = np.concatenate([np.zeros(n - 1, np.int64), np.arange(1, n)])
    dst = np.concatenate([np.arange(1, n), np.zeros(n - 1, np.int64)])
    adjacency = Adjacency.from_edge_index(np.stack([src, dst]), n)
    x = torch.randn(n, 16)
    model = build_model("sage", 16, 8, 3, 2, 0.0).eval()
    with torch.no_grad():
        full = model(x, torch.from_numpy(np.stack([src, dst])))
    parts = layerwise_inference(
        model,  # type: ignore[arg-type]
        adjacency,
        lambda n_id: x[n_id],
        batch_size=8,
        max_edges=5,
    )
    assert torch.allclose(torch.cat([out for _, _, out in parts]), full, atol=1e-5)


def test_link_encoder_outputs_equal_the_evaluation_encoding(tmp_path: Path) -> None:
    """A GNN encoder over learned embeddings, on the training triples' graph:
    :func:`model_outputs` gives what link evaluation's ``encode_all_nodes``
    (every neighbour) gives."""
    from torch_geometric.loader import NodeLoader

    from conftest import tiny_kg
    from gnncore.predict.engine import model_outputs
    from gnncore.store import CSCGraphStore, EmptyFeatureStore
    from gnncore.train import LinkModel, link_splits
    from gnncore.train.link.data import message_passing_csc
    from gnncore.train.link.loop import encode_all_nodes
    from gnncore.train.spec import ModelSpec

    graph = GraphDir.open(tiny_kg(tmp_path / "kg"))
    splits = link_splits(graph)
    indptr, indices = message_passing_csc(splits.train, graph.num_nodes)
    torch.manual_seed(0)
    model = LinkModel(graph.num_nodes, 6, 16, encoder="sage", num_layers=2).eval()
    topology = CSCGraphStore(indptr, indices)
    loader = NodeLoader(
        (EmptyFeatureStore(), topology),
        node_sampler=build_sampler("dense", topology, (-1, -1), seed=1),
        input_nodes=torch.arange(graph.num_nodes),
        batch_size=32,
    )
    with torch.no_grad():
        expected = encode_all_nodes(model, loader, torch.device("cpu"))
    spec = ModelSpec("link", {"num_nodes": graph.num_nodes, "in_channels": 0})
    outputs = model_outputs(
        spec, model, Adjacency(indptr, indices), None, graph.num_nodes, batch_size=20
    )
    in_memory = torch.cat([out for _, _, out in outputs])
    assert torch.allclose(in_memory, expected, atol=1e-5)
    (tmp_path / "layers").mkdir()
    on_disk = model_outputs(
        spec,
        model,
        Adjacency(indptr, indices),
        None,
        graph.num_nodes,
        batch_size=20,
        layer_dir=tmp_path / "layers",
    )
    assert torch.equal(torch.cat([out for _, _, out in on_disk]), in_memory)
    assert list((tmp_path / "layers").iterdir()) == []


@pytest.mark.parametrize("name", ["sage", "gcn", "gat"])
def test_layers_on_disk_give_the_in_memory_rows_bit_for_bit(
    graph: GraphDir, name: str, tmp_path: Path
) -> None:
    """Three layers, the hidden ones through ``.npy`` files (flushed every few
    rows): the same outputs as the in-memory path, and no file left behind."""
    torch.manual_seed(1)
    model = build_model(name, 16, 8, 4, 3, 0.0, heads=2 if name == "gat" else None).eval()
    x = torch.from_numpy(np.array(graph.features()))
    adjacency = Adjacency(np.asarray(graph.indptr), graph.indices)

    def run(**kwargs: object) -> torch.Tensor:
        parts = layerwise_inference(
            model,  # type: ignore[arg-type]
            adjacency,
            lambda n_id: x[n_id],
            batch_size=23,
            **kwargs,  # type: ignore[arg-type]
        )
        return torch.cat([out for _, _, out in parts])

    assert torch.equal(run(layer_dir=tmp_path, sync_bytes=1000), run())
    assert list(tmp_path.iterdir()) == []


def test_a_layer_file_is_a_npy_of_every_nodes_rows_and_goes_when_stopped(
    graph: GraphDir, tmp_path: Path
) -> None:
    """While the last layer runs, the layer before it is ``layer-<l>.npy``:
    float32 ``[N, hidden]``, row ``v`` the layer's output for node ``v``
    (what a one-layer-shorter model outputs before its last step). A consumer
    that stops early leaves no file."""
    torch.manual_seed(2)
    model = build_model("sage", 16, 8, 4, 2, 0.0).eval()
    x = torch.from_numpy(np.array(graph.features()))
    adjacency = Adjacency(np.asarray(graph.indptr), graph.indices)
    parts = layerwise_inference(
        model,  # type: ignore[arg-type]
        adjacency,
        lambda n_id: x[n_id],
        batch_size=64,
        layer_dir=tmp_path,
    )
    next(parts)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["layer-0.npy"]
    rows = np.load(tmp_path / "layer-0.npy")
    assert rows.dtype == np.float32 and rows.shape == (graph.num_nodes, 8)
    with torch.no_grad():
        expected = model.act(model.convs[0](x, _full_edge_index(graph)))  # type: ignore[misc]
    assert torch.allclose(torch.from_numpy(rows), expected, atol=1e-5)
    parts.close()
    assert list(tmp_path.iterdir()) == []


def test_the_budget_decides_where_the_layers_go() -> None:
    """Layers stay in memory while two ``[N, hidden]`` arrays take at most half
    the budget (or without a budget); beyond, they go to disk and a batch's
    block is sized to its share of the budget, nodes and edges in the graph's
    ratio."""
    from gnncore.train.core.layerstore import (
        BATCH_ENTRIES_PER_ITEM,
        BATCH_SHARE,
        MIN_MEMORY_BUDGET,
        plan_inference,
    )

    widths = (512, 256, 256, 8)  # 3 layers: two 256-wide arrays held at once
    n = 1_000_000
    held = 2 * n * 256 * 4
    assert not plan_inference(n, widths, 3, 4096, None).spill
    roomy = plan_inference(n, widths, 3, 4096, 2 * held)
    assert not roomy.spill and (roomy.batch_size, roomy.max_edges) == (4096, 64 * 4096)
    tight = plan_inference(n, widths, 3, 4096, 256 << 20, num_edges=10 * n)
    assert tight.spill and tight.layer_bytes == held
    assert 1 <= tight.batch_size <= 4096 and 9 <= tight.max_edges / tight.batch_size <= 11
    items = tight.batch_size + tight.max_edges
    assert BATCH_ENTRIES_PER_ITEM * 4 * 512 * items <= (256 << 20) * BATCH_SHARE
    assert not plan_inference(n, (512, 8), 1, 4096, 256 << 20).spill  # no hidden layer
    with pytest.raises(ValueError, match="at least"):
        plan_inference(n, widths, 3, 4096, MIN_MEMORY_BUDGET - 1)
