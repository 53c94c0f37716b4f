"""Dagster resources: the data root, MLflow tracking and the compute device."""

from resources.compute import ComputeResource
from resources.mlflow_tracking import MlflowResource
from resources.storage import DataRootResource

__all__ = ["ComputeResource", "DataRootResource", "MlflowResource"]
