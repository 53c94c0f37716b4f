"""Finding an upstream asset's output: the materialization of the same lineage.

Every asset here records the directory it wrote as ``path`` in its metadata;
downstream assets and checks find their input through it. When the upstream
asset was materialized in the *current run*, that materialization is the
input (so two runs materializing ``graph`` at once each train on their own
graph); otherwise the latest materialization is (a run that selects only
the downstream asset builds on the newest upstream output).

The same-run materialization comes from the run's own event records
(``instance.get_records_for_run``), not from
``get_latest_materialization_event``: another run, or a runless report, may
have materialized the upstream asset after this run did, and the latest would
then belong to another lineage (tests/assets/test_stage_versioning.py checks
this with a hook that reports a later graph between the steps).
"""

from pathlib import Path
from typing import Any

import dagster as dg


def _values(materialization: dg.AssetMaterialization) -> dict[str, Any]:
    return {k: v.value for k, v in materialization.metadata.items()}


def upstream_metadata(context: Any, key: dg.AssetKey) -> dict[str, Any]:
    """Metadata values of the materialization of ``key`` this input comes from:
    the one in the current run when there is one, else the latest."""
    records = context.instance.get_records_for_run(
        run_id=context.run.run_id,
        of_type=dg.DagsterEventType.ASSET_MATERIALIZATION,
        ascending=False,
    ).records
    for record in records:
        materialization = record.event_log_entry.asset_materialization
        if materialization is not None and materialization.asset_key == key:
            return _values(materialization)
    event = context.instance.get_latest_materialization_event(key)
    if event is None or event.asset_materialization is None:
        raise dg.Failure(f"{key.to_user_string()} has not been materialized yet")
    return _values(event.asset_materialization)


def upstream_path(context: Any, key: dg.AssetKey) -> Path:
    """The directory the materialization of ``key`` this input comes from wrote."""
    return Path(str(upstream_metadata(context, key)["path"]))
