"""Experiment tracking behind a small protocol; MLflow is one backend.

:class:`RunLogger` / :class:`RunTracker` are what training code accepts;
:class:`~gnncore.tracking.mlflow.MlflowTracker` implements them with an
``mlflow.MlflowClient``. The MLflow module is imported on first use, so
importing :mod:`gnncore.tracking` stays cheap.
"""

from gnncore.lazy import lazy_attributes
from gnncore.tracking.base import (
    FAILED,
    FINISHED,
    KILLED,
    RUNNING,
    BaseRunLogger,
    RunLogger,
    RunTracker,
)

__all__ = [
    "FAILED",
    "FINISHED",
    "KILLED",
    "RUNNING",
    "BaseRunLogger",
    "MlflowRunLogger",
    "MlflowTracker",
    "RunLogger",
    "RunTracker",
    "default_tracking_uri",
]

__getattr__ = lazy_attributes(
    __name__,
    {
        name: "gnncore.tracking.mlflow"
        for name in ("MlflowRunLogger", "MlflowTracker", "default_tracking_uri")
    },
)
