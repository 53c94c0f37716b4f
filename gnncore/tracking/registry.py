"""Registered model versions and the quality gate that guards promotion.

Each task/dataset pair has one registered model, ``gnncore-<task>-<dataset>``.
Every training run registers a new version; the version users and
downstream jobs should load carries the ``production`` alias (MLflow 3's
replacement for stages). A new version is promoted only when its validation
metric is no worse than production's by more than a margin.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlflow.exceptions import MlflowException

from gnncore.tracking.mlflow import global_tracking_uri, open_client

PRODUCTION_ALIAS = "production"


def registered_model_name(task: str, dataset: str) -> str:
    """``gnncore-<task>-<dataset>``."""
    return f"gnncore-{task}-{dataset}"


@dataclass(frozen=True)
class ModelVersion:
    """One registered version and the metric it was judged by."""

    name: str
    version: str
    run_id: str
    metric: float | None


@dataclass(frozen=True)
class GateDecision:
    """Whether ``candidate`` may replace ``production``."""

    passed: bool
    candidate: float
    production: float | None
    margin: float
    reason: str


def quality_gate(candidate: float, production: float | None, margin: float) -> GateDecision:
    """Pass unless ``candidate < production - margin`` (no production: pass)."""
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    if production is None:
        return GateDecision(True, candidate, None, margin, "no production version yet")
    passed = candidate >= production - margin
    relation = "within" if passed else "worse than"
    return GateDecision(
        passed,
        candidate,
        production,
        margin,
        f"candidate {candidate:.4f} is {relation} production {production:.4f} "
        f"minus margin {margin:g}",
    )


class ModelRegistry:
    """Register, look up and promote versions through an ``MlflowClient``.

    Args:
        tracking_uri (str): The MLflow store (tracking and registry).
        metric (str): The run metric versions are compared by
            (default: ``"best_val_accuracy"``).
    """

    def __init__(self, tracking_uri: str, metric: str = "best_val_accuracy") -> None:
        self.tracking_uri = tracking_uri
        self.client = open_client(tracking_uri, registry_uri=tracking_uri)
        self.metric = metric

    def register(self, name: str, model_uri: str, run_id: str) -> ModelVersion:
        """Create ``name`` if needed and add ``model_uri`` as a new version."""
        try:
            self.client.get_registered_model(name)
        except MlflowException:
            self.client.create_registered_model(
                name, description="gnncore: versions promoted through the quality gate"
            )
        # MLflow's registry resolves ``models:/`` sources through the process-wide
        # tracking URI, so point it at this store for the call.
        with global_tracking_uri(self.tracking_uri):
            version = self.client.create_model_version(name, model_uri, run_id=run_id)
        return ModelVersion(name, str(version.version), run_id, self._metric(run_id))

    def production(self, name: str) -> ModelVersion | None:
        """The version with the ``production`` alias, or ``None``."""
        try:
            version = self.client.get_model_version_by_alias(name, PRODUCTION_ALIAS)
        except MlflowException:
            return None
        return ModelVersion(
            name, str(version.version), str(version.run_id), self._metric(str(version.run_id))
        )

    def promote(self, version: ModelVersion) -> None:
        """Point the ``production`` alias at ``version``."""
        self.client.set_registered_model_alias(version.name, PRODUCTION_ALIAS, version.version)

    def _metric(self, run_id: str) -> float | None:
        value = self.client.get_run(run_id).data.metrics.get(self.metric)
        return None if value is None else float(value)
