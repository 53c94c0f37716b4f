"""``gnncore ranks --memory-budget``: the verb checks the whole process's budget
at its start against the estimated slice of its largest rank, refuses naming
the minimum when it does not fit, and reports its peak RSS against the budget
in its JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gnncore.cli.main import main
from gnncore.distributed.rank_write import EDGE_BYTES, NODE_BYTES, rank_write_bytes
from gnncore.usage import current_rss_bytes, peak_rss_bytes

pytest.importorskip("gnncore._C")


@pytest.fixture(scope="module")
def partitioned(tmp_path_factory) -> tuple[Path, Path]:
    """A generated 800-node graph and a 2-way partition of it, through the verbs."""
    tmp = tmp_path_factory.mktemp("ranks")
    graph, part = tmp / "g", tmp / "p"
    assert main(["synth", str(graph), "--nodes", "800", "--no-progress"]) == 0
    argv = ["partition", str(graph), str(part), "--parts", "2", "--method", "random"]
    assert main([*argv, "--no-progress"]) == 0
    return graph, part


def test_ranks_reports_its_peak_against_the_budget(partitioned, tmp_path) -> None:
    graph, part = partitioned
    budget = current_rss_bytes() + (1 << 30)
    out = tmp_path / "ranks.json"
    argv = ["ranks", str(graph), str(part), str(tmp_path / "r"), "--json", str(out)]
    assert main([*argv, "--memory-budget", str(budget)]) == 0
    summary = json.loads(out.read_text())
    assert summary["memory_budget_bytes"] == budget
    assert 0 < summary["peak_rss_bytes"] <= peak_rss_bytes()
    assert summary["peak_rss_of_budget"] == pytest.approx(summary["peak_rss_bytes"] / budget)
    # The estimate covers the largest rank's in-edges and core nodes as written.
    largest = max(
        EDGE_BYTES * e + NODE_BYTES * n
        for e, n in zip(summary["edges"], summary["core_nodes"], strict=True)
    )
    assert summary["memory_estimate_bytes"] >= largest > 0
    assert summary["memory_estimate_bytes"] == rank_write_bytes(graph, part)


def test_ranks_refuses_a_budget_below_its_slice_naming_the_minimum(
    partitioned, tmp_path, capsys
) -> None:
    graph, part = partitioned
    needed = rank_write_bytes(graph, part)
    # What this process holds already plus the largest rank's slice, less 1 MiB.
    budget = current_rss_bytes() + needed - (1 << 20)
    target = tmp_path / "r"
    argv = ["ranks", str(graph), str(part), str(target), "--memory-budget", str(budget)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "gnncore ranks: error: memory budget of" in err
    assert re.search(r"at least for its data", err) and "largest rank" in err
    assert not target.exists()
