"""Experiment tracking behind a small protocol; MLflow is one backend.

:class:`RunLogger` / :class:`RunTracker` are what training code accepts;
:class:`~gnncore.tracking.mlflow.MlflowTracker` implements them with an
``mlflow.MlflowClient``. The MLflow module is imported on first use, so
importing :mod:`gnncore.tracking` stays cheap.
"""

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

_LAZY = {"MlflowRunLogger", "MlflowTracker", "default_tracking_uri"}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from gnncore.tracking import mlflow as _mlflow

        return getattr(_mlflow, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
