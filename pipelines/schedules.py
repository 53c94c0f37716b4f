"""Nightly retraining."""

import dagster as dg

from pipelines.jobs import train_job

nightly_retraining = dg.ScheduleDefinition(
    name="nightly_retraining",
    cron_schedule="0 2 * * *",
    execution_timezone="UTC",
    job=train_job,
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Re-ingest, re-partition and retrain every night at 02:00 UTC (ships stopped: "
    "turn it on under Automation in the Dagster UI).",
)
