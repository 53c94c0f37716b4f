"""Stage costs (gnncore.usage) and the "auto" memory budget of ingestion and generation."""

import json
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import gnncore.usage as usage_module
from gnncore.io import in_memory_peak_estimate, ingest
from gnncore.progress import reporting, stage
from gnncore.synth import SynthSpec, generate_graph
from gnncore.usage import (
    MIN_DEFAULT_BUDGET,
    PhaseTimer,
    StageUsage,
    default_memory_budget,
    resolve_memory_budget,
    tree_bytes,
)


def test_phase_timer_times_each_stage_and_forwards_it():
    seen = []
    timer = PhaseTimer(seen.append)
    with reporting(timer):
        stage("read")
        time.sleep(0.05)
        stage("write")
        time.sleep(0.02)
        stage("read")  # a stage seen twice adds up
        time.sleep(0.02)
    timer.stop()
    seconds = timer.seconds()
    assert seen == ["read", "write", "read"]
    assert list(seconds) == ["read", "write"]
    assert 0.07 <= seconds["read"] < 1 and 0.02 <= seconds["write"] < 1
    timer.stop()  # idempotent
    assert timer.seconds() == seconds


def test_stage_usage_measures_sizes_and_peak(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.bin").write_bytes(b"x" * 1000)
    (tmp_path / "in" / "sub").mkdir()
    (tmp_path / "in" / "sub" / "b.bin").write_bytes(b"y" * 234)
    (tmp_path / "in" / "link").symlink_to(tmp_path / "in" / "a.bin")  # not counted twice
    with StageUsage() as used:
        held = np.ones(64 << 20, dtype=np.uint8)  # 64 MiB touched
        (tmp_path / "out.bin").write_bytes(held[: 5 << 20].tobytes())
    used.set_inputs([tmp_path / "in", tmp_path / "missing"])
    used.set_outputs([tmp_path / "out.bin"])
    assert used.input_bytes == 1234 == tree_bytes([tmp_path / "in"])
    assert used.output_bytes == 5 << 20
    assert used.peak_rss_bytes >= 64 << 20
    assert used.seconds > 0
    assert set(used.to_dict()) == {
        "seconds", "peak_rss_bytes", "storage_read_bytes", "storage_written_bytes",
        "input_bytes", "output_bytes",
    }  # fmt: skip
    del held


def test_default_budget_is_half_the_available_memory(monkeypatch):
    monkeypatch.setattr(usage_module, "memory_available", lambda: 8 << 30)
    assert default_memory_budget() == 4 << 30
    assert resolve_memory_budget("auto") == 4 << 30
    monkeypatch.setattr(usage_module, "memory_available", lambda: 100 << 20)
    assert default_memory_budget() == MIN_DEFAULT_BUDGET
    monkeypatch.setattr(usage_module, "memory_available", lambda: None)
    assert default_memory_budget() == usage_module.FALLBACK_BUDGET
    assert resolve_memory_budget("1GiB") == 1 << 30
    assert resolve_memory_budget(4096) == 4096
    assert resolve_memory_budget(None) is None and resolve_memory_budget("") is None
    with pytest.raises(ValueError):
        resolve_memory_budget("lots")
    with pytest.raises(ValueError, match="positive"):
        resolve_memory_budget(0)


def write_edges(path, num_edges=3000, num_nodes=400, seed=1):
    rng = np.random.default_rng(seed)
    pairs = rng.integers(0, num_nodes, (num_edges, 2))
    path.write_text("".join(f"{a},{b}\n" for a, b in pairs))
    return path


def snapshot(path):
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.name != "manifest.json"}


def test_auto_takes_the_bounded_path_where_it_applies(tmp_path, monkeypatch):
    source = write_edges(tmp_path / "g.csv")
    ingest(source, tmp_path / "mem", memory_budget=None)
    monkeypatch.setattr(usage_module, "default_memory_budget", lambda: 1 << 30)
    report = ingest(source, tmp_path / "auto")
    # The estimate fits the budget many times over; the bounded path is the faster one.
    assert in_memory_peak_estimate(source, "edgelist") == 8 * source.stat().st_size
    assert report.memory_budget == 1 << 30
    assert {"parse", "sort/dedup", "checksums"} <= set(report.phases)
    assert snapshot(tmp_path / "auto") == snapshot(tmp_path / "mem")
    assert report.input_bytes == source.stat().st_size
    assert report.output_bytes == tree_bytes([tmp_path / "auto"])
    assert report.peak_rss_bytes and report.peak_rss_bytes > 0


