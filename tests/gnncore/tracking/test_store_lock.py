"""Processes that open one new SQLite MLflow store at once (a sensor tick's runs)
all get it: its tables and each experiment are created once, under the store's lock."""

from __future__ import annotations

import subprocess
import sys

from mlflow import MlflowClient

CHILD = """
import sys
from gnncore.tracking.mlflow import MlflowTracker

tracker = MlflowTracker(sys.argv[1], experiment="shared")
with tracker.start_run(run_name=sys.argv[2]) as run:
    run.log_metrics({"x": 1.0}, step=0)
"""


def test_concurrent_first_opens_of_a_sqlite_store(tmp_path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow' / 'mlflow.db'}"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, uri, f"run-{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    for child in children:
        _, err = child.communicate(timeout=240)
        assert child.returncode == 0, err
    client = MlflowClient(tracking_uri=uri)
    (experiment,) = [e for e in client.search_experiments() if e.name == "shared"]
    runs = client.search_runs([experiment.experiment_id])
    assert sorted(r.info.run_name for r in runs) == [f"run-{i}" for i in range(4)]
    assert all(r.info.status == "FINISHED" for r in runs)
    assert (tmp_path / "mlflow" / "mlflow.db.lock").exists()
