"""The inbox sensor: a dropped edge list becomes a trained, registered model.

Every edge list a user drops into the inbox folder (``storage.inbox``, default
``<data root>/inbox``; :mod:`gnncore.io.versioning.inbox` says which files count) adds the
dataset's partition (the ``dataset`` dynamic partitions, keyed by the dataset
name) and starts one ``train_job`` run of that partition: ingestion (with the node table beside it),
partitioning, both plans, training, the quality gate and promotion of the
registered model ``gnncore-<task>-<dataset>``. A dataset with a node table that
has a ``label`` column trains node classification; any other trains link
prediction. The cursor remembers each file's digest, so a file rewritten with
the same bytes starts nothing and a changed one starts a new run; run keys
(dataset name + digest) keep a reset cursor from repeating runs. A file that
fails ingestion fails its own run, whose error names the file and line; the
sensor goes on with the others.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import dagster as dg

from assets.partitions import DATASET_PARTITIONS
from gnncore.io.versioning.inbox import DroppedDataset, InboxState, scan_inbox
from pipelines.jobs import train_job
from pipelines.run_config import merged_run_config
from resources import DataRootResource
from resources.storage import check_safe_name


def task_of(dataset: DroppedDataset) -> str:
    """``node`` when the dataset's node table labels nodes, else ``link``."""
    from gnncore.io.readers.node_table import LABEL_COLUMN, node_table_columns

    if dataset.nodes is not None and LABEL_COLUMN in node_table_columns(dataset.nodes):
        return "node"
    return "link"


def has_features(dataset: DroppedDataset) -> bool:
    """Whether the dataset's node table has feature columns (anything beside the
    id, label and split columns)."""
    from gnncore.io.readers.node_table import (
        ID_COLUMN,
        LABEL_COLUMN,
        SPLIT_COLUMN,
        node_table_columns,
    )

    if dataset.nodes is None:
        return False
    plain = {ID_COLUMN, LABEL_COLUMN, SPLIT_COLUMN}
    return any(c not in plain for c in node_table_columns(dataset.nodes))


def inbox_run_request(
    dataset: DroppedDataset, run_config: Mapping[str, Any] | None = None
) -> dg.RunRequest:
    """The ``train_job`` run of the dataset's partition for one dropped dataset
    (``run_config`` under it). A dropped node table's features are standardised
    (raw magnitudes such as amounts or ages train badly), unless ``run_config``
    says otherwise."""
    own = {
        "ops": {
            "raw_dataset": {
                "config": {
                    "source": str(dataset.edges),
                    "nodes": "" if dataset.nodes is None else str(dataset.nodes),
                }
            },
            "trained_model": {"config": {"task": task_of(dataset)}},
        }
    }
    scaling = {"standardize_features": has_features(dataset)}
    defaults = {"ops": {"raw_dataset": {"config": scaling}}}
    return dg.RunRequest(
        run_key=dataset.run_key,
        partition_key=check_safe_name(dataset.name),
        run_config=merged_run_config(merged_run_config(defaults, run_config or {}), own),
        tags={"gnncore/dataset": dataset.name, "gnncore/sha256": dataset.digest[:16]},
    )


def inbox_sensor(
    name: str = "inbox_sensor",
    minimum_interval_seconds: int = 30,
    settle_seconds: float = 10.0,
    run_config: Mapping[str, Any] | None = None,
) -> dg.SensorDefinition:
    """A sensor that requests a ``train_job`` run per new or changed dropped dataset,
    of the dataset's partition, which it adds in the same tick.

    Files count once unchanged for ``settle_seconds`` (copies in progress wait);
    ``run_config`` is merged under each request's own (dataset, task). It ships
    running: it acts only on files a user drops.
    """

    @dg.sensor(
        name=name,
        job=train_job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Trains a model for every edge list dropped into the inbox folder "
        "(storage.inbox, default <data root>/inbox), once per content.",
    )
    def _inbox(context: dg.SensorEvaluationContext, storage: DataRootResource) -> dg.SensorResult:
        folder = storage.inbox_dir()
        state = InboxState.loads(context.cursor)
        scan = scan_inbox(folder, state, settle_seconds)
        for problem in scan.problems:
            context.log.warning(f"{folder}: {problem}")
        requests = []
        for dataset in scan.datasets:
            if state.requested.get(dataset.name) == dataset.digest:
                continue
            try:
                requests.append(inbox_run_request(dataset, run_config))
            except ValueError as exc:  # an unreadable node table: the next change retries
                context.log.warning(str(exc))
                continue
            state.requested[dataset.name] = dataset.digest
            context.log.info(f"{dataset.edges.name}: requesting a run for {dataset.name!r}")
        if requests:
            return dg.SensorResult(
                run_requests=requests,
                dynamic_partitions_requests=[
                    DATASET_PARTITIONS.build_add_request([str(r.partition_key) for r in requests])
                ],
                cursor=state.dumps(),
            )
        waiting = f"; settling: {', '.join(scan.settling)}" if scan.settling else ""
        return dg.SensorResult(
            skip_reason=f"no new or changed dataset in {folder}{waiting}", cursor=state.dumps()
        )

    return _inbox


#: The inbox sensor's timing in the code location, read when it loads: how often it
#: looks (seconds, default 30) and how long a file must stay unchanged before it
#: counts (seconds, default 10). A drop starts its run after settle to settle +
#: interval seconds.
INTERVAL_ENV = "GNNCORE_INBOX_INTERVAL_S"
SETTLE_ENV = "GNNCORE_INBOX_SETTLE_S"


def inbox_timing(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """The ``minimum_interval_seconds`` and ``settle_seconds`` of
    :func:`inbox_sensor` from ``$GNNCORE_INBOX_INTERVAL_S`` (a whole number of
    seconds, at least 1) and ``$GNNCORE_INBOX_SETTLE_S`` (seconds, at least 0);
    the defaults where they are unset or empty."""
    timing: dict[str, Any] = {}
    interval = environ.get(INTERVAL_ENV, "").strip()
    if interval:
        if not interval.isdigit() or int(interval) < 1:
            raise ValueError(f"{INTERVAL_ENV}={interval!r}: a whole number of seconds >= 1")
        timing["minimum_interval_seconds"] = int(interval)
    settle = environ.get(SETTLE_ENV, "").strip()
    if settle:
        try:
            seconds = float(settle)
        except ValueError:
            seconds = -1.0
        if not seconds >= 0:
            raise ValueError(f"{SETTLE_ENV}={settle!r}: a number of seconds >= 0")
        timing["settle_seconds"] = seconds
    return timing


inbox = inbox_sensor(**inbox_timing())