def test_in_memory_ingestion_reports_its_phases(tmp_path):
    source = write_edges(tmp_path / "g.csv")
    report = ingest(source, tmp_path / "mem", memory_budget=None)
    assert report.memory_budget is None
    assert "reading edges" in report.phases and "canonical edges" in report.phases
    assert report.output_bytes == tree_bytes([tmp_path / "mem"])


def test_auto_goes_bounded_when_the_estimate_exceeds_the_default(tmp_path, monkeypatch):
    source = write_edges(tmp_path / "g.csv")
    ingest(source, tmp_path / "mem", memory_budget=None)
    budget = 64 << 10  # below the estimate of this 22 KiB file, the bounded path's minimum
    monkeypatch.setattr(usage_module, "default_memory_budget", lambda: budget)
    report = ingest(source, tmp_path / "auto")
    assert report.memory_budget == budget
    assert {"parse", "sort/dedup", "checksums"} <= set(report.phases)
    assert snapshot(tmp_path / "auto") == snapshot(tmp_path / "mem")


def test_auto_warns_when_only_memory_can_take_the_input(tmp_path, monkeypatch):
    source = tmp_path / "g.csv"
    source.write_text("".join(f"n{i},n{(i * 7) % 50}\n" for i in range(2000)))
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("node_id,x\n" + "".join(f"n{i},{i}\n" for i in range(2000)))
    monkeypatch.setattr(usage_module, "default_memory_budget", lambda: 1 << 10)
    with pytest.warns(ResourceWarning, match="ingesting in memory"):
        report = ingest(source, tmp_path / "out", id_type="string", nodes=nodes)
    assert report.memory_budget is None and report.num_nodes == 2000
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an explicit in-memory request warns about nothing
        ingest(source, tmp_path / "out2", id_type="string", nodes=nodes, memory_budget=None)


def test_generation_auto_follows_the_estimate(tmp_path, monkeypatch):
    spec = SynthSpec(num_nodes=2000, avg_degree=6, num_classes=4, num_features=8, seed=3)
    mem = generate_graph(tmp_path / "mem", spec)
    assert mem.memory_budget is None
    monkeypatch.setattr(usage_module, "default_memory_budget", lambda: 256 << 10)
    bounded = generate_graph(tmp_path / "bounded", spec)
    assert bounded.memory_budget == 256 << 10
    assert snapshot(tmp_path / "mem") == snapshot(tmp_path / "bounded")


def test_cli_reports_the_stage_costs(tmp_path):
    source = write_edges(tmp_path / "g.csv")
    summary = tmp_path / "summary.json"
    cmd = [sys.executable, "-m", "gnncore.cli.main", "ingest", str(source), str(tmp_path / "out"),
           "--memory-budget", "none", "--no-progress", "--json", str(summary)]  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    report = json.loads(summary.read_text())
    assert report["memory_budget"] is None
    assert report["input_bytes"] == source.stat().st_size
    assert report["output_bytes"] == tree_bytes([tmp_path / "out"])
    assert report["peak_rss_bytes"] > 0 and "reading edges" in report["phases"]


def test_held_sampler_keeps_a_peak_that_was_freed_between_reads() -> None:
    """What a stage held at its peak, not at its end: a 160 MiB array touched,
    sampled, then freed still shows in the peak, and the peak is gone once the
    sampler stops."""
    assert usage_module.peak_held_bytes() is None  # not started in this process
    usage_module.start_held_sampler(interval=0.02)
    try:
        before = usage_module.held_bytes()
        block = np.ones(160 << 20, dtype=np.uint8)  # every page touched
        time.sleep(0.2)  # several samples
        del block
        after = usage_module.held_bytes()
        peak = usage_module.peak_held_bytes()
        assert peak is not None and peak >= before + (150 << 20) > after
    finally:
        usage_module.stop_held_sampler()
    assert usage_module.peak_held_bytes() is None
