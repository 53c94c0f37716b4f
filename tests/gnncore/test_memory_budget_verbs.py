"""``--memory-budget`` through the real verbs: the planners check their estimate
against it and refuse naming both figures, and every budgeted verb's JSON
reports ``memory_budget_bytes`` beside its ``peak_rss_bytes``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gnncore.cli.main import main
from gnncore.plan import PlacementPlan, ReplicationPlan
from gnncore.usage import peak_rss_bytes

pytest.importorskip("gnncore._C")

#: Generous enough for every stage on a 600-node graph (the planners' estimate is
#: ~450 MiB of interpreter and modules plus bytes per node).
BUDGET = 3 << 30


def _verb(argv: list[str], out: Path) -> dict:
    assert main([*argv, "--json", str(out)]) == 0
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def partitioned(tmp_path_factory) -> tuple[Path, Path, dict, dict]:
    """A generated graph and a partition of it, made through the verbs."""
    tmp = tmp_path_factory.mktemp("budget")
    graph, part = tmp / "g", tmp / "p"
    synth = _verb(
        ["synth", str(graph), "--nodes", "600", "--memory-budget", "none", "--no-progress"],
        tmp / "synth.json",
    )
    partition = _verb(
        ["partition", str(graph), str(part), "--parts", "2", "--method", "random"]
        + ["--memory-budget", "8MiB", "--no-progress"],
        tmp / "partition.json",
    )
    return graph, part, synth, partition


def test_generation_and_partition_report_their_budget(partitioned) -> None:
    _, _, synth, partition = partitioned
    assert synth["memory_budget_bytes"] is None and synth["peak_rss_bytes"] > 0
    # The partition verb's budget is its post-processing's buffers.
    assert partition["memory_budget_bytes"] == 8 << 20
    assert 0 < partition["peak_rss_bytes"] <= peak_rss_bytes()


def test_plans_run_under_a_budget_and_report_their_peak(partitioned, tmp_path) -> None:
    graph, part, _, _ = partitioned
    budget = ["--memory-budget", str(BUDGET), "--no-progress"]
    placement = _verb(
        ["plan", "placement", str(graph), str(tmp_path / "pl"), "--devices", "2", *budget],
        tmp_path / "pl.json",
    )
    replication = _verb(
        ["plan", "replication", str(graph), str(part), str(tmp_path / "rep"), *budget],
        tmp_path / "rep.json",
    )
    for summary, plan in (
        (placement, PlacementPlan.open(tmp_path / "pl")),
        (replication, ReplicationPlan.open(tmp_path / "rep")),
    ):
        assert summary["memory_budget_bytes"] == BUDGET
        assert 0 < summary["peak_rss_bytes"] <= peak_rss_bytes()
        # The plan records what it ran under (manifest metrics, logged to MLflow too).
        metrics = plan.plan.metrics
        assert metrics["memory_budget_bytes"] == BUDGET and metrics["peak_rss_bytes"] > 0
        assert metrics["memory_estimate_bytes"] < BUDGET


def test_none_is_unbounded_and_auto_is_resolved(partitioned, tmp_path) -> None:
    graph, part, _, _ = partitioned
    unbounded = _verb(
        ["plan", "replication", str(graph), str(part), str(tmp_path / "r1")]
        + ["--memory-budget", "none", "--no-progress"],
        tmp_path / "r1.json",
    )
    assert unbounded["memory_budget_bytes"] is None and unbounded["peak_rss_bytes"] > 0
    assert "memory_budget_bytes" not in ReplicationPlan.open(tmp_path / "r1").plan.metrics
    auto = _verb(
        ["plan", "replication", str(graph), str(part), str(tmp_path / "r2"), "--no-progress"],
        tmp_path / "r2.json",
    )
    assert auto["memory_budget_bytes"] > 0


@pytest.mark.parametrize("what", ["placement", "replication"])
def test_a_budget_below_the_estimate_is_refused_naming_both(
    partitioned, tmp_path, capsys, what
) -> None:
    graph, part, _, _ = partitioned
    inputs = [str(graph)] + ([str(part)] if what == "replication" else ["--devices", "2"])
    out = tmp_path / "plan"
    code = main(["plan", what, *inputs, str(out), "--memory-budget", "64MiB", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and "\n" not in err, err
    assert "--memory-budget of 64.0 MiB is below the" in err
    assert "is estimated to need; raise the budget" in err
    assert not out.exists()


def test_the_rank_writer_reports_its_peak_unbounded(partitioned, tmp_path) -> None:
    graph, part, _, _ = partitioned
    argv = ["ranks", str(graph), str(part), str(tmp_path / "ranks"), "--memory-budget", "none"]
    ranks = _verb(argv, tmp_path / "r.json")
    assert ranks["memory_budget_bytes"] is None and ranks["peak_rss_bytes"] > 0
    assert ranks["parts"] == 2
