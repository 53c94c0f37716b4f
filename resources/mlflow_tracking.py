"""MLflow tracking as a small typed resource around ``mlflow.MlflowClient``."""

import dagster as dg
from pydantic import Field

from resources.storage import DataRootResource


class MlflowResource(dg.ConfigurableResource):
    """Where runs are logged.

    An empty ``tracking_uri`` means the SQLite store ``<data root>/mlflow/mlflow.db``
    with artifacts beside it; any MLflow tracking URI (``http://host:5000``,
    ``postgresql://…``) can be configured instead.
    """

    storage: dg.ResourceDependency[DataRootResource]
    tracking_uri: str = Field(
        default="", description="MLflow tracking URI; empty: sqlite under the data root."
    )
    experiment: str = Field(default="gnncore", description="MLflow experiment name.")
    ui_url: str = Field(
        default="http://127.0.0.1:5000",
        description="Base URL of the MLflow UI, for run links in asset metadata.",
    )

    def resolved_tracking_uri(self) -> str:
        """The tracking URI runs go to."""
        from gnncore.tracking.mlflow import default_tracking_uri

        return self.tracking_uri or default_tracking_uri(self.storage.resolved_root())

    def tracker(self):  # -> gnncore.tracking.MlflowTracker (imported lazily)
        """A tracker that starts runs in the configured experiment."""
        from gnncore.tracking.mlflow import MlflowTracker

        return MlflowTracker(
            self.resolved_tracking_uri(), experiment=self.experiment, ui_url=self.ui_url
        )

    def registry(self, metric: str = "best_val_accuracy"):  # -> ModelRegistry
        """The model registry of the same MLflow store; versions are compared by
        the run metric ``metric`` (``best_val_mrr`` for link prediction)."""
        from gnncore.tracking.registry import ModelRegistry

        return ModelRegistry(self.resolved_tracking_uri(), metric=metric)
