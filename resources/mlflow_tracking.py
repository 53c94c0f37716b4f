"""MLflow tracking as a small typed resource around ``mlflow.MlflowClient``."""

import os
from urllib.parse import urlsplit

import dagster as dg
from pydantic import Field

from resources.storage import DataRootResource

#: Read when a run resolves the resource (never at import): the tracking URI of the
#: ``postgres`` profile (``postgresql://user:password@host:port/mlflow``) or any other.
TRACKING_URI_ENV = "GNNCORE_MLFLOW_URI"
#: Where new experiments put their artifacts: a local path or any artifact URI.
ARTIFACT_ROOT_ENV = "GNNCORE_MLFLOW_ARTIFACTS"
#: The MLflow UI's base URL for run links in asset metadata (``make mlflow-ui``'s port).
UI_URL_ENV = "GNNCORE_MLFLOW_UI_URL"
DEFAULT_UI_URL = "http://127.0.0.1:5000"
_SERVER_SCHEMES = ("http", "https", "databricks")


class MlflowResource(dg.ConfigurableResource):
    """Where runs are logged.

    An empty ``tracking_uri`` means ``$GNNCORE_MLFLOW_URI`` when set (the
    ``postgres`` profile points it at PostgreSQL), else the SQLite store
    ``<data root>/mlflow/mlflow.db`` with artifacts beside it. Any MLflow
    tracking URI (``http://host:5000``, ``postgresql://…``) can be configured
    instead. With a database store other than SQLite, new experiments keep their
    artifacts in ``artifact_root`` (default ``$GNNCORE_MLFLOW_ARTIFACTS``, else
    ``<data root>/mlflow/artifacts``); a tracking server decides its own.
    """

    storage: dg.ResourceDependency[DataRootResource]
    tracking_uri: str = Field(
        default="",
        description="MLflow tracking URI; empty: $GNNCORE_MLFLOW_URI, else sqlite under "
        "the data root.",
    )
    artifact_root: str = Field(
        default="",
        description="Artifact location of new experiments (a path or any artifact URI); "
        "empty: $GNNCORE_MLFLOW_ARTIFACTS, else <data root>/mlflow/artifacts for database "
        "stores, the server's default for tracking servers.",
    )
    experiment: str = Field(default="gnncore", description="MLflow experiment name.")
    ui_url: str = Field(
        default="",
        description="Base URL of the MLflow UI, for run links in asset metadata; empty: "
        f"${UI_URL_ENV}, else {DEFAULT_UI_URL}.",
    )

    def resolved_ui_url(self) -> str:
        """The MLflow UI that run links in asset metadata open."""
        return self.ui_url or os.environ.get(UI_URL_ENV, "") or DEFAULT_UI_URL

    def resolved_tracking_uri(self) -> str:
        """The tracking URI runs go to."""
        from gnncore.tracking.mlflow import default_tracking_uri

        return (
            self.tracking_uri
            or os.environ.get(TRACKING_URI_ENV, "")
            or default_tracking_uri(self.storage.resolved_root())
        )

    def resolved_artifact_root(self) -> str | None:
        """The artifact location new experiments get; ``None`` leaves it to MLflow
        (beside a SQLite store, or a tracking server's default)."""
        configured = self.artifact_root or os.environ.get(ARTIFACT_ROOT_ENV, "")
        if configured:
            return configured
        scheme = urlsplit(self.resolved_tracking_uri()).scheme.split("+")[0]
        if scheme in _SERVER_SCHEMES or scheme == "sqlite":
            return None
        return str(self.storage.resolved_root() / "mlflow" / "artifacts")

    def tracker(self):  # -> gnncore.tracking.MlflowTracker (imported lazily)
        """A tracker that starts runs in the configured experiment."""
        from gnncore.tracking.mlflow import MlflowTracker

        uri = self.resolved_tracking_uri()
        root = self.resolved_artifact_root()
        if root is not None and "://" in root:
            # The tracker takes local paths only; an artifact URI (s3://, file://, ...)
            # is set here, on the experiment, before the tracker looks it up.
            _ensure_experiment(uri, self.experiment, root)
            root = None
        return MlflowTracker(
            uri, experiment=self.experiment, artifact_root=root, ui_url=self.resolved_ui_url()
        )

    def registry(self, metric: str = "best_val_accuracy"):  # -> ModelRegistry
        """The model registry of the same MLflow store; versions are compared by
        the run metric ``metric`` (``best_val_mrr`` for link prediction)."""
        from gnncore.tracking.registry import ModelRegistry

        return ModelRegistry(self.resolved_tracking_uri(), metric=metric)


def _ensure_experiment(tracking_uri: str, name: str, artifact_location: str) -> None:
    """Create experiment ``name`` with ``artifact_location`` unless it exists."""
    from mlflow import MlflowClient

    from gnncore.tracking.mlflow import store_lock

    with store_lock(tracking_uri):
        client = MlflowClient(tracking_uri=tracking_uri)
        if client.get_experiment_by_name(name) is None:
            client.create_experiment(name, artifact_location=artifact_location)
