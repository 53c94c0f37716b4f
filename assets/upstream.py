"""Finding an upstream asset's directory from its latest materialization."""

from pathlib import Path
from typing import Any

import dagster as dg


def latest_metadata(context: Any, key: dg.AssetKey) -> dict[str, Any]:
    """Metadata values of the latest materialization of ``key``.

    Every asset here records the directory it wrote as ``path``; downstream
    assets and checks find their input through it.
    """
    event = context.instance.get_latest_materialization_event(key)
    if event is None or event.asset_materialization is None:
        raise dg.Failure(f"{key.to_user_string()} has not been materialized yet")
    return {k: v.value for k, v in event.asset_materialization.metadata.items()}


def upstream_path(context: Any, key: dg.AssetKey) -> Path:
    """The directory the latest materialization of ``key`` wrote."""
    return Path(str(latest_metadata(context, key)["path"]))
