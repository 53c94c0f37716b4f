"""Dagster resources: the data root, MLflow tracking, the compute device and the
deployment's memory budget."""

from resources.compute import ComputeResource
from resources.memory import MemoryBudgetResource
from resources.mlflow_tracking import MlflowResource
from resources.storage import DataRootResource

__all__ = ["ComputeResource", "DataRootResource", "MemoryBudgetResource", "MlflowResource"]
