"""The peak RSS against the memory budget (gnncore.usage.budget_figures): the one
computation behind the verbs' JSON, the training run's metrics, the partition
report and the assets' metadata, with each caller's precedence kept."""

import pytest

from gnncore.cli.arg_types import with_memory_figures
from gnncore.partition.metrics import PartitionMetrics
from gnncore.partition.report import PartitionReport
from gnncore.usage import budget_figures, peak_rss_bytes


def test_the_ratio_is_the_peak_over_the_budget() -> None:
    figures = budget_figures(3 << 20, 4 << 20)
    assert figures == {
        "peak_rss_bytes": 3 << 20,
        "memory_budget_bytes": 4 << 20,
        "peak_rss_of_budget": 0.75,
    }
    assert budget_figures(6 << 20, 4 << 20)["peak_rss_of_budget"] == 1.5  # went past it


def test_without_a_budget_only_the_peak_is_reported() -> None:
    assert budget_figures(5 << 20, None) == {"peak_rss_bytes": 5 << 20}


def test_without_a_peak_only_the_budget_is_reported() -> None:
    assert budget_figures(None, 8 << 20) == {"memory_budget_bytes": 8 << 20}
    assert budget_figures(None, None) == {}


@pytest.mark.parametrize("budget", [0, -1])
def test_a_budget_of_zero_or_less_counts_as_none(budget: int) -> None:
    assert budget_figures(5 << 20, budget) == {"peak_rss_bytes": 5 << 20}


def test_a_verbs_summary_keeps_its_own_figures() -> None:
    own = with_memory_figures({"peak_rss_bytes": 1 << 20, "memory_budget_bytes": 4 << 20}, 1 << 30)
    assert own["peak_rss_of_budget"] == 0.25
    measured = with_memory_figures({}, 1 << 40)
    assert measured["peak_rss_bytes"] <= peak_rss_bytes()
    assert measured["peak_rss_of_budget"] == measured["peak_rss_bytes"] / (1 << 40)
    assert "peak_rss_of_budget" not in with_memory_figures({}, None)


def _report(command_peak: int | None, budget: int | None) -> PartitionReport:
    metrics = PartitionMetrics(2, 4, 3, 1, 1 / 3, [2, 2], 1.0, {}, {})
    return PartitionReport(
        "random",
        2,
        0,
        "parts",
        0.1,
        peak_rss_bytes=2 << 20,
        metrics=metrics,
        params={},
        command_peak_rss_bytes=command_peak,
        memory_budget="8MiB",
        memory_budget_bytes=budget,
    )


def test_a_partition_reports_the_commands_peak_else_the_methods() -> None:
    assert _report(4 << 20, 8 << 20).peak_rss_of_budget == 0.5
    assert _report(None, 8 << 20).peak_rss_of_budget == 0.25
    assert _report(4 << 20, None).peak_rss_of_budget is None
    assert _report(4 << 20, 8 << 20).budget_figures() == {
        "memory_budget": "8MiB",
        "memory_budget_bytes": 8 << 20,
        "peak_rss_of_budget": 0.5,
    }


def test_the_held_peak_is_reported_against_the_budget_beside_the_rss() -> None:
    """Under a cgroup the RSS also counts mapped data files' pages, which the limit
    reclaims: the held peak (what it kills for) goes beside it, each against the budget."""
    figures = budget_figures(5 << 20, 4 << 20, 3 << 20)
    assert figures["peak_rss_of_budget"] == 1.25 and figures["peak_held_of_budget"] == 0.75
    assert figures["peak_held_bytes"] == 3 << 20
    assert budget_figures(5 << 20, None, 3 << 20) == {"peak_rss_bytes": 5 << 20,
                                                      "peak_held_bytes": 3 << 20}  # fmt: skip
