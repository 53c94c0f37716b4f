"""One memory budget for a deployment: the ``memory`` resource reaches every
stage asset, an asset's own ``memory_budget`` wins, ``none`` is unbounded, and
each stage reports its peak RSS against the budget it ran under."""

from __future__ import annotations

import dagster as dg
import pytest

from assets import PIPELINE_ASSETS, PIPELINE_CHECKS
from gnncore.partition.run import postprocess_share
from gnncore.usage import STAGE_MARGIN, current_rss_bytes, peak_held_bytes, peak_rss_bytes
from tests.assets.helpers import Materializer, generated
from tests.assets.helpers import metadata as _metadata

DATASET = "budgeted"
GENERATED = generated(num_nodes=1500, avg_degree=8, num_classes=4, num_features=16)
#: Stages that size themselves from the budget (``trained_model`` is wired elsewhere).
STAGES = (
    "graph",
    "graph_partition",
    "replication_plan",
    "placement_plan",
    "partitioned_store",
    "trained_model",
    "predictions",
)
BUDGET = 6 << 30
#: How far a later VmHWM reading may fall under an earlier one (see the first test).
VMHWM_SLACK = 4 << 20


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    """A materializer of the pipeline on a small generated graph under a chosen
    ``memory`` resource (``ops``: the run config of a selection), and the whole
    pipeline materialized under 6 GiB; the data root and instance are shared:
    later runs reuse the earlier outputs and report against their own budget."""
    pipeline = Materializer(
        tmp_path_factory.mktemp("data"), DATASET, assets=PIPELINE_ASSETS + PIPELINE_CHECKS
    )

    def materialize(budget: str, ops: dict | None = None, **kwargs) -> dg.ExecuteInProcessResult:
        config = ops or {
            **GENERATED,
            "graph_partition": {"config": {"parts": 2}},
            "trained_model": {"config": {"node": {"epochs": 2, "hidden": 16, "batch_size": 256}}},
        }
        return pipeline(config=config, budget=budget, **kwargs)

    return materialize, materialize("6GiB")


def test_the_resource_budget_reaches_every_stage(deployment) -> None:
    _, result = deployment
    for asset in STAGES:
        meta = _metadata(result, asset)
        assert meta["memory_budget"] == "6GiB", asset
        assert meta["memory_budget_bytes"] == BUDGET, asset
        # VmHWM is the larger of the kernel's high-water mark and the RSS now, and the
        # RSS is a sum of per-CPU counters that may be read a few pages high: a later
        # reading can come out tens of KiB under an earlier one (60 KiB seen in CI).
        assert 0 < meta["peak_rss_bytes"] <= peak_rss_bytes() + VMHWM_SLACK, asset
        assert meta["peak_rss_of_budget"] == pytest.approx(meta["peak_rss_bytes"] / BUDGET)
        # what a cgroup could not reclaim, sampled while the step ran: within the RSS's peak
        assert 0 < meta["peak_held_bytes"] <= peak_rss_bytes() + VMHWM_SLACK, asset
        assert meta["peak_held_of_budget"] == pytest.approx(meta["peak_held_bytes"] / BUDGET)
    assert peak_held_bytes() is None  # the memory resource stopped sampling at its teardown
    # The post-processing's buffers are a quarter of the stage's budget, at most 1 GiB.
    assert _metadata(result, "graph_partition")["postprocess_budget_bytes"] == 1 << 30
    # Prediction's layers get what the budget leaves once the process's own memory is off.
    pred = _metadata(result, "predictions")
    assert 0 < pred["overhead_bytes"] <= pred["peak_rss_bytes"]
    assert pred["data_budget_bytes"] == BUDGET - pred["overhead_bytes"] - STAGE_MARGIN
    # The planners check their estimate against it (and recorded the estimate).
    assert 0 < _metadata(result, "placement_plan")["memory_estimate_bytes"] < BUDGET


def test_an_assets_own_setting_wins_and_none_is_unbounded(deployment) -> None:
    materialize, _ = deployment
    selection = dg.AssetSelection.assets(
        "graph", "graph_partition", "replication_plan", "partitioned_store"
    )
    ops = {
        "graph_partition": {"config": {"parts": 2, "memory_budget": "256MiB"}},
        "partitioned_store": {"config": {"memory_budget": "5GiB"}},
    }
    result = materialize("none", ops, selection=selection)
    part = _metadata(result, "graph_partition")
    assert part["memory_budget_bytes"] == 256 << 20
    assert part["postprocess_budget_bytes"] == postprocess_share(256 << 20) == 64 << 20
    store = _metadata(result, "partitioned_store")
    assert store["memory_budget"] == "5GiB" and store["memory_budget_bytes"] == 5 << 30
    for asset in ("graph", "replication_plan"):
        meta = _metadata(result, asset)
        assert meta["memory_budget"] == "none"
        assert "memory_budget_bytes" not in meta and "peak_rss_of_budget" not in meta
        assert meta["peak_rss_bytes"] > 0


def test_a_budget_below_a_stages_need_is_refused_naming_both(deployment) -> None:
    materialize, _ = deployment
    result = materialize(
        "8MiB",
        {"replication_plan": {"config": {"rate": 0.02}}},  # a new plan: a reused one needs none
        selection=dg.AssetSelection.assets("replication_plan"),
        raise_on_error=False,
    )
    assert not result.success
    (failure,) = result.get_step_failure_events()
    message = str(failure.step_failure_data.error)
    assert "memory_budget of 8.0 MiB is below the" in message, message
    assert "replication plan of 1500 nodes is estimated to need" in message, message


def test_ingestion_sizes_its_buffers_from_what_the_process_does_not_hold(tmp_path) -> None:
    from gnncore.synth import SynthSpec
    from gnncore.synth.edge_csv import write_edge_csv

    source = tmp_path / "edges.csv"
    write_edge_csv(
        source,
        SynthSpec(num_nodes=800, avg_degree=6, num_classes=4, num_features=8, seed=2),
        progress=False,
    )
    materialize = Materializer(tmp_path / "root", "csv", assets=PIPELINE_ASSETS)
    resources = materialize.resources

    def ingest(budget: str) -> dg.ExecuteInProcessResult:
        config = {"raw_dataset": {"config": {"source": str(source)}}}
        return materialize(
            "raw_dataset", "graph", config=config, budget=budget, raise_on_error=False
        )

    # Below what the process holds already: refused, naming the budget and the need.
    refused = ingest("128MiB")
    (failure,) = refused.get_step_failure_events()
    message = str(failure.step_failure_data.error)
    assert "memory budget of 128.0 MiB is below the" in message, message
    assert "bounded-memory ingestion needs" in message and "this process holds already" in message

    # 1 GiB above what the process holds (an xdist worker may hold 1 GiB by now).
    total_mib = (current_rss_bytes() >> 20) + 1024
    meta = _metadata(ingest(f"{total_mib}MiB"), "graph")
    assert meta["memory_budget"] == f"{total_mib}MiB"
    assert meta["memory_budget_bytes"] == total_mib << 20
    assert "| sort/dedup |" in meta["phases"]  # the bounded path took the edge list
    tracker = resources["mlflow"].tracker()
    (run,) = tracker.client.search_runs([tracker.experiment_id], "tags.task = 'ingest'")
    buffers = int(run.data.params["memory_budget"])
    assert 0 < buffers < (total_mib << 20) - current_rss_bytes() // 2
