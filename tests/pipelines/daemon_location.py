"""The code location the daemon tests load: the real assets, checks, job and
resources with the real schedule and sensor factories, ticking every minute (the
schedule) and every few seconds (the inbox sensor) on small settings, so that a
run takes seconds, not the demo's minutes."""

from __future__ import annotations

import dagster as dg

from assets import ALL_ASSETS, ALL_CHECKS
from pipelines.definitions import build_resources
from pipelines.jobs import train_job
from pipelines.schedules import retraining_schedule
from pipelines.sensors import inbox_sensor

SCHEDULE = "minutely_retraining"
#: The dataset partition the schedule test registers (the schedule runs every partition).
NIGHTLY_DATASET = "nightly"
SENSOR = "fast_inbox_sensor"

SMALL_TRAINING = {
    "ops": {
        "graph_partition": {"config": {"parts": 2}},
        "trained_model": {
            "config": {
                "node": {"epochs": 2, "hidden": 16, "batch_size": 128},
                "link": {"epochs": 1, "dim": 16},
            }
        },
    },
    # One process for every step: each step subprocess would import torch again.
    "execution": {"config": {"in_process": {}}},
}
SMALL_RUN = {
    **SMALL_TRAINING,
    "ops": {
        **SMALL_TRAINING["ops"],
        "raw_dataset": {
            "config": {
                "num_nodes": 1200,
                "avg_degree": 8,
                "num_classes": 4,
                "num_features": 16,
            }
        },
    },
}

defs = dg.Definitions(
    assets=ALL_ASSETS,
    asset_checks=ALL_CHECKS,
    jobs=[train_job],
    # Its own dataset partition only: the inbox test's datasets (same daemon) are not
    # retrained by it.
    schedules=[retraining_schedule(SCHEDULE, "* * * * *", SMALL_RUN, datasets=[NIGHTLY_DATASET])],
    sensors=[
        inbox_sensor(
            SENSOR, minimum_interval_seconds=3, settle_seconds=1, run_config=SMALL_TRAINING
        )
    ],
    resources=build_resources(),
)
