"""One MLflow run per plan: settings as params, scalar metrics, and its charts."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gnncore.tracking import RunTracker


def scalar_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The numeric entries of ``metrics``, lists flattened as ``name_<i>``."""
    out: dict[str, float] = {}
    for name, value in metrics.items():
        if isinstance(value, bool):
            out[name] = float(value)
        elif isinstance(value, (int, float)):
            out[name] = float(value)
        elif isinstance(value, (list, tuple)) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
        ):
            out.update({f"{name}_{i}": float(v) for i, v in enumerate(value)})
    return out


def log_plan_run(
    tracking: RunTracker,
    run_name: str,
    tags: Mapping[str, Any],
    params: Mapping[str, Any],
    metrics: Mapping[str, Any],
    charts: Mapping[str, bytes],
) -> str:
    """Log a finished plan as one run; returns its id."""
    with tracking.start_run(run_name, dict(tags)) as run:
        run.log_params(dict(params))
        run.log_metrics(scalar_metrics(metrics))
        with tempfile.TemporaryDirectory() as tmp:
            for name, png in charts.items():
                path = Path(tmp) / name
                path.write_bytes(png)
                run.log_artifact(path)
        return str(run.run_id)
