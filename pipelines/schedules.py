"""Nightly retraining."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg

from pipelines.jobs import train_job

NIGHTLY_CRON = "0 2 * * *"


def retraining_schedule(
    name: str = "nightly_retraining",
    cron_schedule: str = NIGHTLY_CRON,
    run_config: Mapping[str, Any] | None = None,
) -> dg.ScheduleDefinition:
    """A schedule that runs ``train_job`` (ingest, partition, plan, train, gate) on
    ``cron_schedule`` (UTC) with ``run_config`` (empty: the assets' defaults).

    It ships stopped: a fresh deployment must not retrain a generated graph every
    night. Turn it on under *Automation* in the Dagster UI, or with
    ``dagster schedule start <name> -w workspace.yaml``; the daemon (``make ui``
    runs it beside the webserver) then launches a run on every tick.
    """
    return dg.ScheduleDefinition(
        name=name,
        cron_schedule=cron_schedule,
        execution_timezone="UTC",
        job=train_job,
        run_config=dict(run_config or {}),
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description=f"Re-ingest, re-partition and retrain on '{cron_schedule}' (UTC); ships "
        "stopped: turn it on under Automation in the Dagster UI.",
    )


nightly_retraining = retraining_schedule()
