"""The ``postgres`` storage profile against a real PostgreSQL server.

A throwaway server (``initdb`` / ``pg_ctl`` on 127.0.0.1, a free port, in a
temporary directory; as the ``postgres`` user when the tests run as root) gets
the ``train_job`` of ``pipelines.definitions`` run in an instance built from
``pipelines/dagster.postgres.yaml``, with MLflow pointed at the same server
through ``GNNCORE_MLFLOW_URI``, exactly as ``make demo PROFILE=postgres`` does.
The run, every asset's materialization, the schedule state and the MLflow runs,
metrics and model version are then read back through fresh clients, straight
from SQL, and over HTTP from ``dagster-webserver`` and ``mlflow server``
pointed at the same databases.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from resources import DataRootResource, MlflowResource
from resources.postgres_server import LocalPostgres, find_pg_bin, running_postgres
from tests.processes import free_port, stop_group

REPO = Path(__file__).resolve().parents[2]
PROFILE_YAML = REPO / "pipelines" / "dagster.postgres.yaml"
VENV_BIN = Path(sys.executable).parent

DATASET = "pgtiny"
RUN_CONFIG = {
    "ops": {
        "raw_dataset": {
            "config": {
                "num_nodes": 800,
                "avg_degree": 8,
                "num_classes": 4,
                "num_features": 16,
            }
        },
        "graph_partition": {"config": {"parts": 2}},
        "trained_model": {"config": {"node": {"epochs": 2, "hidden": 16, "batch_size": 128}}},
    }
}

PG_ENV = {
    "GNNCORE_PG_HOST": "db.example",
    "GNNCORE_PG_PORT": "6543",
    "GNNCORE_PG_USER": "dagster_user",
    "GNNCORE_PG_PASSWORD": "p@ss word",
    "GNNCORE_PG_DB": "dagster_db",
}


def _pg_bin() -> Path:
    pg_bin = find_pg_bin()
    if pg_bin is None:
        pytest.skip(
            "no PostgreSQL binaries (initdb, pg_ctl, postgres) under /usr/lib/postgresql/*/bin, "
            "$GNNCORE_PG_BIN or PATH: `make sysdeps` installs Debian's postgresql as root"
        )
    return pg_bin


# Configuration resolves from the environment ----------------------------------


def test_profile_yaml_reads_the_connection_from_the_environment(monkeypatch):
    pytest.importorskip("dagster_postgres")
    from dagster._config import process_config
    from dagster._core.instance.config import dagster_instance_config_schema
    from dagster_postgres.utils import pg_config, pg_url_from_config

    for key, value in PG_ENV.items():
        monkeypatch.setenv(key, value)
    raw = yaml.safe_load(PROFILE_YAML.read_text())
    sqlite = yaml.safe_load((REPO / "pipelines" / "dagster.yaml").read_text())
    for key in ("concurrency", "python_logs"):  # the profiles differ in storage alone
        assert raw[key] == sqlite[key]
    assert process_config(dagster_instance_config_schema(), raw).success
    resolved = process_config(pg_config(), raw["storage"]["postgres"])
    assert resolved.success, resolved.errors
    assert pg_url_from_config(resolved.value) == (
        "postgresql+psycopg2://dagster_user:p%40ss%20word@db.example:6543/dagster_db"
    )
    monkeypatch.delenv("GNNCORE_PG_HOST")
    missing = process_config(pg_config(), raw["storage"]["postgres"])
    assert not missing.success and "GNNCORE_PG_HOST" in str(missing.errors)


def test_mlflow_resource_reads_the_tracking_uri_when_it_resolves(monkeypatch, tmp_path):
    storage = DataRootResource(root=str(tmp_path))
    monkeypatch.delenv("GNNCORE_MLFLOW_URI", raising=False)
    monkeypatch.delenv("GNNCORE_MLFLOW_ARTIFACTS", raising=False)
    resource = MlflowResource(storage=storage)  # built before the variable is set
    assert resource.resolved_tracking_uri() == f"sqlite:///{tmp_path}/mlflow/mlflow.db"
    assert resource.resolved_artifact_root() is None  # beside the sqlite file
    uri = "postgresql://u:p@127.0.0.1:5432/mlflow"
    monkeypatch.setenv("GNNCORE_MLFLOW_URI", uri)
    assert resource.resolved_tracking_uri() == uri
    assert resource.resolved_artifact_root() == str(tmp_path / "mlflow" / "artifacts")
    monkeypatch.setenv("GNNCORE_MLFLOW_ARTIFACTS", "s3://bucket/gnncore")
    assert resource.resolved_artifact_root() == "s3://bucket/gnncore"
    explicit = MlflowResource(storage=storage, tracking_uri="http://mlflow:5000")
    monkeypatch.delenv("GNNCORE_MLFLOW_ARTIFACTS")
    assert explicit.resolved_tracking_uri() == "http://mlflow:5000"
    assert explicit.resolved_artifact_root() is None  # the server decides


# A real server ------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[LocalPostgres]:
    pytest.importorskip("psycopg2")
    pytest.importorskip("dagster_postgres")
    pg_bin = _pg_bin()
    # Not under pytest's tmp_path: as root the server runs as `postgres`, which must be
    # able to enter every parent folder (pytest's base is 0700).
    base = Path(tempfile.mkdtemp(prefix="gnncore-pg-"))
    base.chmod(0o711)
    try:
        with running_postgres(base / "cluster", pg_bin=pg_bin) as pg:
            yield pg
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def profile(server, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """The environment of ``PROFILE=postgres`` pointed at ``server``, one pipeline run."""
    home = tmp_path_factory.mktemp("dagster_home")
    shutil.copy(PROFILE_YAML, home / "dagster.yaml")
    data_root = tmp_path_factory.mktemp("data")
    env = {
        **server.env(),
        "DAGSTER_HOME": str(home),
        "GNNCORE_DATA_ROOT": str(data_root),
    }
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("GNNCORE_MLFLOW_ARTIFACTS", raising=False)
        for key, value in env.items():
            mp.setenv(key, value)
        from pipelines.definitions import defs

        instance = dg.DagsterInstance.from_config(str(home))
        job = defs.resolve_job_def("train_job")
        try:
            # The dataset partition lives in PostgreSQL too (dynamic partitions table).
            instance.add_dynamic_partitions("dataset", [DATASET])
            result = job.execute_in_process(
                instance=instance, run_config=RUN_CONFIG, partition_key=DATASET
            )
        finally:
            instance.dispose()
        yield {
            "env": env,
            "home": home,
            "data_root": data_root,
            "result": result,
            "assets": set(job.asset_layer.selected_asset_keys),
        }


def _query(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg2

    conn = psycopg2.connect(url, connect_timeout=10)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            return list(cur.fetchall())
    finally:
        conn.close()


def test_run_and_materializations_live_in_postgres(server, profile):
    from dagster_postgres import (
        PostgresEventLogStorage,
        PostgresRunStorage,
        PostgresScheduleStorage,
    )

    result = profile["result"]
    assert result.success
    instance = dg.DagsterInstance.from_config(str(profile["home"]))
    try:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        assert isinstance(instance.schedule_storage, PostgresScheduleStorage)
        run = instance.get_run_by_id(result.run_id)
        assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS
        assert run.job_name == "train_job"
        assert instance.get_dynamic_partitions("dataset") == [DATASET]
        for key in profile["assets"]:
            event = instance.get_latest_materialization_event(key)
            assert event is not None and event.run_id == result.run_id, key
            assert event.dagster_event is not None
            assert event.dagster_event.partition == DATASET, key
    finally:
        instance.dispose()
    # The same facts straight from the dagster database.
    dagster_db = server.url(profile["env"]["GNNCORE_PG_DB"])
    assert _query(dagster_db, "SELECT status FROM runs WHERE run_id = %s", (result.run_id,)) == [
        ("SUCCESS",)
    ]
    materialized = _query(
        dagster_db,
        "SELECT DISTINCT asset_key FROM event_logs "
        "WHERE run_id = %s AND dagster_event_type = 'ASSET_MATERIALIZATION'",
        (result.run_id,),
    )
    assert {dg.AssetKey.from_db_string(k) for (k,) in materialized} == profile["assets"]
    checks = _query(
        dagster_db,
        "SELECT count(*) FROM event_logs "
        "WHERE run_id = %s AND dagster_event_type = 'ASSET_CHECK_EVALUATION'",
        (result.run_id,),
    )
    assert checks[0][0] == len(list(result.get_asset_check_evaluations())) > 0
    # Nothing fell back to Dagster's sqlite storage.
    assert not list(profile["home"].rglob("*.db"))


def test_mlflow_records_live_in_postgres(server, profile):
    from mlflow import MlflowClient

    result, data_root = profile["result"], profile["data_root"]
    uri = profile["env"]["GNNCORE_MLFLOW_URI"]
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    experiment = client.get_experiment_by_name("gnncore")
    assert experiment is not None
    assert experiment.artifact_location == (data_root / "mlflow" / "artifacts").as_uri()
    runs = client.search_runs(
        [experiment.experiment_id], filter_string=f"tags.dagster_run_id = '{result.run_id}'"
    )
    by_task = {run.data.tags.get("task"): run for run in runs}
    assert {"replication", "placement"} <= set(by_task)
    train_meta = {
        k: v.value
        for k, v in result.asset_materializations_for_node("trained_model")[0].metadata.items()
    }
    train_run = client.get_run(str(train_meta["mlflow_run_id"]))
    assert train_run.info.status == "FINISHED"
    assert train_run.data.metrics["test_accuracy"] == pytest.approx(train_meta["test_accuracy"])
    versions = client.search_model_versions("name = 'gnncore-node-pgtiny'")
    assert [v.run_id for v in versions] == [train_run.info.run_id]
    # The same records straight from the mlflow database.
    mlflow_db = server.url("mlflow")
    assert uri == server.sqlalchemy_url("mlflow")
    rows = _query(
        mlflow_db,
        "SELECT r.status FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
        "WHERE t.key = 'dagster_run_id' AND t.value = %s",
        (result.run_id,),
    )
    assert len(rows) == len(runs) >= 3 and {s for (s,) in rows} == {"FINISHED"}
    metrics = _query(
        mlflow_db,
        "SELECT key FROM latest_metrics WHERE run_uuid = %s",
        (train_run.info.run_id,),
    )
    assert "test_accuracy" in {k for (k,) in metrics}
    assert _query(
        mlflow_db, "SELECT name, run_id FROM model_versions WHERE name = 'gnncore-node-pgtiny'"
    ) == [("gnncore-node-pgtiny", train_run.info.run_id)]
    # Artifacts on the local filesystem under the data root; no sqlite store anywhere.
    assert list((data_root / "mlflow" / "artifacts").rglob("MLmodel"))
    assert not list(data_root.rglob("mlflow.db"))


# Both UIs over the same databases --------------------------------------------------


def _start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _http(url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return dict(json.loads(response.read()))


def _wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            pytest.fail(f"{url}: the server exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"{url} did not answer in {timeout:.0f} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)


RUNS_QUERY = """
query ($id: String!) {
  runsOrError(filter: {runIds: [$id]}) {
    __typename
    ... on Runs { results { runId status jobName } }
  }
  assetNodes(assetKeys: [{path: ["trained_model"]}]) {
    assetMaterializations(limit: 1) { runId }
  }
}
"""

START_SCHEDULE = """
mutation ($selector: ScheduleSelector!) {
  startSchedule(scheduleSelector: $selector) {
    __typename
    ... on ScheduleStateResult { scheduleState { status } }
    ... on PythonError { message }
  }
}
"""


def test_the_run_shows_in_both_uis(server, profile, tmp_path):
    from dagster._core.scheduler.instigation import InstigatorStatus

    result, env = profile["result"], {**os.environ, **profile["env"]}
    env.pop("GNNCORE_MLFLOW_ARTIFACTS", None)
    dagster_port, mlflow_port = free_port(), free_port()
    dagster_log, mlflow_log = tmp_path / "dagster-webserver.log", tmp_path / "mlflow.log"
    artifacts = str(profile["data_root"] / "mlflow" / "artifacts")
    procs = [
        _start(
            [
                str(VENV_BIN / "dagster-webserver"),
                "-w",
                "workspace.yaml",
                "-h",
                "127.0.0.1",
                "-p",
                str(dagster_port),
            ],
            env,
            dagster_log,
        ),
        _start(
            [
                str(VENV_BIN / "mlflow"),
                "server",
                "--host",
                "127.0.0.1",
                "--port",
                str(mlflow_port),
                "--workers",
                "1",
                "--default-artifact-root",
                artifacts,
            ],
            {**env, "MLFLOW_BACKEND_STORE_URI": profile["env"]["GNNCORE_MLFLOW_URI"]},
            mlflow_log,
        ),
    ]
    try:
        mlflow_url = f"http://127.0.0.1:{mlflow_port}"
        _wait_http(f"{mlflow_url}/health", procs[1], mlflow_log, timeout=120)
        experiment = _http(
            f"{mlflow_url}/api/2.0/mlflow/experiments/get-by-name?experiment_name=gnncore"
        )["experiment"]
        found = _http(
            f"{mlflow_url}/api/2.0/mlflow/runs/search",
            {
                "experiment_ids": [experiment["experiment_id"]],
                "filter": f"tags.dagster_run_id = '{result.run_id}'",
            },
        )
        assert len(found["runs"]) >= 3
        assert {r["info"]["status"] for r in found["runs"]} == {"FINISHED"}
        models = _http(f"{mlflow_url}/api/2.0/mlflow/registered-models/search")
        assert "gnncore-node-pgtiny" in {m["name"] for m in models["registered_models"]}

        dagster_url = f"http://127.0.0.1:{dagster_port}"
        _wait_http(f"{dagster_url}/server_info", procs[0], dagster_log, timeout=180)
        answer = _http(
            f"{dagster_url}/graphql", {"query": RUNS_QUERY, "variables": {"id": result.run_id}}
        )
        assert "errors" not in answer, answer
        runs = answer["data"]["runsOrError"]["results"]
        assert [(r["runId"], r["status"], r["jobName"]) for r in runs] == [
            (result.run_id, "SUCCESS", "train_job")
        ]
        (node,) = answer["data"]["assetNodes"]
        assert node["assetMaterializations"] == [{"runId": result.run_id}]
        # Turning the schedule on through the UI's API writes PostgreSQL's schedule storage.
        selector = {
            "repositoryLocationName": "pipelines.definitions",
            "repositoryName": "__repository__",
            "scheduleName": "nightly_retraining",
        }
        deadline = time.monotonic() + 120
        while True:  # the code location may still be loading
            started = _http(
                f"{dagster_url}/graphql",
                {"query": START_SCHEDULE, "variables": {"selector": selector}},
            )
            outcome = started.get("data", {}).get("startSchedule") or {}
            if outcome.get("__typename") == "ScheduleStateResult" or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert outcome == {
            "__typename": "ScheduleStateResult",
            "scheduleState": {"status": "RUNNING"},
        }, started
    finally:
        for proc in procs:
            stop_group(proc)
    rows = _query(
        server.url(profile["env"]["GNNCORE_PG_DB"]),
        "SELECT job_body FROM jobs WHERE job_type = 'SCHEDULE' AND job_body LIKE %s",
        ("%nightly_retraining%",),
    )
    assert len(rows) == 1
    instance = dg.DagsterInstance.from_config(str(profile["home"]))
    try:
        states = {s.instigator_name: s.status for s in instance.all_instigator_state()}
        assert states["nightly_retraining"] == InstigatorStatus.RUNNING
    finally:
        instance.dispose()
