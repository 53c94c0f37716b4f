"""The code location loads, and its job and schedule are what users rely on."""

from __future__ import annotations

import datetime

import dagster as dg

from pipelines.definitions import defs


def test_definitions_load_with_expected_names():
    dg.Definitions.validate_loadable(defs)
    keys = {key.to_user_string() for key in defs.resolve_all_asset_keys()}
    methods = {
        "metis",
        "metis_recursive",
        "grem",
        "greedy",
        "ldg",
        "fennel",
        "random",
        "range",
        "bytegnn",
    }
    assert keys == {
        "raw_dataset",
        "graph",
        "graph_partition",
        "replication_plan",
        "placement_plan",
        "partitioned_store",
        "trained_model",
        "production_model",
        "predictions",
        "partition_report",
        *(f"partition_{m}" for m in methods),
    }
    job = defs.resolve_job_def("train_job")
    assert {node.name for node in job.graph.node_defs} >= {
        "raw_dataset",
        "graph",
        "graph_partition",
        "partitioned_store",
        "trained_model",
    }
    checks = {
        (key.asset_key.to_user_string(), key.name)
        for key in defs.resolve_asset_graph().asset_check_keys
    }
    assert ("graph", "graph_integrity") in checks
    assert ("replication_plan", "replication_plan_valid") in checks
    # The chain the UI shows: ingest -> partition -> replication -> placement -> model,
    # and partition -> partitioned store -> model.
    asset_graph = defs.resolve_asset_graph()

    def parents(name: str) -> set[str]:
        return {k.to_user_string() for k in asset_graph.get(dg.AssetKey(name)).parent_keys}

    assert parents("replication_plan") == {"graph_partition"}
    assert parents("placement_plan") == {"replication_plan"}
    assert parents("partitioned_store") == {"graph_partition"}
    assert parents("trained_model") == {"graph", "placement_plan", "partitioned_store"}
    assert parents("graph_partition") == {"graph"}
    assert ("placement_plan", "placement_plan_valid") in checks
    assert ("trained_model", "model_quality") in checks
    assert {(f"partition_{m}", "partition_balance") for m in methods} <= checks
    assert ("graph_partition", "partition_balance") in checks
    assert defs.resolve_job_def("partition_comparison_job")


def test_training_asset_takes_the_gpu_pool():
    spec = defs.resolve_assets_def("trained_model")
    assert spec.op.pool == "gpu"


def test_nightly_schedule_requests_the_train_job():
    schedule = defs.resolve_schedule_def("nightly_retraining")
    assert schedule.cron_schedule == "0 2 * * *"
    assert schedule.job_name == "train_job"
    # Ships stopped: a fresh deployment must not retrain a generated graph every night.
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    context = dg.build_schedule_context(
        scheduled_execution_time=datetime.datetime(2026, 11, 24, 2, 0, tzinfo=datetime.UTC)
    )
    requests = schedule.evaluate_tick(context).run_requests
    assert len(requests) == 1
    job = defs.resolve_job_def("train_job")
    assert dg.validate_run_config(job, requests[0].run_config)
