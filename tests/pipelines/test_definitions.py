"""The code location loads, and its job and schedule are what users rely on."""

from __future__ import annotations

import datetime

import dagster as dg

from assets import ALL_ASSETS, ALL_CHECKS
from assets.dataset import raw_dataset
from assets.partitions import DATASET_PARTITIONS, PARTITIONS_NAME
from gnncore.forkserver import nvidia_gpu_present
from pipelines.definitions import build_resources, defs
from pipelines.jobs import train_job
from pipelines.schedules import retraining_schedule


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
        "kaminpar",
    }
    assert keys == {
        "raw_dataset",
        "graph",
        "graph_partition",
        "replication_plan",
        "placement_plan",
        "partitioned_store",
        "rank_data",
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
    assert parents("rank_data") == {"graph_partition"}
    assert parents("trained_model") == {
        "graph",
        "graph_partition",
        "placement_plan",
        "partitioned_store",
    }
    assert parents("graph_partition") == {"graph"}
    assert ("placement_plan", "placement_plan_valid") in checks
    assert ("trained_model", "model_quality") in checks
    assert {(f"partition_{m}", "partition_balance") for m in methods} <= checks
    assert ("graph_partition", "partition_balance") in checks
    assert defs.resolve_job_def("partition_comparison_job")
    # rank_data is no step of the training jobs (trained_model writes or reuses its folder;
    # as a step beside it, both would write that folder at once); distributed_train_job's
    # launchpad starts at 2 ranks over 2 partitions.
    assert "rank_data" not in {node.name for node in job.graph.node_defs}
    distributed = defs.resolve_job_def("distributed_train_job")
    names = {node.name for node in distributed.graph.node_defs}
    assert {"graph_partition", "trained_model"} <= names and "rank_data" not in names
    ops = distributed.get_run_config_for_partition_key("x")["ops"]  # the launchpad's defaults
    assert ops["graph_partition"]["config"]["parts"] == 2
    assert ops["trained_model"]["config"]["nproc"] == 2


def test_every_asset_and_check_is_partitioned_by_dataset():
    asset_graph = defs.resolve_asset_graph()
    for key in asset_graph.get_all_asset_keys():
        assert asset_graph.get(key).partitions_def == DATASET_PARTITIONS, key
    for key in asset_graph.asset_check_keys:
        assert asset_graph.get(key).partitions_def == DATASET_PARTITIONS, key
    assert defs.resolve_job_def("train_job").partitions_def == DATASET_PARTITIONS


def test_training_asset_takes_the_gpu_pool():
    spec = defs.resolve_assets_def("trained_model")
    assert spec.op.pool == "gpu"


NIGHT = datetime.datetime(2026, 11, 24, 2, 0, tzinfo=datetime.UTC)


def tick(schedule: dg.ScheduleDefinition, instance: dg.DagsterInstance) -> list[dg.RunRequest]:
    """One tick of ``schedule`` in a code location like the real one (partitioned run
    requests are resolved against its job)."""
    location = dg.Definitions(
        assets=ALL_ASSETS,
        asset_checks=ALL_CHECKS,
        jobs=[train_job],
        schedules=[schedule],
        resources=build_resources(),
    )
    context = dg.build_schedule_context(
        instance=instance,
        scheduled_execution_time=NIGHT,
        repository_def=location.get_repository_def(),
    )
    return list(schedule.evaluate_tick(context).run_requests or [])


def test_nightly_schedule_requests_the_train_job_per_dataset_partition():
    schedule = defs.resolve_schedule_def("nightly_retraining")
    assert schedule.cron_schedule == "0 2 * * *"
    assert schedule.job_name == "train_job"
    # Ships stopped: a fresh deployment must not retrain every night unasked.
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    with dg.instance_for_test() as instance:
        context = dg.build_schedule_context(instance=instance, scheduled_execution_time=NIGHT)
        empty = schedule.evaluate_tick(context)
        assert not empty.run_requests and "no dataset partition" in str(empty.skip_message)

        instance.add_dynamic_partitions(PARTITIONS_NAME, ["synthetic", "payments"])
        requests = tick(schedule, instance)
        assert sorted(str(r.partition_key) for r in requests) == ["payments", "synthetic"]
        assert {r.tags["gnncore/dataset"] for r in requests} == {"payments", "synthetic"}
        job = defs.resolve_job_def("train_job")
        for request in requests:
            assert dg.validate_run_config(job, request.run_config)


def test_retraining_repeats_each_dataset_s_source_and_task(tmp_path):
    """A dataset from the inbox is retrained on its file with its task (the runs that
    last materialized its raw_dataset and trained_model say which); a subset of
    datasets can be named."""
    edges = tmp_path / "payments.csv"
    edges.write_text("src,dst\na,b\nb,c\n")

    @dg.asset(
        name="trained_model",
        partitions_def=DATASET_PARTITIONS,
        config_schema={"task": dg.Field(str, default_value="node")},
    )
    def stand_in() -> None:
        """Records a training run's config, cheaply."""

    schedule = retraining_schedule("some", run_config={"ops": {"graph_partition": {}}},
                                   datasets=["payments", "gone"])  # fmt: skip
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(PARTITIONS_NAME, ["synthetic", "payments"])
        resources = build_resources(str(tmp_path / "data"))
        raw = {"config": {"source": str(edges), "format": "edgelist"}}
        assert dg.materialize(
            [raw_dataset], instance=instance, resources=resources, partition_key="payments",
            run_config={"ops": {"raw_dataset": raw}},
        ).success  # fmt: skip
        assert dg.materialize(
            [stand_in], instance=instance, partition_key="payments",
            run_config={"ops": {"trained_model": {"config": {"task": "link"}}}},
        ).success  # fmt: skip
        (request,) = tick(schedule, instance)
    assert request.partition_key == "payments"
    assert request.run_config["ops"]["raw_dataset"] == raw
    assert request.run_config["ops"]["trained_model"] == {"config": {"task": "link"}}
    assert request.run_config["ops"]["graph_partition"] == {}  # the schedule's own config
    assert dg.validate_run_config(defs.resolve_job_def("train_job"), request.run_config)


def test_steps_fork_from_a_forkserver_unless_run_config_picks_another_start():
    """A spawned step re-imports Python, Dagster and the code location (about 12 s
    per step on a loaded 2-core machine, against about 2 s forked: docs/TESTING.md);
    users keep Dagster's usual choices through run config."""
    job = defs.resolve_job_def("train_job")

    def execution(config: dict) -> dict:
        return dg.validate_run_config(job, config)["execution"][job.executor_def.name]

    default = execution({})["multiprocess"]["start_method"]
    if nvidia_gpu_present():  # a step forked from a server that preloaded torch has no CUDA
        assert default == {"spawn": {}}
    else:
        # the code location, as Dagster preloads it, and the libraries every step imports
        assert default["forkserver"]["preload_modules"][0] == "pipelines.definitions"
        assert {"torch_geometric", "mlflow"} <= set(default["forkserver"]["preload_modules"])
    assert "in_process" in execution({"execution": {"config": {"in_process": {}}}})
    spawn = {"multiprocess": {"start_method": {"spawn": {}}}}
    chosen = execution({"execution": {"config": spawn}})
    assert chosen["multiprocess"]["start_method"] == {"spawn": {}}


def test_steps_spawn_where_an_nvidia_gpu_is(monkeypatch, tmp_path):
    """Where the NVIDIA driver's device files are, steps start fresh: one forked
    from a server that preloaded torch fails at its first CUDA call."""
    from gnncore import forkserver
    from pipelines import executor

    assert executor.default_execution() == (
        executor.SPAWN_DEFAULT if forkserver.nvidia_gpu_present() else executor.FORKSERVER_DEFAULT
    )
    (tmp_path / "nvidiactl").touch()
    monkeypatch.setattr(forkserver, "NVIDIA_DEVICE_FILES", (str(tmp_path / "nvidiactl"),))
    assert forkserver.nvidia_gpu_present()
    assert executor.default_execution() == executor.SPAWN_DEFAULT
    monkeypatch.setattr(forkserver, "NVIDIA_DEVICE_FILES", (str(tmp_path / "absent"),))
    assert executor.default_execution() == executor.FORKSERVER_DEFAULT
