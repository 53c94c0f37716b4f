"""The pipeline under a real ``dagster-daemon``, as it runs for users.

* Nightly retraining: the schedule is turned on the way a user does from the
  command line, the daemon ticks it, the run of the one dataset partition
  trains a model, and the quality gate decides its promotion.
* New data: edge lists dropped into the inbox folder become dataset partitions
  and registered models with no other action; a broken file fails its own run,
  naming file and line.

The schedule and sensor come from the production factories
(``retraining_schedule``, ``inbox_sensor``) on a per-minute cron, a sensor that
looks every few seconds and a small graph (``daemon_location.py``).

One daemon serves both tests: the module turns the schedule on, starts the daemon
and drops the inbox files at once, so that the sensor's runs go while the schedule
waits for its minute (the schedule retrains its own dataset partition only).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import numpy as np
import polars as pl
import pytest
from dagster._core.events import DagsterEventType

from assets.partitions import PARTITIONS_NAME
from tests.pipelines.daemon_location import NIGHTLY_DATASET, SCHEDULE, SENSOR
from tests.processes import stop_group

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
RUN_TIMEOUT_S = 420


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A fresh DAGSTER_HOME with the project's instance settings, a data root, and
    a workspace that loads ``daemon_location.py``."""
    tmp_path = tmp_path_factory.mktemp("daemon")
    for tool in ("dagster", "dagster-daemon"):
        if not (BIN / tool).exists():
            pytest.skip(f"{tool} is not installed beside {sys.executable}")
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    shutil.copy(ROOT / "pipelines" / "dagster.yaml", dagster_home / "dagster.yaml")
    workspace = tmp_path / "workspace.yaml"
    location = ROOT / "tests" / "pipelines" / "daemon_location.py"
    workspace.write_text(
        "load_from:\n"
        f"  - python_file:\n      relative_path: {location}\n"
        f"      working_directory: {ROOT}\n      location_name: daemon_tests\n"
    )
    env = {
        **os.environ,
        "DAGSTER_HOME": str(dagster_home),
        "GNNCORE_DATA_ROOT": str(tmp_path / "data"),
        "PYTHONPATH": str(ROOT),
    }
    # Create the instance's storage before the daemon and the test both open it
    # (two processes creating the same sqlite schema at once race).
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        instance.get_runs(limit=1)
    return tmp_path, env, workspace


