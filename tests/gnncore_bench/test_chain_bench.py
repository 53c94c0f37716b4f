"""``gnncore bench chain``: the chain's assets through one Dagster run, every stage measured."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from gnncore.cli.main import main
from gnncore.store import GraphDir
from gnncore.synth import SynthSpec, generate_graph
from gnncore_bench.chain import ASSETS, bench_chain, disk_estimate
from gnncore_bench.chain_child import ProcessMeter
from gnncore_bench.chain_data import write_node_table

FIGURES = ("seconds", "peak_rss_bytes", "read_bytes", "written_bytes", "peak_disk_bytes")
#: How far a sampled figure may pass VmHWM: the RSS counters lag (as in tests/assets)
VMHWM_SLACK = 4 << 20


@pytest.mark.slow  # one Dagster run with MLflow: about a minute on 2 loaded cores
def test_every_stage_runs_and_predicts_every_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The verb in this process (the harness measured by coverage); the Dagster run
    in the child process it starts, as for a user. The first run's training is
    refused (batch size 0); ``--resume`` re-executes it from that failure with
    another batch size, the stages before it not run again."""
    work, summary = tmp_path / "work", tmp_path / "chain.json"
    code = main(
        ["bench", "chain", "--work", str(work)]
        + ["--nodes", "2000", "--avg-degree", "6", "--features", "8", "--limit", "none"]
        + ["--batch-size", "0", "--keep", "--json", str(summary)]
    )
    assert code == 1, capsys.readouterr().err[-3000:]
    failed = json.loads((work / "chain.json").read_text())
    assert failed["run_success"] is False
    status = {s["stage"]: s["status"] for s in failed["stages"]}
    assert status["partitioned_store"] == "ok" and status["trained_model"] == "failed"
    assert "predictions" not in status  # never started
    (root,) = work.glob("chain-*")
    # no limit: the steps fork from a server that preloads torch and MLflow, as the UI's
    assert json.loads((root / "settings.json").read_text())["preload_libraries"] is True
    code = main(["bench", "chain", "--resume", str(root), "--batch-size", "256",
                 "--limit", "none", "--json", str(summary)])  # fmt: skip
    assert code == 0, capsys.readouterr().err[-3000:]
    result = json.loads(summary.read_text())
    assert result["run_success"] is True and result["limited"] is False
    first, second = (run["run_id"] for run in result["runs"])
    assert result["runs"][1]["parent_run_id"] == first != second == result["run_id"]
    stages = {s["stage"]: s for s in result["stages"]}
    assert set(stages) == {"csv", *ASSETS}
    assert stages["partitioned_store"]["run_id"] == first  # not run again
    assert stages["trained_model"]["run_id"] == stages["predictions"]["run_id"] == second
    for name, stage in stages.items():
        assert stage["status"] == "ok", (name, stage)
        assert all(stage[k] is not None for k in FIGURES), (name, stage)
        assert stage["seconds"] > 0 and stage["peak_rss_bytes"] > 0
    assert stages["csv"]["peak_disk_bytes"] > 0
    assert stages["predictions"]["peak_disk_bytes"] <= result["disk_needed_estimate_bytes"]
    # each step's peak is its own, not the high-water mark of the steps before it:
    # production_model, run after trained_model, holds no training data
    trained, production = stages["trained_model"], stages["production_model"]
    assert production["peak_rss_bytes"] < trained["peak_rss_bytes"]
    assert production["metadata"]["peak_rss_bytes"] < trained["metadata"]["peak_rss_bytes"]
    # what it held that no cgroup can reclaim, sampled: some, and within its RSS's peak.
    # The held bytes walk smaps (exact); VmHWM comes from the kernel's per-CPU RSS
    # counters, which lag: a fresh clone's run read 1.7 MiB more held than VmHWM
    assert 0 < trained["peak_held_bytes"] <= trained["peak_rss_bytes"] + VMHWM_SLACK
    graph = stages["graph"]
    assert graph["metadata"]["memory_budget_bytes"] > 0
    assert stages["trained_model"]["metadata"]["mode"] == "in_memory"
    assert set(result["checks"].values()) == {"ok"}
    # one prediction for every node of the ingested graph
    predictions = pl.read_parquet(
        Path(stages["predictions"]["metadata"]["path"]) / "predictions.parquet"
    )
    assert result["predictions"]["rows"] == result["predictions"]["num_nodes"] == 2000
    assert predictions.height == 2000 and predictions["node_id"].n_unique() == 2000
    markdown = (work / "chain.md").read_text()
    assert all(f"| {name} | ok |" in markdown for name in stages)


def test_refuses_a_run_the_disk_cannot_hold(tmp_path: Path) -> None:
    # The generator's largest graph (SynthSpec takes under 2**31 nodes) with 65,536
    # features: petabytes of features.
    nodes, features = 2**31 - 1, 2**16
    with pytest.raises(ValueError, match="of disk"):
        bench_chain(tmp_path, nodes, 10, features, None)
    assert not list(tmp_path.iterdir())  # refused before anything was written
    assert disk_estimate(nodes, 10, features) > nodes * features * 4


def test_node_table_holds_the_generators_labels_and_features(tmp_path: Path) -> None:
    spec = SynthSpec(num_nodes=700, avg_degree=4, num_classes=3, num_features=5, seed=3)
    write_node_table(tmp_path / "nodes.parquet", spec, rows_per_group=256)
    table = pq.read_table(tmp_path / "nodes.parquet").to_pandas()
    generate_graph(tmp_path / "graph", spec)
    graph = GraphDir.open(tmp_path / "graph")
    assert table["node_id"].tolist() == list(range(700))
    np.testing.assert_array_equal(table["label"].to_numpy(), graph.labels())
    x = table[[f"f{i}" for i in range(5)]].to_numpy()
    np.testing.assert_array_equal(x, np.asarray(graph.features()))
    train = np.flatnonzero(table["split"].to_numpy() == "train")
    np.testing.assert_array_equal(train, np.sort(graph.split("train")))


def test_a_steps_disk_peak_comes_from_the_samples_taken_while_it_ran(tmp_path: Path) -> None:
    meter = ProcessMeter(tmp_path)
    meter.disk = [(1.0, 10), (2.0, 20), (3.0, 30)]
    assert meter.disk_peak(0.5, 3.0) == 30
    assert meter.disk_peak(1.5, 2.5) == 20
    # a step shorter than the interval: the last sample before it ended
    assert meter.disk_peak(2.1, 2.2) == 20
    assert meter.disk_peak(0.1, 0.2) == 0
