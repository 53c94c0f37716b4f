"""Locality-aware sampling in training: biased toward the cached nodes, weighted,
adapted per epoch, and refused where it cannot apply."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import planted_graph
from gnncore.modes import RunInputs, RunRecording, train_graph_dir
from gnncore.plan import PlacementPlan, PlacementSettings, plan_placement
from gnncore.plan.sampling import LasScaleAdapter, locality_aware_sampler
from gnncore.sampler.biased import ScaleController
from gnncore.store import GraphDir
from gnncore.train import ConfigError, NodeTrainConfig
from gnncore.train.core.models import build_sage

pytest.importorskip("gnncore._C")


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    root = tmp_path_factory.mktemp("las")
    graph = planted_graph(root / "g", num_nodes=2000, degree=16)
    plan_placement(graph, root / "plan", PlacementSettings(devices=2, cache_nodes=200, alpha=0.1))
    return GraphDir.open(graph), root / "plan"


def _config(**changes) -> NodeTrainConfig:
    base = dict(epochs=6, hidden=16, batch_size=64, seed=3, fanouts=(4, 3), patience=0)
    return NodeTrainConfig(**{**base, **changes})


def _host_share(result) -> tuple[float, float]:
    host = sum(t["feature_reads_host"] for t in result.throughput)
    total = sum(
        t[f"feature_reads_{tier}"] for t in result.throughput for tier in ("local", "peer", "host")
    )
    return host, host / total


def test_scale_one_trains_exactly_as_the_plain_sampler(planned):
    graph, plan = planned
    plain = train_graph_dir(
        graph, _config(), inputs=RunInputs(placement=plan), recording=RunRecording(progress=False)
    )
    las = train_graph_dir(
        graph,
        _config(locality_aware=True, las_fixed_scale=1.0),
        inputs=RunInputs(placement=plan),
        recording=RunRecording(progress=False),
    )
    assert las.train_loss == plain.train_loss
    assert las.test_accuracy == plain.test_accuracy


def test_a_larger_scale_reads_fewer_rows_from_the_host_at_similar_accuracy(planned):
    graph, plan = planned
    plain = train_graph_dir(
        graph, _config(), inputs=RunInputs(placement=plan), recording=RunRecording(progress=False)
    )
    las = train_graph_dir(
        graph,
        _config(locality_aware=True, las_fixed_scale=8.0),
        inputs=RunInputs(placement=plan),
        recording=RunRecording(progress=False),
    )
    plain_host, plain_share = _host_share(plain)
    las_host, las_share = _host_share(las)
    assert las_host * 1.3 < plain_host and las_share < plain_share - 0.1
    assert las.test_accuracy > plain.test_accuracy - 0.05


def test_adaptive_scale_follows_algorithm_two_and_is_logged(planned):
    graph, plan = planned
    result = train_graph_dir(
        graph,
        _config(locality_aware=True),
        inputs=RunInputs(placement=plan),
        recording=RunRecording(progress=False),
    )
    scales = [t["las_scale"] for t in result.throughput]
    assert scales[0] == 1.0 and all(s >= 1.0 for s in scales)
    for t in result.throughput:  # Algorithm 2 is fed this epoch's own figures
        assert t["loading_share"] == pytest.approx((t["wait_s"] + t["transfer_s"]) / t["train_s"])
    for before, after in zip(result.throughput, result.throughput[1:], strict=False):
        assert after["las_scale"] == before["las_next_scale"]


def test_adapter_doubles_the_scale_while_loading_dominates_and_checkpoints_it(planned):
    graph, plan_dir = planned
    plan = PlacementPlan.open(plan_dir, graph)
    sampler = locality_aware_sampler(
        np.asarray(graph.indptr), np.asarray(graph.indices), plan, (4, 3)
    )
    adapter = LasScaleAdapter(sampler, ScaleController(maxs=8.0))
    busy = {"train_s": 1.0, "wait_s": 0.4, "transfer_s": 0.1}
    assert adapter.adapt(1, busy)["las_next_scale"] == 2.0
    assert adapter.adapt(2, busy)["las_next_scale"] == 4.0
    state = adapter.state_dict()
    fresh = LasScaleAdapter(
        locality_aware_sampler(np.asarray(graph.indptr), np.asarray(graph.indices), plan, (4, 3)),
        ScaleController(maxs=8.0),
    )
    fresh.load_state_dict(state)
    assert fresh.sampler.scale == 4.0
    quiet = {"train_s": 1.0, "wait_s": 0.05, "transfer_s": 0.0}
    assert fresh.adapt(3, quiet)["las_next_scale"] == 3.0  # (4 + 2) / 2
    capped = LasScaleAdapter(
        locality_aware_sampler(np.asarray(graph.indptr), np.asarray(graph.indices), plan, (4, 3)),
        ScaleController(maxs=3.0),
    )
    assert [capped.adapt(e, busy)["las_next_scale"] for e in (1, 2, 3)] == [2.0, 3.0, 3.0]


def test_weighted_sage_equals_sage_without_weights():
    from torch_geometric.nn.models import GraphSAGE

    torch.manual_seed(0)
    weighted = build_sage(8, 16, 3, 2, 0.0)
    torch.manual_seed(0)
    plain = GraphSAGE(8, 16, 2, out_channels=3, dropout=0.0, aggr="mean")
    x, edges = torch.randn(20, 8), torch.randint(0, 20, (2, 60))
    assert torch.equal(weighted(x, edges), plain(x, edges))
    assert torch.equal(weighted(x, edges, edge_weight=torch.ones(60)), plain(x, edges))
    assert not torch.allclose(weighted(x, edges, edge_weight=torch.rand(60)), plain(x, edges))


def test_locality_aware_needs_a_placement_and_an_edge_weighted_model(planned):
    graph, plan = planned
    with pytest.raises(ConfigError, match="placement"):
        train_graph_dir(graph, _config(locality_aware=True), recording=RunRecording(progress=False))
    with pytest.raises(ConfigError, match="model 'sage'"):
        _config(locality_aware=True, model="gcn").validate()
    with pytest.raises(ConfigError, match="num_workers 0"):
        _config(locality_aware=True, num_workers=1).validate()
    with pytest.raises(ConfigError, match="num_workers 0"):
        _config(hdr_part=0, num_workers=2).validate()
    with pytest.raises(ConfigError, match="dense"):
        _config(locality_aware=True, sampler="per-layer").validate()
    with pytest.raises(ConfigError, match="las_fixed_scale"):
        _config(las_fixed_scale=0.5).validate()


def _replication(graph, tmp_path, rate: float):
    from gnncore.partition import partition_graph
    from gnncore.plan import ReplicationSettings, plan_replication

    part = tmp_path / "part"
    if not part.exists():
        partition_graph(graph.path, part, method="random", parts=4, balance=False)
    out = tmp_path / f"rep-{rate}"
    plan_replication(graph.path, part, out, ReplicationSettings(rate=rate))
    return out


def test_hdr_pruning_counts_remote_reads_and_full_replication_reads_none(planned, tmp_path):
    graph, _ = planned
    config = _config(hdr_part=1, fanouts=(4, 3), epochs=3)
    pruned = train_graph_dir(
        graph,
        config,
        inputs=RunInputs(replication=_replication(graph, tmp_path, 0.01)),
        recording=RunRecording(progress=False),
    )
    remote = [t["hdr_remote_ids"] for t in pruned.throughput]
    assert all(r > 0 for r in remote) and all(t["hdr_remote_lists"] > 0 for t in pruned.throughput)
    everywhere = train_graph_dir(
        graph,
        config,
        inputs=RunInputs(replication=_replication(graph, tmp_path, 1.0)),
        recording=RunRecording(progress=False),
    )
    assert [t["hdr_remote_ids"] for t in everywhere.throughput] == [0.0] * 3
    plain = train_graph_dir(
        graph, _config(fanouts=(4, 3), epochs=3), recording=RunRecording(progress=False)
    )
    assert everywhere.train_loss == plain.train_loss  # nothing remote: the plain draws
    with pytest.raises(ConfigError, match="replication plan"):
        train_graph_dir(graph, config, recording=RunRecording(progress=False))
    with pytest.raises(ValueError, match="hdr_part 9"):
        train_graph_dir(
            graph,
            _config(hdr_part=9),
            inputs=RunInputs(replication=_replication(graph, tmp_path, 0.01)),
            recording=RunRecording(progress=False),
        )
