"""``bench_out_of_core``: each training mode in its own limited process, one report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import planted_graph
from gnncore.sizes import parse_size
from gnncore_bench.limits import cgroup_available
from gnncore_bench.outofcore import bench_out_of_core, choose_partitioner, prepare_store

WHY_NOT = cgroup_available()


def test_two_modes_report_sane_figures(tmp_path: Path) -> None:
    graph = planted_graph(tmp_path / "graph", num_nodes=1200, features=32)
    out = tmp_path / "out"
    result = bench_out_of_core(
        graph,
        out,
        parse_size("2GiB"),
        1,
        modes=("mmap", "hierbatching"),
        parts=4,
        train_args=["--fanouts", "5,5", "--batch-size", "128", "--hidden", "16"],
        timeout=300,
        bandwidth_probe_bytes=16 << 20,
    )
    assert "| mmap |" in result.pop("markdown")
    saved = json.loads((out / "out_of_core.json").read_text())
    markdown = (out / "out_of_core.md").read_text()
    assert "| hierbatching |" in markdown and "speedup vs mmap" in markdown
    assert saved["budget_bytes"] == parse_size("2GiB")
    assert saved["limited"] == (WHY_NOT is None)
    assert saved["store"]["method"] == "metis" and saved["store"]["parts"] == 4
    assert saved["sequential_read"]["bytes_per_s"] > 0
    for mode in ("mmap", "hierbatching"):
        res = saved["modes"][mode]
        assert res["status"] == "ok", res
        assert not res["killed_for_memory"]
        assert res["epoch_seconds"] > 0
        assert saved["epoch_seconds"][mode] == res["epoch_seconds"]
        assert res["epoch_source"].startswith("per-epoch MLflow history")
        assert res["bytes_read"] >= 0
        assert 0.0 <= res["test_accuracy"] <= 1.0
        assert saved["test_accuracy"][mode] == res["test_accuracy"]
        assert res["peak_rss_bytes"] > 0
        assert res["compute_s"] > 0 and res["sample_s"] >= 0
        assert res["speedup_vs_mmap"] > 0
    assert saved["speedup_vs_mmap"]["mmap"] == 1.0
    assert saved["modes"]["hierbatching"]["load_s"] >= 0
    hb = saved["modes"]["hierbatching"]
    assert hb["epoch_bytes_read_store"] > 0
    # Its reads are timed apart from building G_cache: a rate no lower than the
    # whole load's, put against the disk's sequential bandwidth.
    assert 0 < hb["epoch_read_seconds_store"] <= hb["load_s"]
    assert hb["store_read_bytes_per_s"] == pytest.approx(
        hb["epoch_bytes_read_store"] / hb["epoch_read_seconds_store"]
    )
    assert hb["store_read_fraction_of_sequential"] == pytest.approx(
        hb["store_read_bytes_per_s"] / saved["sequential_read"]["bytes_per_s"]
    )
    assert saved["modes"]["mmap"]["store_read_bytes_per_s"] is None
    assert "store reads MiB/s" in markdown
    # The store is reused by a second run over the same graph and settings.
    again = prepare_store(graph, out / "work", parts=4, static_fraction=0.01)
    assert again["reused"] is True and again["store"] == saved["store"]["store"]


@pytest.mark.skipif(WHY_NOT is not None, reason=f"no memory cgroup: {WHY_NOT}")
def test_in_memory_over_budget_is_reported_killed(tmp_path: Path) -> None:
    # 20,000 x 1,024 float32 features: 78 MiB, more than the 64 MiB budget.
    graph = planted_graph(tmp_path / "graph", num_nodes=20_000, features=1024)
    result = bench_out_of_core(
        graph,
        tmp_path / "out",
        parse_size("64MiB"),
        1,
        modes=("in_memory",),
        timeout=300,
        bandwidth_probe_bytes=16 << 20,
    )
    res = result["modes"]["in_memory"]
    assert res["killed_for_memory"] is True
    assert res["status"] == "killed for memory"
    assert res["epoch_seconds"] is None and res["speedup_vs_mmap"] is None
    assert result["killed_for_memory"] == {"in_memory": True}
    assert res["peak_memory_bytes"] <= parse_size("64MiB")
    assert "killed for memory" in (tmp_path / "out" / "out_of_core.md").read_text()
    # With a limit of its own it runs as the accuracy reference of the others (on a
    # small graph: what is asserted is the limit and the report, not the training).
    small = planted_graph(tmp_path / "small", num_nodes=1200, features=32)
    result = bench_out_of_core(
        small,
        tmp_path / "out2",
        parse_size("64MiB"),
        1,
        modes=("in_memory",),
        in_memory_budget_bytes=parse_size("2GiB"),
        train_args=["--fanouts", "5,5", "--hidden", "16"],
        timeout=300,
        bandwidth_probe_bytes=16 << 20,
    )
    res = result["modes"]["in_memory"]
    assert res["status"] == "ok" and res["budget_bytes"] == parse_size("2GiB")
    assert res["accuracy_vs_in_memory"] == 0.0
    assert "| in_memory (limit 2.0 GiB) | ok |" in result["markdown"]


def test_rejects_unknown_modes(tmp_path: Path) -> None:
    graph = planted_graph(tmp_path / "graph", num_nodes=200)
    with pytest.raises(ValueError, match="modes"):
        bench_out_of_core(graph, tmp_path / "out", parse_size("1GiB"), 1, modes=("disk",))


def test_partitioner_choice_follows_memory() -> None:
    assert choose_partitioner(1_000_000, available=16 << 30) == "metis"
    assert choose_partitioner(1_000_000_000, available=16 << 30) == "grem"
