"""Finding an upstream asset's output: the materialization of the same lineage.

Every asset here records the directory it wrote as ``path`` in its metadata;
downstream assets and checks find their input through it. The assets are
partitioned by dataset (:mod:`assets.partitions`), and an input is always a
materialization of the *same partition*: the trained model of ``payments``
reads the graph of ``payments``, even when another dataset ran since.

Within the partition, the materialization of the *current run* wins when there
is one (so two runs materializing ``graph`` of one dataset at once each train
on their own graph); otherwise the partition's latest materialization is the
input (a run that selects only the downstream asset builds on the newest
upstream output of its dataset). A partition whose upstream was never
materialized fails with a ``dg.Failure`` naming the asset and the partition.

The same-run materialization comes from the run's own event records
(``instance.get_records_for_run``), not from the latest materialization:
another run, or a runless report, may have materialized the upstream asset
after this run did, and the latest would then belong to another lineage
(tests/assets/test_stage_versioning.py checks this with a hook that reports a
later graph between the steps).
"""

from pathlib import Path
from typing import Any

import dagster as dg


def _values(materialization: dg.AssetMaterialization) -> dict[str, Any]:
    return {k: v.value for k, v in materialization.metadata.items()}


def _partition_of(context: Any) -> str | None:
    return str(context.partition_key) if getattr(context, "has_partition_key", False) else None


def upstream_metadata(context: Any, key: dg.AssetKey) -> dict[str, Any]:
    """Metadata values of the materialization of ``key`` this input comes from: of
    the context's partition (dataset), the one in the current run when there is
    one, else that partition's latest."""
    partition = _partition_of(context)
    records = context.instance.get_records_for_run(
        run_id=context.run.run_id,
        of_type=dg.DagsterEventType.ASSET_MATERIALIZATION,
        ascending=False,
    ).records
    for record in records:
        materialization = record.event_log_entry.asset_materialization
        if (
            materialization is not None
            and materialization.asset_key == key
            and materialization.partition == partition
        ):
            return _values(materialization)
    if partition is None:
        event = context.instance.get_latest_materialization_event(key)
        if event is None or event.asset_materialization is None:
            raise dg.Failure(f"{key.to_user_string()} has not been materialized yet")
        return _values(event.asset_materialization)
    latest = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=1
    ).records
    materialization = latest[0].asset_materialization if latest else None
    if materialization is None:
        raise dg.Failure(
            f"{key.to_user_string()} has not been materialized for dataset partition "
            f"{partition!r} yet: materialize it (and what it depends on) for {partition!r} first"
        )
    return _values(materialization)


def upstream_path(context: Any, key: dg.AssetKey) -> Path:
    """The directory the materialization of ``key`` this input comes from wrote."""
    return Path(str(upstream_metadata(context, key)["path"]))
