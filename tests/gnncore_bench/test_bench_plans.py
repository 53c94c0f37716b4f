"""gnncore_bench.plan and `gnncore bench plans`: the placement against partition
layouts, HDR by replication rate, and simulate_feature_reads' partition mode."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from conftest import planted_graph, tiny_kg
from gnncore.cli.main import main
from gnncore.plan.simulate import dev_num_from_caches, simulate_feature_reads
from gnncore.sampler import DenseSampler
from gnncore.store import GraphDir
from gnncore_bench.plan import bench_placement, part_caches
from gnncore_bench.plan_replication import bench_replication

pytest.importorskip("gnncore._C")


@pytest.fixture(scope="module")
def skewed_graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 600-node degree-corrected planted-partition graph (heavy-tailed degrees)."""
    from gnncore.synth import SynthSpec, generate_graph

    out = tmp_path_factory.mktemp("skewed") / "graph"
    generate_graph(out, SynthSpec(num_nodes=600, avg_degree=8, num_classes=4, num_features=4))
    return out


@pytest.fixture(scope="module")
def placement_result(skewed_graph: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("placement")
    return bench_placement(skewed_graph, batch_size=16, repeats=2, epochs=2, out_dir=out) | {
        "out": out
    }


def batch_seed(*entropy: int) -> int:
    return int(np.random.SeedSequence(list(entropy)).generate_state(1, np.uint64)[0])


# simulate_feature_reads with owner --------------------------------------------


def test_owner_mode_trains_each_device_on_its_own_nodes(skewed_graph: Path) -> None:
    graph = GraphDir.open(skewed_graph)
    indptr, indices = np.asarray(graph.indptr), np.asarray(graph.indices)
    n = graph.num_nodes
    sampler = DenseSampler((indptr, indices), [4, 3])
    train = np.asarray(graph.split("train"))
    owner = np.arange(n) % 3
    caches = [np.arange(0, 60), np.arange(60, 120), np.arange(120, 180)]
    dev_num = dev_num_from_caches(caches, n, [[0, 1], [2]])
    got = simulate_feature_reads(
        sampler, train, dev_num, batch_size=10, epochs=2, seed=5, owner=owner
    )
    # the documented batching, by hand: device d, epoch e, its permutation and batch seeds
    local, peer, host, batches = (np.zeros(3, dtype=np.int64) for _ in range(4))
    for epoch in range(2):
        for d in range(3):
            mine = np.unique(train)[owner[np.unique(train)] == d]
            order = np.random.default_rng([5, epoch, d]).permutation(mine)
            for i, start in enumerate(range(0, len(order), 10)):
                node = np.asarray(
                    sampler._sample(order[start : start + 10], batch_seed(5, epoch, d, i))[0]
                )
                assert np.all(owner[node[: len(order[start : start + 10])]] == d)
                source = dev_num[d, node]
                batches[d] += 1
                local[d] += np.count_nonzero(source == d)
                host[d] += np.count_nonzero(source < 0)
                peer[d] += np.count_nonzero((source >= 0) & (source != d))
    np.testing.assert_array_equal(got.batches, batches)
    np.testing.assert_array_equal(got.local, local)
    np.testing.assert_array_equal(got.peer, peer)
    np.testing.assert_array_equal(got.host, host)
    assert peer[2] == 0 and peer[:2].sum() > 0  # device 2 has no peer
    # without owner: the data-parallel round-robin, unchanged
    plain = simulate_feature_reads(sampler, train, dev_num, batch_size=10, epochs=2, seed=5)
    assert plain.batches.sum() == 2 * math.ceil(len(np.unique(train)) / 10)


def test_owner_must_match_the_devices(skewed_graph: Path) -> None:
    graph = GraphDir.open(skewed_graph)
    sampler = DenseSampler((np.asarray(graph.indptr), np.asarray(graph.indices)), [2])
    dev_num = dev_num_from_caches([np.arange(5), np.arange(5, 9)], graph.num_nodes)
    train = np.arange(20)
    with pytest.raises(ValueError, match="owner"):
        simulate_feature_reads(sampler, train, dev_num, batch_size=4, owner=np.zeros(3))
    with pytest.raises(ValueError, match="parts"):
        labels = np.full(graph.num_nodes, 2)
        simulate_feature_reads(sampler, train, dev_num, batch_size=4, owner=labels)


# bench_placement ----------------------------------------------------------------


def test_placement_rows_add_up_and_files_are_written(placement_result: dict) -> None:
    r = placement_result
    rows = {row["layout"]: row for row in r["layouts"]}
    assert list(rows) == [
        "placement",
        "random",
        "metis",
        "random, own cache only",
        "metis, own cache only",
    ]
    assert r["train_nodes"] == "train split"
    num_train, slots = r["num_train"], r["settings"]["cache_nodes"]
    assert slots == round(0.1 * r["graph"]["num_nodes"])
    for row in rows.values():
        assert row["reads"] == row["local"] + row["peer"] + row["host"] > 0
        assert row["local_share"] + row["peer_share"] + row["host_share"] == pytest.approx(1.0)
        assert row["host"] == sum(row["host_per_device"])
        assert row["host_max_device"] == max(row["host_per_device"])
        assert row["cached_per_device"] == [slots] * 4
        # alpha = 0: the placement spreads its caches; parts are disjoint anyway
        assert row["distinct_cached_nodes"] == 4 * slots
    # the placement trains data parallel: ceil(train / batch) batches per epoch
    assert rows["placement"]["batches"] == 2 * math.ceil(num_train / 16)
    for name in ("random", "metis"):
        per_part = r["partitions"][name]["train_per_part"]
        assert sum(per_part) == num_train
        expected = [2 * math.ceil(c / 16) for c in per_part]
        assert rows[name]["batches_per_device"] == expected
        # the same batches and caches without peers: peer reads become host reads
        own = rows[f"{name}, own cache only"]
        assert own["peer"] == 0 and own["local"] == rows[name]["local"]
        assert own["host"] == rows[name]["host"] + rows[name]["peer"]
        assert rows["placement"]["host"] < own["host"]
    ratios = r["ratios"]
    assert ratios["host_random_over_placement"] == pytest.approx(
        rows["random"]["host"] / rows["placement"]["host"]
    )
    assert ratios["host_share_metis_over_placement"] == pytest.approx(
        rows["metis"]["host_share"] / rows["placement"]["host_share"]
    )
    times = r["times"]
    assert len(times["placement_runs"]) == 2 and times["metis_seconds"] > 0
    assert ratios["metis_over_placement_seconds"] == pytest.approx(
        times["metis_seconds"] / times["placement_seconds"]
    )
    assert r["machine"]["cpus"] >= 1 and r["machine"]["platform"]
    written = json.loads((r["out"] / "plans_placement.json").read_text())
    assert written["layouts"] == r["layouts"] and "markdown" not in written
    table = (r["out"] / "plans_placement.md").read_text()
    assert table == r["markdown"] and "| metis, own cache only |" in table
    assert "METIS seconds / placement seconds" in table


def test_placement_caches_the_most_estimated_access(skewed_graph: Path) -> None:
    """At alpha = 0 the placement's caches are the top 4B nodes by the estimate, so
    they cover at least the estimated access of any per-part top-B layout."""
    from gnncore.partition.simple import random_assignment
    from gnncore.plan.placement import PlacementSettings, compute_placement

    graph = GraphDir.open(skewed_graph)
    indptr, indices = np.asarray(graph.indptr), np.asarray(graph.indices)
    train = np.asarray(graph.split("train"))
    settings = PlacementSettings(devices=4, cache_nodes=60, alpha=0.0, topology="all")
    placement = compute_placement(indptr, indices, train, settings, 60)
    access = placement.access
    top = np.argsort(-access, kind="stable")[:240]
    assert access[np.unique(placement.caches)].sum() == pytest.approx(access[top].sum())
    for seed in range(3):
        labels = random_assignment(graph.num_nodes, 4, seed)
        caches = part_caches(labels, 4, access, 60)
        for d, cache in enumerate(caches):
            assert np.all(labels[cache] == d) and len(cache) == 60
            rest = np.setdiff1d(np.flatnonzero(labels == d), cache)
            assert access[cache].min() >= access[rest].max()
        assert access[np.concatenate(caches)].sum() <= access[top].sum() + 1e-9


def test_placement_without_metis_or_own_rows(tmp_path: Path) -> None:
    graph = planted_graph(tmp_path / "g", num_nodes=200)
    r = bench_placement(graph, batch_size=32, repeats=1, metis=False, own_cache_rows=False)
    assert [row["layout"] for row in r["layouts"]] == ["placement", "random"]
    assert r["times"]["metis_seconds"] is None
    assert r["ratios"]["host_metis_over_placement"] is None
    assert "METIS" not in r["markdown"].split("| preprocessing")[1]


# bench_replication -----------------------------------------------------------------


def test_replication_ids_fall_with_the_rate(skewed_graph: Path, tmp_path: Path) -> None:
    rates = (0.0, 0.01, 0.05, 0.2)
    r = bench_replication(skewed_graph, rates=rates, batch_size=32, epochs=2, out_dir=tmp_path)
    rows = r["rates"]
    n = r["graph"]["num_nodes"]
    assert [row["rate"] for row in rows] == list(rates)
    assert [row["replicated_nodes"] for row in rows] == [round(x * n) for x in rates]
    first = rows[0]["totals"]
    assert first["hdr"] == first["whole_list"] and rows[0]["memory_increase"] == 0.0
    for before, after in zip(rows, rows[1:]):
        # the batches depend on the partition only: DSP and whole lists stay put
        for key in ("dsp", "whole_list", "remote_nodes", "batches"):
            assert after["totals"][key] == before["totals"][key]
        assert after["totals"]["hdr"] <= before["totals"]["hdr"]
        assert after["totals"]["hdr_pruned"] <= before["totals"]["hdr_pruned"]
        assert after["memory_increase"] >= before["memory_increase"]
    assert rows[-1]["totals"]["hdr"] < first["hdr"]
    for row in rows:
        t = row["totals"]
        assert t["hdr_pruned"] <= t["hdr"]
        assert row["normalised"]["whole_list"] == pytest.approx(t["whole_list"] / t["dsp"])
        # 'in' adjacency: the plan's stored lists are the sampled ones
        assert row["memory_increase"] == pytest.approx(row["plan_memory_increase"])
    table2 = {row["partition"]: row for row in r["table2"]}
    assert list(table2) == ["range", "random", "metis"]
    assert table2["metis"]["dsp"] == first["dsp"]
    assert table2["metis"]["whole_list"] == first["whole_list"]
    for row in table2.values():
        assert row["whole_list_over_dsp"] == pytest.approx(row["whole_list"] / row["dsp"])
    assert table2["metis"]["edge_cut_fraction"] < table2["random"]["edge_cut_fraction"]
    assert table2["metis"]["remote_nodes"] < table2["random"]["remote_nodes"]
    assert json.loads((tmp_path / "plans_replication.json").read_text())["rates"] == rows
    assert "HyDRA Table II" in (tmp_path / "plans_replication.md").read_text()


def test_replication_on_a_graph_without_splits(tmp_path: Path) -> None:
    graph = tiny_kg(tmp_path / "kg")
    r = bench_replication(graph, rates=(0.0, 0.1), fanouts=(3, 2), batch_size=16, direction="both")
    assert r["train_nodes"] == "all nodes (the graph has no train split)"
    assert r["num_train"] == r["graph"]["num_nodes"]
    assert r["rates"][1]["totals"]["hdr"] < r["rates"][0]["totals"]["hdr"]
    with pytest.raises(ValueError, match="no train split"):
        bench_replication(graph, rates=(0.0,), train_nodes="split")


# CLI ---------------------------------------------------------------------------------


def test_cli_plans_placement_and_replication(skewed_graph: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    code = main(
        [
            "bench",
            "plans",
            "placement",
            str(skewed_graph),
            "--out",
            str(out),
            "--batch-size",
            "64",
            "--repeats",
            "1",
            "--cache-fraction",
            "0.05",
            "--json",
            str(tmp_path / "placement.json"),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "| layout | local | peer | host |" in printed
    summary = json.loads((tmp_path / "placement.json").read_text())
    assert summary["settings"]["cache_nodes"] == 30 and summary["settings"]["repeats"] == 1
    assert {"layouts", "ratios", "times", "machine", "graph"} <= set(summary)
    assert json.loads(printed.strip().splitlines()[-1])["ratios"] == summary["ratios"]
    assert (out / "plans_placement.json").is_file() and (out / "plans_placement.md").is_file()

    code = main(
        [
            "bench",
            "plans",
            "replication",
            str(skewed_graph),
            "--out",
            str(out),
            "--rates",
            "0,0.05",
            "--fanouts",
            "5,3",
            "--batch-size",
            "64",
            "--json",
            str(tmp_path / "replication.json"),
        ]
    )
    assert code == 0
    assert "| p_r | replicated nodes | memory increase |" in capsys.readouterr().out
    summary = json.loads((tmp_path / "replication.json").read_text())
    assert [row["rate"] for row in summary["rates"]] == [0.0, 0.05]
    assert summary["settings"]["fanouts"] == [5, 3] and len(summary["table2"]) == 3
    assert (out / "plans_replication.md").is_file()


def test_cli_plans_errors_name_the_problem(skewed_graph: Path, tmp_path: Path, capsys) -> None:
    args = ["bench", "plans", "replication", str(skewed_graph), "--out", str(tmp_path)]
    assert main([*args, "--rates", "0,2"]) == 1
    assert "rates must be" in capsys.readouterr().err
    args = ["bench", "plans", "placement", str(skewed_graph), "--out", str(tmp_path)]
    assert main([*args, "--devices", "0"]) == 1
    assert "devices must be >= 1" in capsys.readouterr().err
