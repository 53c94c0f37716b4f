"""Placement and replication plans: the paper's worked example, plan directories,
lookups, the CLI, and one-line errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gnncore.cli.main import main
from gnncore.errors import InputError
from gnncore.partition import partition_graph
from gnncore.plan import (
    PlacementPlan,
    PlacementSettings,
    PlanError,
    ReplicationPlan,
    ReplicationSettings,
    plan_placement,
    plan_replication,
)
from gnncore.plan.lookup import lookup_tables
from gnncore.plan.placement import peer_groups
from gnncore.plan.replication import replicated_nodes
from gnncore.store import create_graph_dir
from gnncore.store.manifest import MANIFEST_FILE

pytest.importorskip("gnncore._C")

#: Song & Jiang's worked example: undirected edges, all six nodes training.
EXAMPLE_EDGES = [(0, 1), (1, 2), (1, 3), (2, 3), (2, 4), (2, 5)]


def write_example(out: Path, features: int = 3) -> Path:
    src, dst = (np.array(c) for c in zip(*EXAMPLE_EDGES, strict=True))
    with create_graph_dir(out, name="example") as w:
        w.write_topology(6, src, dst, directed=False)
        w.save_array("features", np.arange(6 * features, dtype=np.float32).reshape(6, features))
        w.num_features = features
        w.save_array("labels", np.array([0, 1, 0, 1, 0, 1]))
        w.num_classes = 2
        w.save_splits([0, 1, 2, 3], [4], [5])
    return out


def example_settings(**changes) -> PlacementSettings:
    base = dict(devices=2, cache_nodes=2, alpha=0.3, layers=2, estimator="reach", train_nodes="all")
    return PlacementSettings(**{**base, **changes})


def write_planted(out: Path, seed: int = 0) -> Path:
    """A 400-node graph with a few hubs (a skewed degree distribution)."""
    rng = np.random.default_rng(seed)
    n = 400
    src = rng.integers(0, n, 1600)
    dst = np.where(rng.random(1600) < 0.3, rng.integers(0, 8, 1600), rng.integers(0, n, 1600))
    keep = src != dst
    pairs = np.unique(np.sort(np.stack([src[keep], dst[keep]], 1), axis=1), axis=0)
    with create_graph_dir(out, name="planted") as w:
        w.write_topology(n, pairs[:, 0], pairs[:, 1], directed=False)
        w.save_splits(np.arange(0, 200), np.arange(200, 300), np.arange(300, 400))
    return out


def test_worked_example_places_nodes_as_the_paper(tmp_path):
    graph = write_example(tmp_path / "g")
    report = plan_placement(graph, tmp_path / "plan", example_settings())
    plan = PlacementPlan.open(tmp_path / "plan")
    assert plan.access().tolist() == [4, 6, 6, 6, 5, 5]
    assert plan.caches().tolist() == [[1, 3], [4, 2]]
    # The stored lookups: each device's ids ascending and their cache rows.
    assert plan.cached_ids().tolist() == [[1, 3], [2, 4]]
    assert plan.cached_rows().tolist() == [[0, 1], [1, 0]]
    source, row = plan.resolve(0, np.arange(6))
    # Device 0 holds 1 and 3, reads 4 and 2 from device 1, 0 and 5 from the host.
    assert source.tolist() == [-1, 0, 1, 0, 1, -1]
    assert row.tolist() == [-1, 0, 1, 1, 0, -1]
    assert plan.resolve(1, np.arange(6))[0].tolist() == [-1, 0, 1, 0, 1, -1]
    assert plan.readable(0).tolist() == [1, 2, 3, 4]
    assert plan.peer_ids(0).tolist() == [2, 4]
    # Cost model (p = f / 6): a peer read costs alpha, a host read 1. Device 0
    # reads 2 and 4 from its peer, device 1 reads 1 and 3; both read 0 and 5 from the host.
    expected = [(0.3 * (6 + 5) + (4 + 5)) / 6, (0.3 * (6 + 6) + (4 + 5)) / 6]
    assert report.metrics["predicted_cost"] == pytest.approx(expected)


def test_worked_example_through_the_cli(tmp_path):
    graph = write_example(tmp_path / "g")
    out = tmp_path / "summary.json"
    argv = ["plan", "placement", str(graph), str(tmp_path / "plan"), "--devices", "2"]
    argv += ["--cache-nodes", "2", "--alpha", "0.3", "--layers", "2", "--estimator", "reach"]
    argv += ["--train-nodes", "all", "--json", str(out), "--no-progress"]
    assert main(argv) == 0
    summary = json.loads(out.read_text())
    assert summary["devices"] == [[1, 3], [4, 2]] and summary["devices_cut"] is False
    assert len(summary["predicted_cost"]) == 2 and summary["seconds"] >= 0


def test_cli_summary_cuts_long_id_lists(tmp_path, monkeypatch):
    from gnncore.cli import plan as plan_cli

    monkeypatch.setattr(plan_cli, "SUMMARY_IDS", 1)
    graph = write_example(tmp_path / "g")
    out = tmp_path / "summary.json"
    argv = ["plan", "placement", str(graph), str(tmp_path / "plan"), "--devices", "2"]
    argv += ["--cache-nodes", "2", "--alpha", "0.3", "--layers", "2", "--estimator", "reach"]
    argv += ["--train-nodes", "all", "--json", str(out), "--no-progress"]
    assert main(argv) == 0
    summary = json.loads(out.read_text())
    assert summary["devices"] == [[1], [4]] and summary["devices_cut"] is True


def test_topologies_group_devices():
    assert peer_groups(4, "all") == [[0, 1, 2, 3]]
    assert peer_groups(4, "pairs") == [[0, 1], [2, 3]]
    assert peer_groups(3, "none") == [[0], [1], [2]]


def test_rule_one_without_peers_caches_the_hottest_everywhere(tmp_path):
    graph = write_example(tmp_path / "g")
    plan_placement(graph, tmp_path / "p", example_settings(devices=3, topology="none"))
    caches = PlacementPlan.open(tmp_path / "p").caches()
    assert caches.tolist() == [[1, 2]] * 3
    # With nothing shared, no device reads a peer.
    plan = PlacementPlan.open(tmp_path / "p")
    for d in range(3):
        assert set(plan.resolve(d, np.arange(6))[0].tolist()) == {-1, d}


def test_nvlink_pairs_share_within_the_pair_only(tmp_path):
    graph = write_example(tmp_path / "g")
    plan_placement(graph, tmp_path / "p", example_settings(devices=4, topology="pairs"))
    plan = PlacementPlan.open(tmp_path / "p")
    assert plan.caches().tolist() == [[1, 3], [4, 2], [1, 3], [4, 2]]
    assert plan.groups == [[0, 1], [2, 3]]
    assert set(plan.resolve(0, np.arange(6))[0].tolist()) <= {-1, 0, 1}
    assert set(plan.resolve(3, np.arange(6))[0].tolist()) <= {-1, 2, 3}


def test_lookup_prefers_own_cache_then_lowest_peer():
    caches = np.array([[5, 1], [1, 2], [2, 3]])
    dev_num, buf_pos = lookup_tables(caches, 6, [[0, 1, 2]])
    # Node 1 is cached by devices 0 and 1: device 2 reads it from device 0.
    assert dev_num[2].tolist() == [-1, 0, 2, 2, -1, 0]
    assert buf_pos[2].tolist() == [-1, 1, 0, 1, -1, 0]
    assert dev_num[0].tolist() == [-1, 0, 1, 2, -1, 0]


def test_plan_of_another_graph_is_refused(tmp_path):
    graph = write_example(tmp_path / "g")
    plan_placement(graph, tmp_path / "plan", example_settings())
    other = write_example(tmp_path / "other", features=4)
    from gnncore.store import GraphDir

    with pytest.raises(InputError, match="another graph"):
        PlacementPlan.open(tmp_path / "plan", GraphDir.open(other))
    # The same graph is accepted.
    PlacementPlan.open(tmp_path / "plan", GraphDir.open(graph))


def test_reuse_keeps_the_plan_and_new_settings_replace_it(tmp_path):
    graph = write_example(tmp_path / "g")
    first = plan_placement(graph, tmp_path / "plan", example_settings())
    again = plan_placement(graph, tmp_path / "plan", example_settings(), reuse=True)
    assert again.reused and again.stage_key == first.stage_key
    changed = plan_placement(graph, tmp_path / "plan", example_settings(alpha=0.9), reuse=True)
    assert not changed.reused and changed.stage_key != first.stage_key


def test_cache_bytes_count_feature_rows(tmp_path):
    graph = write_example(tmp_path / "g", features=3)
    plan_placement(graph, tmp_path / "p", example_settings(cache_nodes=None, cache_bytes=25))
    assert PlacementPlan.open(tmp_path / "p").caches().shape == (2, 2)  # 25 // 12


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"devices": 0}, "devices must be >= 1"),
        ({"cache_nodes": 7}, "cache_nodes 7 exceeds the graph's 6 nodes"),
        ({"alpha": -1.0}, "alpha must be"),
        ({"layers": -1}, "layers must be >= 0"),
    ],
)
def test_bad_placement_settings_name_the_argument(tmp_path, changes, message):
    graph = write_example(tmp_path / "g")
    with pytest.raises(PlanError, match=message):
        plan_placement(graph, tmp_path / "plan", example_settings(**changes))
    assert not (tmp_path / "plan").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["g"]  # no temporary left behind


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--devices", "0", "--cache-nodes", "2"], "--devices must be >= 1, got 0"),
        (["--devices", "2", "--cache-nodes", "99"], "--cache-nodes 99 exceeds"),
    ],
)
def test_cli_errors_are_one_line_naming_the_flag(tmp_path, capsys, flags, message):
    graph = write_example(tmp_path / "g")
    code = main(["plan", "placement", str(graph), str(tmp_path / "plan"), *flags])
    err = capsys.readouterr().err.strip()
    assert code == 1 and "\n" not in err and message in err
    assert not (tmp_path / "plan").exists()


def test_split_train_nodes_need_a_split_and_auto_falls_back_to_all(tmp_path):
    with create_graph_dir(tmp_path / "g", name="nosplit") as w:
        w.write_topology(3, np.array([0, 1]), np.array([1, 2]), directed=False)
    settings = PlacementSettings(devices=1, cache_nodes=1, train_nodes="split")
    with pytest.raises(PlanError, match="no train split"):
        plan_placement(tmp_path / "g", tmp_path / "p", settings)
    report = plan_placement(tmp_path / "g", tmp_path / "p", PlacementSettings(1, cache_nodes=1))
    assert report.metrics["num_train_nodes"] == 3  # auto: every node
    with create_graph_dir(tmp_path / "e", name="empty-split") as w:
        w.write_topology(3, np.array([0, 1]), np.array([1, 2]), directed=False)
        w.save_splits([], [0], [1, 2])
    with pytest.raises(PlanError, match="empty"):
        plan_placement(tmp_path / "e", tmp_path / "q", PlacementSettings(1, cache_nodes=1))


def test_a_plan_never_replaces_its_input_or_an_unrelated_directory(tmp_path):
    graph = write_example(tmp_path / "g")
    with pytest.raises(InputError, match="the input"):
        plan_placement(graph, graph, example_settings())
    with pytest.raises(InputError, match="the input"):
        plan_placement(graph, tmp_path, example_settings())  # holds the graph
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_bytes(b"x")
    with pytest.raises(InputError, match="holds no plan"):
        plan_placement(graph, tmp_path / "photos", example_settings())
    assert (graph / MANIFEST_FILE).is_file() and (tmp_path / "photos" / "cat.jpg").is_file()


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m["files"].update({"cached_ids.npy": 3}),
        lambda m: m["files"].pop("cached_rows.npy"),
        lambda m: m.pop("peer_groups"),
        lambda m: m.pop("num_nodes"),
        lambda m: m["files"]["caches.npy"].pop("dtype"),
    ],
)
def test_a_malformed_plan_manifest_is_a_one_line_input_error(tmp_path, edit):
    graph = write_example(tmp_path / "g")
    plan_placement(graph, tmp_path / "plan", example_settings())
    manifest = json.loads((tmp_path / "plan" / MANIFEST_FILE).read_text())
    edit(manifest)
    (tmp_path / "plan" / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="manifest"):
        PlacementPlan.open(tmp_path / "plan")


def test_presample_settings_are_checked(tmp_path, capsys):
    graph = write_example(tmp_path / "g")
    argv = ["plan", "placement", str(graph), str(tmp_path / "p"), "--cache-nodes", "2"]
    for flags, message in (
        (["--presample-epochs", "0"], "--presample-epochs must be >= 1"),
        (["--fanouts", "5"], "--fanouts needs one fan-out per layer (2)"),
        (["--estimator", "presample", "--layers", "0"], "--layers must be >= 1"),
    ):
        assert main([*argv, *flags]) == 1
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err


def test_replicated_nodes_are_the_top_degrees_ties_to_smaller_ids():
    degree = np.array([3, 5, 5, 1, 0, 5])
    assert replicated_nodes(degree, 0.5).tolist() == [1, 2, 5]
    assert replicated_nodes(degree, 1 / 3).tolist() == [1, 2]
    assert replicated_nodes(degree, 0.0).tolist() == []


def test_replication_plan_memory_increase(tmp_path):
    graph = write_planted(tmp_path / "g")
    partition_graph(graph, tmp_path / "part", method="random", parts=4, balance=False)
    report = plan_replication(
        graph, tmp_path / "part", tmp_path / "rep", ReplicationSettings(rate=0.02)
    )
    plan = ReplicationPlan.open(tmp_path / "rep")
    replicated = np.asarray(plan.replicated())
    assert len(replicated) == 8 == report.metrics["replicated_nodes"]
    from gnncore.store import GraphDir

    g = GraphDir.open(graph)
    degree = np.diff(np.asarray(g.indptr))
    # The hubs 0..7 are the highest-degree nodes; each list is stored M-1 more times.
    assert sorted(replicated.tolist()) == list(range(8))
    expected = 3 * degree[replicated].sum() / degree.sum()
    assert report.metrics["memory_increase"] == pytest.approx(expected)
    # Labels are the partition's, unchanged.
    from gnncore.partition import PartitionDir

    assert np.array_equal(plan.owner(), PartitionDir.open(tmp_path / "part").assignment())


def test_replication_with_group_size_balances_degree_sums(tmp_path):
    graph = write_planted(tmp_path / "g")
    partition_graph(graph, tmp_path / "part", method="range", parts=4, balance=False)
    plan_replication(
        graph, tmp_path / "part", tmp_path / "rep", ReplicationSettings(rate=0.02, group_size=4)
    )
    plan = ReplicationPlan.open(tmp_path / "rep")
    from gnncore.store import GraphDir

    degree = np.diff(np.asarray(GraphDir.open(graph).indptr))
    owner = np.asarray(plan.owner())
    rest = ~plan.replicated_mask()
    sums = np.bincount(owner[rest], weights=degree[rest], minlength=4)
    assert sums.max() - sums.min() <= 4 * degree[rest].max()
    assert set(owner[~rest].tolist()) == {0, 1, 2, 3}  # the 8 hubs, round-robin


@pytest.mark.parametrize("rate", [-0.1, 1.5, float("nan")])
def test_replication_rate_outside_unit_interval_is_refused(tmp_path, capsys, rate):
    graph = write_planted(tmp_path / "g")
    partition_graph(graph, tmp_path / "part", method="random", parts=2, balance=False)
    argv = ["plan", "replication", str(graph), str(tmp_path / "part"), str(tmp_path / "rep")]
    assert main([*argv, "--rate", str(rate)]) == 1
    err = capsys.readouterr().err.strip()
    assert "--rate must be in [0, 1]" in err and "\n" not in err
    assert not (tmp_path / "rep").exists()


def test_replication_of_a_partition_of_another_graph_is_refused(tmp_path):
    graph = write_planted(tmp_path / "g")
    other = write_planted(tmp_path / "other", seed=1)
    partition_graph(other, tmp_path / "part", method="random", parts=2, balance=False)
    with pytest.raises(InputError, match="different version"):
        plan_replication(graph, tmp_path / "part", tmp_path / "rep", ReplicationSettings(0.1))
    assert not (tmp_path / "rep").exists()


def test_replication_cli_writes_the_summary(tmp_path):
    graph = write_planted(tmp_path / "g")
    partition_graph(graph, tmp_path / "part", method="hydra", parts=4, balance=False)
    out = tmp_path / "s.json"
    argv = ["plan", "replication", str(graph), str(tmp_path / "part"), str(tmp_path / "rep")]
    assert main([*argv, "--rate", "0.01", "--json", str(out), "--no-progress"]) == 0
    summary = json.loads(out.read_text())
    assert summary["replicated_nodes"] == 4 and summary["memory_increase"] > 0
    manifest = json.loads((tmp_path / "rep" / MANIFEST_FILE).read_text())
    assert manifest["partition_method"] == "hydra"


def _rewrite(plan_dir: Path, name: str, array: np.ndarray) -> None:
    """Replace ``name.npy`` keeping the manifest consistent (size, dtype, shape)."""
    np.save(plan_dir / f"{name}.npy", array)
    manifest = json.loads((plan_dir / MANIFEST_FILE).read_text())
    entry = manifest["files"][f"{name}.npy"]
    entry.update(
        bytes=(plan_dir / f"{name}.npy").stat().st_size,
        dtype=array.dtype.str,
        shape=list(array.shape),
    )
    (plan_dir / MANIFEST_FILE).write_text(json.dumps(manifest))


def test_placement_check_finds_a_plan_over_budget_or_with_broken_lookups(tmp_path):
    from gnncore.plan.placement import placement_problems
    from gnncore.store import GraphDir

    graph = GraphDir.open(write_example(tmp_path / "g"))
    plan_placement(graph.path, tmp_path / "plan", example_settings())
    assert placement_problems(PlacementPlan.open(tmp_path / "plan"), graph) == []
    # Three slots per device where the recorded settings allow two.
    _rewrite(tmp_path / "plan", "caches", np.array([[1, 3, 0], [4, 2, 5]]))
    problems = placement_problems(PlacementPlan.open(tmp_path / "plan"), graph)
    assert any("over the budget of 2" in p for p in problems)
    assert any("lookups do not match" in p for p in problems)
    # A node cached twice on one device.
    _rewrite(tmp_path / "plan", "caches", np.array([[1, 1], [4, 2]]))
    problems = placement_problems(PlacementPlan.open(tmp_path / "plan"), graph)
    assert any("caches a node twice" in p for p in problems)


def test_replication_check_finds_another_partition_and_changed_owners(tmp_path):
    from gnncore.partition import PartitionDir
    from gnncore.plan.replication import replication_problems
    from gnncore.store import GraphDir

    graph = GraphDir.open(write_planted(tmp_path / "g"))
    partition_graph(graph.path, tmp_path / "part", method="random", parts=4, balance=False)
    plan_replication(graph.path, tmp_path / "part", tmp_path / "rep", ReplicationSettings(0.02))
    plan = ReplicationPlan.open(tmp_path / "rep")
    part = PartitionDir.open(tmp_path / "part")
    assert replication_problems(plan, graph, part) == []
    owner = np.asarray(plan.owner()).copy()
    owner[0] = (owner[0] + 1) % 4
    _rewrite(tmp_path / "rep", "owner", owner)
    assert replication_problems(ReplicationPlan.open(tmp_path / "rep"), graph, part) == [
        "owners differ from the partition's labels"
    ]
    partition_graph(graph.path, tmp_path / "part", method="random", parts=4, seed=7)
    problems = replication_problems(plan, graph, PartitionDir.open(tmp_path / "part"))
    assert problems and "another version" in problems[0]