@contextlib.contextmanager
def running_daemon(tmp: Path, env: dict[str, str], workspace: Path) -> Iterator[Path]:
    """``dagster-daemon run`` in its own process group, stopped on exit; yields its log."""
    log_path = tmp / "daemon.log"
    with log_path.open("w") as log:
        daemon = subprocess.Popen(
            [str(BIN / "dagster-daemon"), "run", "-w", str(workspace)],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield log_path
            assert daemon.poll() is None, log_path.read_text()[-3000:]
        finally:
            stop_group(daemon, timeout=30)


def instance_of(env: dict[str, str]) -> dg.DagsterInstance:
    return dg.DagsterInstance.from_config(env["DAGSTER_HOME"])


def wait_for_runs(
    env: dict[str, str], log: Path, tags: dict[str, str], count: int
) -> list[dg.DagsterRun]:
    """The first ``count`` runs with ``tags`` (oldest first), once finished (bounded
    wait). Later ones are left alone: under load a run of the per-minute schedule can
    outlast the minute, and the next tick's run (queued behind it for the ``gpu``
    pool) would otherwise keep the wait going."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    # One instance for every poll: opening one (storage, settings) each time cost
    # more CPU than the queries.
    with instance_of(env) as instance:
        while time.monotonic() < deadline:
            runs = list(
                instance.get_runs(filters=dg.RunsFilter(tags=tags), limit=count, ascending=True)
            )
            if len(runs) >= count and all(r.is_finished for r in runs):
                return runs
            time.sleep(3)
    raise AssertionError(
        f"runs tagged {tags} did not finish in time; daemon log:\n" + (log.read_text()[-3000:])
    )


def events(env: dict[str, str], run_id: str, kind: DagsterEventType) -> list:
    with instance_of(env) as instance:
        return [e for e in instance.all_logs(run_id, of_type=kind) if e.dagster_event is not None]


def materialized(env: dict[str, str], run_id: str, partition: str) -> set[str]:
    """The assets the run materialized; every one of them for ``partition``."""
    found = events(env, run_id, DagsterEventType.ASSET_MATERIALIZATION)
    assert {e.dagster_event.partition for e in found} <= {partition}, found
    return {e.dagster_event.asset_key.to_user_string() for e in found}


def production_version(env: dict[str, str], model: str) -> str | None:
    from gnncore.tracking.mlflow import default_tracking_uri
    from gnncore.tracking.registry import ModelRegistry

    production = ModelRegistry(default_tracking_uri(env["GNNCORE_DATA_ROOT"])).production(model)
    return None if production is None else str(production.version)


def cli(env: dict[str, str], *args: str) -> None:
    done = subprocess.run(
        [str(BIN / "dagster"), *args], env=env, cwd=ROOT, capture_output=True, text=True,
        timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def daemon(home) -> Iterator[tuple[dict[str, str], Path, Path]]:
    """The schedule turned on for the one dataset partition it retrains, the daemon
    running, and the inbox files dropped; yields the environment, the daemon's log
    and the inbox."""
    tmp, env, workspace = home
    with instance_of(env) as instance:  # one dataset partition to retrain
        instance.add_dynamic_partitions(PARTITIONS_NAME, [NIGHTLY_DATASET])
    # Turned on as a user would without the UI (the UI's toggle writes the same state).
    cli(env, "schedule", "start", SCHEDULE, "-w", str(workspace))
    inbox = Path(env["GNNCORE_DATA_ROOT"]) / "inbox"
    inbox.mkdir(parents=True)
    with running_daemon(tmp, env, workspace) as log:
        _labelled_graph(inbox, "payments")
        (inbox / "broken.csv").write_text("src,dst\nacct-1,acct-2\nacct-3\nacct-2,acct-4\n")
        yield env, log, inbox


def test_schedule_ticks_under_the_daemon_and_the_gate_promotes(daemon):
    env, log, _ = daemon
    (run,) = wait_for_runs(env, log, {"dagster/schedule_name": SCHEDULE}, 1)
    with instance_of(env) as instance:
        errors = [e.user_message for e in instance.all_logs(run.run_id) if e.level >= 40]
    assert run.status == dg.DagsterRunStatus.SUCCESS, errors
    assert run.tags["dagster/partition"] == NIGHTLY_DATASET
    assert {"graph", "graph_partition", "trained_model", "production_model"} <= materialized(
        env, run.run_id, NIGHTLY_DATASET
    )
    # the library's own log lines reach the run's event log (pipelines/dagster.yaml)
    with instance_of(env) as instance:
        messages = [e.user_message for e in instance.all_logs(run.run_id)]
    assert any(" evaluation of " in m and " nodes: " in m for m in messages), messages[-20:]
    checks = {
        e.dagster_event.event_specific_data.check_name: e.dagster_event.event_specific_data
        for e in events(env, run.run_id, DagsterEventType.ASSET_CHECK_EVALUATION)
    }
    gate = checks["model_quality"]
    assert gate.passed
    meta = {k: v.value for k, v in gate.metadata.items()}
    assert meta["production_version"] == "none"  # a first model meets no production version
    assert production_version(env, "gnncore-node-nightly") == meta["candidate_version"]


def _labelled_graph(folder: Path, name: str, nodes: int = 600) -> None:
    """A string-id CSV edge list (with header) and a Parquet node table."""
    rng = np.random.default_rng(1)
    community = np.arange(nodes) % 3
    src = rng.integers(0, nodes, nodes * 4)
    partner = rng.integers(0, nodes // 3, nodes * 4) * 3 + community[src]
    dst = np.where(rng.random(nodes * 4) < 0.9, partner, rng.integers(0, nodes, nodes * 4))
    ids = np.array([f"acct-{i:04d}" for i in range(nodes)])
    staging = folder.parent / "staging"
    staging.mkdir(exist_ok=True)
    pl.DataFrame({"src": ids[src], "dst": ids[dst]}).write_csv(staging / f"{name}.csv")
    features = np.eye(3, 8)[community] + 0.3 * rng.standard_normal((nodes, 8))
    pl.DataFrame(
        {
            "node_id": ids,
            "label": np.array(["retail", "fraud", "bank"])[community],
            "features": features.astype(np.float32).tolist(),
        }
    ).write_parquet(staging / f"{name}.nodes.parquet")
    # Moved in whole, as a user's tool would finish a copy.
    for file in staging.iterdir():
        file.rename(folder / file.name)


def test_a_dropped_edge_list_becomes_a_registered_model(daemon):
    env, log, inbox = daemon
    runs = wait_for_runs(env, log, {"dagster/sensor_name": SENSOR}, 2)
    by_dataset: dict[str, dg.DagsterRun] = {r.tags["gnncore/dataset"]: r for r in runs}
    assert set(by_dataset) == {"payments", "broken"}
    # One dataset partition per file, added by the sensor (beside the schedule's own);
    # each run is its file's partition.
    with instance_of(env) as instance:
        assert set(instance.get_dynamic_partitions(PARTITIONS_NAME)) == {
            "payments",
            "broken",
            NIGHTLY_DATASET,
        }
    assert {d: r.tags["dagster/partition"] for d, r in by_dataset.items()} == {
        "payments": "payments",
        "broken": "broken",
    }

    good = by_dataset["payments"]
    assert good.status == dg.DagsterRunStatus.SUCCESS
    assert {"graph", "trained_model", "production_model"} <= materialized(
        env, good.run_id, "payments"
    )
    assert production_version(env, "gnncore-node-payments") == "1"

    bad = by_dataset["broken"]
    assert bad.status == dg.DagsterRunStatus.FAILURE
    failures = events(env, bad.run_id, DagsterEventType.STEP_FAILURE)
    message = str(failures[0].dagster_event.event_specific_data.error)
    assert f"{inbox / 'broken.csv'}:3" in message, message
    assert "graph" not in materialized(env, bad.run_id, "broken")
