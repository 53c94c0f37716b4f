"""The code location the daemon tests load: the real assets, checks, job and
resources with the real schedule factory, ticking every minute on a small graph
so that a tick's run takes seconds, not the demo's minutes."""

from __future__ import annotations

import dagster as dg

from assets import ALL_ASSETS, ALL_CHECKS
from pipelines.definitions import build_resources
from pipelines.jobs import train_job
from pipelines.schedules import retraining_schedule

SCHEDULE = "minutely_retraining"

SMALL_RUN = {
    "ops": {
        "raw_dataset": {
            "config": {
                "name": "nightly",
                "num_nodes": 1200,
                "avg_degree": 8,
                "num_classes": 4,
                "num_features": 16,
            }
        },
        "graph_partition": {"config": {"parts": 2}},
        "trained_model": {"config": {"node": {"epochs": 2, "hidden": 16, "batch_size": 128}}},
    },
    # One process for every step: each step subprocess would import torch again.
    "execution": {"config": {"in_process": {}}},
}

defs = dg.Definitions(
    assets=ALL_ASSETS,
    asset_checks=ALL_CHECKS,
    jobs=[train_job],
    schedules=[retraining_schedule(SCHEDULE, "* * * * *", SMALL_RUN)],
    resources=build_resources(),
)
