"""The deployment's memory budget resource: one setting, read by every stage."""

import pytest

from gnncore.sizes import parse_size
from resources import MemoryBudgetResource
from resources.memory import BUDGET_ENV


def test_a_size_an_override_and_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BUDGET_ENV, raising=False)
    memory = MemoryBudgetResource(budget="1GiB")
    assert memory.budget_bytes() == 1 << 30
    # An asset's own setting wins for its materialization.
    assert memory.budget_bytes("512MiB") == 512 << 20
    assert MemoryBudgetResource(budget="none").budget_bytes() is None


def test_empty_reads_the_environment_then_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BUDGET_ENV, "3GiB")
    assert MemoryBudgetResource().budget_bytes() == parse_size("3GiB")
    monkeypatch.delenv(BUDGET_ENV)
    auto = MemoryBudgetResource().budget_bytes()
    assert auto is not None and auto >= 256 << 20
    assert MemoryBudgetResource().setting() == "auto"


def test_a_bad_setting_names_itself() -> None:
    with pytest.raises(ValueError, match="memory budget 'lots'"):
        MemoryBudgetResource(budget="lots").budget_bytes()
    with pytest.raises(ValueError, match="memory budget '-1'"):
        MemoryBudgetResource(budget="-1").budget_bytes()


def test_auto_bounds_the_whole_process(monkeypatch: pytest.MonkeyPatch) -> None:
    import gnncore.usage as usage_module

    monkeypatch.delenv(BUDGET_ENV, raising=False)
    monkeypatch.setattr(usage_module, "mem_available", lambda: 64 << 30)
    monkeypatch.setattr(usage_module, "cgroup_limit", lambda: 3 << 30)
    assert MemoryBudgetResource().budget_bytes() == 3 << 30  # the cgroup's limit
    monkeypatch.setattr(usage_module, "cgroup_limit", lambda: None)
    held = usage_module.current_rss_bytes()
    # no limit: what is available plus what the process holds already
    assert MemoryBudgetResource(budget="auto").budget_bytes() == pytest.approx(
        (64 << 30) + held, abs=32 << 20
    )


def test_a_runs_config_sets_it_as_the_launchpad_does() -> None:
    import dagster as dg

    from pipelines.definitions import build_resources

    @dg.asset
    def budgeted(memory: MemoryBudgetResource) -> dg.MaterializeResult:
        return dg.MaterializeResult(metadata={"budget": memory.budget_bytes()})

    result = dg.materialize(
        [budgeted],
        resources=build_resources(),
        run_config={"resources": {"memory": {"config": {"budget": "3GiB"}}}},
    )
    (mat,) = result.asset_materializations_for_node("budgeted")
    assert mat.metadata["budget"].value == 3 << 30
