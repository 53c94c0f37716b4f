"""Nightly retraining under a real ``dagster-daemon``: the schedule is turned on
the way a user does from the command line, the daemon ticks it, the run trains a
model, and the quality gate decides its promotion.

The schedule is the production factory's (``retraining_schedule``) on a
per-minute cron and a small graph (``retraining_location.py``), so one tick comes
within a minute of the daemon's start.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.events import DagsterEventType

from tests.pipelines.retraining_location import SCHEDULE

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TICK_AND_RUN_TIMEOUT_S = 420


def _workspace(tmp: Path) -> Path:
    path = tmp / "workspace.yaml"
    location = ROOT / "tests" / "pipelines" / "retraining_location.py"
    path.write_text(
        "load_from:\n"
        f"  - python_file:\n      relative_path: {location}\n"
        f"      working_directory: {ROOT}\n      location_name: retraining\n"
    )
    return path


@pytest.fixture
def home(tmp_path):
    """A fresh DAGSTER_HOME with the project's instance settings, and a data root."""
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    shutil.copy(ROOT / "pipelines" / "dagster.yaml", dagster_home / "dagster.yaml")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(dagster_home),
        "GNNCORE_DATA_ROOT": str(tmp_path / "data"),
        "PYTHONPATH": str(ROOT),
    }
    return tmp_path, env


def _runs(env: dict[str, str]) -> list[dg.DagsterRun]:
    instance = dg.DagsterInstance.from_config(env["DAGSTER_HOME"])
    with instance:
        return list(
            instance.get_runs(filters=dg.RunsFilter(tags={"dagster/schedule_name": SCHEDULE}))
        )


def test_schedule_ticks_under_the_daemon_and_the_gate_promotes(home):
    tmp, env = home
    workspace = _workspace(tmp)
    for tool in ("dagster", "dagster-daemon"):
        if not (BIN / tool).exists():
            pytest.skip(f"{tool} is not installed beside {sys.executable}")
    # Turned on as a user would without the UI (the UI's toggle writes the same state).
    started = subprocess.run(
        [str(BIN / "dagster"), "schedule", "start", SCHEDULE, "-w", str(workspace)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert started.returncode == 0, started.stdout + started.stderr
    log = (tmp / "daemon.log").open("w")
    daemon = subprocess.Popen(
        [str(BIN / "dagster-daemon"), "run", "-w", str(workspace)],
        env=env,
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + TICK_AND_RUN_TIMEOUT_S
        run = None
        while time.monotonic() < deadline:
            assert daemon.poll() is None, (tmp / "daemon.log").read_text()[-3000:]
            runs = _runs(env)
            if runs and runs[0].is_finished:
                run = runs[0]
                break
            time.sleep(3)
        assert run is not None, (
            "no scheduled run finished in time; daemon log:\n"
            + (tmp / "daemon.log").read_text()[-3000:]
        )
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.pid, signal.SIGKILL)
        log.close()

    instance = dg.DagsterInstance.from_config(env["DAGSTER_HOME"])
    with instance:
        assert run.status == dg.DagsterRunStatus.SUCCESS, [
            e.message for e in instance.all_logs(run.run_id) if e.is_error
        ]
        assert run.tags["dagster/schedule_name"] == SCHEDULE
        materialized = {
            e.dagster_event.asset_key.to_user_string()
            for e in instance.all_logs(run.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION)
            if e.dagster_event is not None and e.dagster_event.asset_key is not None
        }
        assert {"graph", "graph_partition", "trained_model", "production_model"} <= materialized
        checks = {
            e.dagster_event.event_specific_data.check_name: e.dagster_event.event_specific_data
            for e in instance.all_logs(run.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)
            if e.dagster_event is not None
        }
    gate = checks["model_quality"]
    assert gate.passed
    meta = {k: v.value for k, v in gate.metadata.items()}
    # A first model meets no production version: the gate promotes it.
    assert meta["production_version"] == "none"

    from gnncore.tracking.mlflow import default_tracking_uri
    from gnncore.tracking.registry import ModelRegistry

    registry = ModelRegistry(default_tracking_uri(env["GNNCORE_DATA_ROOT"]))
    production = registry.production("gnncore-node-nightly")
    assert production is not None
    assert str(production.version) == meta["candidate_version"]
