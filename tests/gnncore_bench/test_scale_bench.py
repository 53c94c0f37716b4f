"""``gnncore bench scale``: CSV → ingest → partitioners, each stage a limited process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path

import polars as pl
import pytest

from gnncore.sizes import parse_size
from gnncore.synth import SynthSpec, write_edge_csv
from gnncore_bench import scale as scale_bench
from gnncore_bench import scale_disk
from gnncore_bench.limits import cgroup_available
from gnncore_bench.scale import Method, bench_scale, stage_budgets
from gnncore_bench.scale_disk import (
    DISK_MARGIN,
    csv_bytes,
    default_nodes,
    estimate_disk,
    largest_fitting,
)

WHY_NOT = cgroup_available()


def test_end_to_end_at_tiny_scale(tmp_path: Path) -> None:
    out, work, summary = tmp_path / "out", tmp_path / "work", tmp_path / "scale.json"
    subprocess.run(
        [sys.executable, "-m", "gnncore.cli.main", "bench", "scale", "--edges", "20000"]
        + ["--budget", "1GiB", "--methods", "grem:0.1,metis", "--parts", "4"]
        + ["--out", str(out), "--work-dir", str(work), "--json", str(summary)],
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    result = json.loads(summary.read_text())
    assert result == json.loads((out / "scale.json").read_text())
    assert result["finished"] is True
    assert result["num_edges"] == 20000 and result["num_nodes"] == 2000
    assert result["limited"] == (WHY_NOT is None)
    assert result["limit_reason"] == WHY_NOT
    assert result["stage_budgets"] == stage_budgets(parse_size("1GiB"))
    stages = {s["stage"]: s for s in result["stages"]}
    assert list(stages) == ["csv", "ingest", "grem:0.1", "metis"]
    for name, stage in stages.items():
        assert stage["status"] == "ok", (name, stage)
        assert stage["limited"] == (WHY_NOT is None)
        assert stage["seconds"] > 0 and stage["peak_rss_bytes"] > 0
        assert stage["output_bytes"] > 0
        assert stage["peak_disk_bytes"] >= stage["output_bytes"]
        assert (out / "logs" / f"{name.replace(':', '-')}.stderr").is_file()
        if WHY_NOT is None:
            assert 0 < stage["cgroup_peak_bytes"] <= parse_size("1GiB")
    # the partition stage's log says where its time went: a line per bisection
    grem_log = (out / "logs" / "grem-0.1.stderr").read_text()
    assert grem_log.count("grem: bisection") == 3 and "final refinement" in grem_log
    assert "grem: seed plan of" in grem_log
    # the stages' own figures: the CSV holds every generated edge, ingestion read them all
    assert stages["csv"]["output_bytes"] == pytest.approx(csv_bytes(20000, 2000), rel=0.1)
    ingest = stages["ingest"]["summary"]
    assert ingest["num_input_edges"] == 20000
    assert ingest["memory_budget"] == parse_size("512MiB")
    assert 0 < ingest["num_canonical_edges"] <= 20000
    for method in ("grem:0.1", "metis"):
        part = stages[method]["summary"]
        assert 0 < part["edge_cut_fraction"] < 1
        assert 1 <= part["max_part_ratio"] <= 1.05
        assert "--parts" in stages[method]["cmd"]
    assert "--chunk" in stages["grem:0.1"]["cmd"]
    assert stages["metis"]["summary"]["edge_cut_fraction"] < 0.5
    # everything written under the work dir is gone
    assert list(work.iterdir()) == []
    markdown = (out / "scale.md").read_text()
    assert "| stage | status | seconds | peak RSS |" in markdown
    for name in stages:
        assert f"| {name} | ok |" in markdown
    assert ("limit NOT enforced" in markdown) == (WHY_NOT is not None)


def test_a_failing_stage_is_reported_and_the_rest_skipped_and_cleaned(tmp_path: Path) -> None:
    out, work = tmp_path / "out", tmp_path / "work"
    # 8 nodes cannot hold the generator's 16 communities: the CSV stage fails
    result = bench_scale(out, work, parse_size("1GiB"), 100, nodes=8, methods=["metis"])
    statuses = [(s["stage"], s["status"]) for s in result["stages"]]
    assert statuses == [
        ("csv", "failed (exit 1)"),
        ("ingest", "skipped (no CSV)"),
        ("metis", "skipped (no graph)"),
    ]
    assert "bad generator setting" in result["stages"][0]["error"]
    assert list(work.iterdir()) == []
    assert "| ingest | skipped (no CSV) |" in (out / "scale.md").read_text()


Usage = namedtuple("Usage", "total used free")


def test_refuses_a_run_the_disk_cannot_hold(tmp_path: Path, monkeypatch) -> None:
    free = 50 << 30
    monkeypatch.setattr(scale_bench.shutil, "disk_usage", lambda _: Usage(free, 0, free))
    with pytest.raises(ValueError, match=r"needs about .* and 50.0 GiB is free \(of which 4.0"):
        bench_scale(tmp_path / "o", tmp_path / "w", parse_size("8GiB"), 10**9)
    assert list(tmp_path.iterdir()) == []  # nothing created


def test_largest_fitting_is_the_last_million_that_fits() -> None:
    free = 69 << 30
    best = largest_fitting(free)
    assert best % 10**6 == 0 and best > 0
    room = free - scale_disk.DISK_RESERVE
    assert scale_disk.disk_room(free) == room
    assert scale_disk.disk_room(10 << 30) == 9 << 30  # a tenth when that is less
    assert estimate_disk(best, default_nodes(best)) <= room
    more = best + 10**6
    assert estimate_disk(more, default_nodes(more)) > room
    assert largest_fitting(free, keep=True, methods=4) <= best


def test_csv_size_estimate_matches_a_written_file(tmp_path: Path) -> None:
    spec = SynthSpec(num_nodes=50_000, avg_degree=20, num_classes=16, num_features=1)
    report = write_edge_csv(tmp_path / "e.csv", spec)
    assert report["bytes"] == pytest.approx(csv_bytes(spec.num_edges, spec.num_nodes), rel=0.05)
    assert pl.read_csv(tmp_path / "e.csv").height == spec.num_edges


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("grem:0.01", Method("grem:0.01", "grem", 0.01)),
        ("metis", Method("metis", "metis")),
        ("kaminpar", Method("kaminpar", "kaminpar")),
    ],
)
def test_method_parse(text: str, parsed: Method) -> None:
    assert Method.parse(text) == parsed


@pytest.mark.parametrize("text", ["grem", "grem:2", "grem:x", "metis:1", "fennel"])
def test_method_parse_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="grem"):
        Method.parse(text)


def running_with(text: str) -> list[int]:
    """Pids of the processes whose command line mentions ``text``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and text in (proc / "cmdline").read_text(errors="replace"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_sigterm_kills_the_stage_and_removes_the_run_folder(tmp_path: Path) -> None:
    out, work = tmp_path / "out", tmp_path / "work"
    bench = subprocess.Popen(
        [sys.executable, "-m", "gnncore.cli.main", "bench", "scale", "--edges", "10000000"]
        + ["--budget", "1GiB", "--methods", "metis", "--out", str(out), "--work-dir", str(work)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not any(work.glob("scale-*/.edges.csv.tmp-*")):  # the CSV stage is writing
            assert bench.poll() is None and time.monotonic() < deadline, bench.stderr
            time.sleep(0.05)
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(60) == 128 + signal.SIGTERM
    finally:
        bench.kill()
        bench.wait()
    assert list(work.iterdir()) == []
    assert running_with(str(work)) == []  # the stage was killed, not left to run on
    stage = (out / "logs" / "csv.stderr").read_text()  # the stage's own log, cut short
    assert "Traceback" not in stage
    assert not (out / "stages" / "csv.json").exists()


def test_disk_estimate_covers_the_measured_200m_run() -> None:
    """The 200M-edge run (20M nodes) of docs/BENCHMARKS.md: its run folder peaked
    at 10.79 GB during ingestion (the CSV and the graph); the estimate holds it,
    within the margin."""
    measured = 3_377_802_340 + 7_410_919_668
    assert measured <= estimate_disk(200_000_000, 20_000_000) <= measured * DISK_MARGIN
