"""trained_model in mode auto (the default): the mode it chose, why, the estimate and
the budget in its metadata and MLflow run; out of core from the lineage's
partitioned_store when the memory resource's budget is below the training data."""

from __future__ import annotations

import pytest
from mlflow import MlflowClient

from assets import PIPELINE_ASSETS, PIPELINE_CHECKS
from tests.assets.helpers import Materializer, generated, metadata

DATASET = {
    **generated(num_nodes=800, avg_degree=6, num_classes=3, num_features=8),
    "graph_partition": {"config": {"parts": 16}},
}
TRAIN = {"trained_model": {"config": {"node": {"epochs": 2, "hidden": 16, "batch_size": 128}}}}
CHAIN = ("raw_dataset", "graph", "graph_partition", "partitioned_store")
#: A whole-process budget below what the process holds: nothing fits in memory, the
#: in-memory training data of the 800-node graph (80 KiB) included; HierBatching then
#: trains with a fixed mega-batch size (mega_batch_parts 2 of 16), not one sized from it.
SMALL_BUDGET = "96KiB"


@pytest.fixture(scope="module")
def lineage(tmp_path_factory):
    materialize = Materializer(
        tmp_path_factory.mktemp("data"), "auto", assets=PIPELINE_ASSETS + PIPELINE_CHECKS
    )
    materialize(*CHAIN, config=DATASET)
    return materialize, materialize.resources


def test_auto_trains_in_memory_when_the_graph_fits(lineage):
    materialize, resources = lineage
    # The resource bounds the whole process (torch, Dagster and MLflow included).
    model = metadata(materialize("trained_model", config=TRAIN, budget="64GiB"), "trained_model")
    assert (model["mode"], model["mode_requested"]) == ("in_memory", "auto")
    assert str(model["mode_reason"]).startswith("the training data fits")
    assert model["mode_budget_bytes"] == 64 << 30
    assert 0 < model["mode_training_bytes"] < 1 << 20
    assert "store" not in model and "placement_plan" not in model
    run = MlflowClient(resources["mlflow"].resolved_tracking_uri()).get_run(model["mlflow_run_id"])
    assert run.data.params["mode"] == "in_memory"
    assert run.data.params["mode_requested"] == "auto"
    assert run.data.params["mode_reason"] == model["mode_reason"]


def test_auto_reads_the_store_when_the_budget_is_below_the_data(lineage):
    materialize, resources = lineage
    store = metadata(materialize("partitioned_store", config={}), "partitioned_store")
    # The options' own memory_budget (the whole process's) wins over the resource's.
    small = {
        **TRAIN["trained_model"]["config"]["node"],
        "memory_budget": SMALL_BUDGET,
        "mega_batch_parts": 2,
    }
    result = materialize(
        "trained_model", config={"trained_model": {"config": {"node": small}}}, budget="64GiB"
    )
    model = metadata(result, "trained_model")
    assert (model["mode"], model["mode_requested"]) == ("hierbatching", "auto")
    assert model["store"] == store["path"]
    assert model["mode_budget_bytes"] == 96 << 10
    assert model["mode_training_bytes"] > 0 and model["mode_working_bytes"] > 0
    assert "does not fit" in str(model["mode_reason"])
    run = MlflowClient(resources["mlflow"].resolved_tracking_uri()).get_run(model["mlflow_run_id"])
    assert run.info.status == "FINISHED" and run.data.params["mode"] == "hierbatching"
    # HierBatching asked for under a budget below one partition (no mega_batch_parts
    # to fix it): refused naming the budget, and not retried (it would be refused again).
    tiny = {
        **TRAIN["trained_model"]["config"]["node"],
        "memory_budget": SMALL_BUDGET,
        "mode": "hierbatching",
    }
    refused = materialize(
        "trained_model", config={"trained_model": {"config": {"node": tiny}}},
        budget="64GiB", raise_on_error=False,
    )  # fmt: skip
    assert not refused.success
    assert not [e for e in refused.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    (failure, *_) = [e for e in refused.all_events if e.is_step_failure]
    assert "memory budget" in str(failure.step_failure_data.error)
    # A resource budget below what the process holds leaves the data nothing: refused.
    refused = materialize("trained_model", config=TRAIN, budget="1MiB", raise_on_error=False)
    assert not refused.success
    (failure, *_) = [e for e in refused.all_events if e.is_step_failure]
    message = str(failure.step_failure_data.error)
    assert "leaves nothing" in message and "this process holds" in message


def test_an_explicit_mode_wins(lineage):
    materialize, _ = lineage
    # in_memory although the budget says it does not fit: the explicit mode is used.
    node = {**TRAIN["trained_model"]["config"]["node"], "mode": "in_memory"}
    result = materialize(
        "trained_model", config={"trained_model": {"config": {"node": node}}}, budget=SMALL_BUDGET
    )
    model = metadata(result, "trained_model")
    assert (model["mode"], model["mode_requested"]) == ("in_memory", "in_memory")
    assert model["mode_reason"] == "explicit mode"
