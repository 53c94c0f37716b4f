"""Nightly retraining: one ``train_job`` run per dataset partition."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from assets.dataset import DatasetConfig, raw_dataset
from assets.partitions import PARTITIONS_NAME
from assets.train import trained_model
from pipelines.jobs import train_job
from pipelines.run_config import merged_run_config

NIGHTLY_CRON = "0 2 * * *"


def _last_op_config(
    instance: dg.DagsterInstance, asset: dg.AssetsDefinition, partition: str
) -> dict[str, Any]:
    """The config of ``asset``'s op in the run that last materialized ``partition``
    of it (empty when none did, or when that run is gone)."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset.key, asset_partitions=[partition]), limit=1
    ).records
    run = instance.get_run_by_id(records[0].run_id) if records else None
    if run is None:
        return {}
    config: Mapping[str, Any] = run.run_config
    ops: Mapping[str, Any] = config.get("ops") or {}
    return dict((ops.get(asset.op.name) or {}).get("config") or {})


def dataset_run_config(
    instance: dg.DagsterInstance, partition: str, base: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The run config that retrains dataset ``partition``: ``base`` with, on top,
    the dataset's own raw_dataset config and training task from the runs that
    last materialized them (the inbox file and its node table, a generator's
    settings, ``link`` for an unlabelled graph)."""
    own: dict[str, Any] = {}
    # Fields the config no longer has (the dataset name is the partition key) are dropped.
    raw = {
        k: v
        for k, v in _last_op_config(instance, raw_dataset, partition).items()
        if k in DatasetConfig.model_fields
    }
    if raw:
        own["raw_dataset"] = {"config": raw}
    task = _last_op_config(instance, trained_model, partition).get("task")
    if task:
        own["trained_model"] = {"config": {"task": task}}
    return merged_run_config(dict(base or {}), {"ops": own} if own else {})


def retraining_schedule(
    name: str = "nightly_retraining",
    cron_schedule: str = NIGHTLY_CRON,
    run_config: Mapping[str, Any] | None = None,
    datasets: Sequence[str] | None = None,
) -> dg.ScheduleDefinition:
    """A schedule that runs ``train_job`` (ingest, partition, plan, train, gate) on
    ``cron_schedule`` (UTC) for every dataset partition, or for those of
    ``datasets`` that exist: one run per partition, each with ``run_config``
    (empty: the assets' defaults) under the dataset's own source and task
    (:func:`dataset_run_config`). Each dataset's quality gate compares with its
    own production model (``gnncore-<task>-<dataset>``).

    It ships stopped: a fresh deployment must not retrain every night unasked.
    Turn it on under *Automation* in the Dagster UI, or with
    ``dagster schedule start <name> -w workspace.yaml``; the daemon (``make ui``
    runs it beside the webserver) then launches the runs on every tick.
    """
    chosen = None if datasets is None else set(datasets)

    @dg.schedule(
        name=name,
        cron_schedule=cron_schedule,
        execution_timezone="UTC",
        job=train_job,
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description=f"Re-ingest, re-partition and retrain every dataset partition"
        f"{'' if chosen is None else ' of ' + ', '.join(sorted(chosen))} on "
        f"'{cron_schedule}' (UTC); ships stopped: turn it on under Automation in the "
        "Dagster UI.",
    )
    def _retraining(
        context: dg.ScheduleEvaluationContext,
    ) -> list[dg.RunRequest] | dg.SkipReason:
        keys = context.instance.get_dynamic_partitions(PARTITIONS_NAME)
        keys = [k for k in keys if chosen is None or k in chosen]
        if not keys:
            return dg.SkipReason(
                f"no dataset partition{'' if chosen is None else ' of ' + str(sorted(chosen))} "
                "yet: drop a file into the inbox, run `make demo`, or add one in the UI"
            )
        return [
            dg.RunRequest(
                run_key=key,
                partition_key=key,
                run_config=dataset_run_config(context.instance, key, run_config),
                tags={"gnncore/dataset": key},
            )
            for key in keys
        ]

    return _retraining


nightly_retraining = retraining_schedule()
