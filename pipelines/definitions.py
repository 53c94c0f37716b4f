"""The one Definitions object of the gnncore code location."""

from typing import Any

import dagster as dg

from assets import ALL_ASSETS, ALL_CHECKS
from pipelines.executor import executor
from pipelines.jobs import distributed_train_job, partition_comparison_job, train_job
from pipelines.schedules import nightly_retraining
from pipelines.sensors import inbox
from resources import ComputeResource, DataRootResource, MemoryBudgetResource, MlflowResource


def build_resources(data_root: str = "") -> dict[str, Any]:
    """The resources every asset needs; ``data_root`` empty means $GNNCORE_DATA_ROOT."""
    storage = DataRootResource(root=data_root)
    return {
        "storage": storage,
        "mlflow": MlflowResource(storage=storage),
        "compute": ComputeResource(),
        # One memory budget for every stage (auto, none or a size; $GNNCORE_MEMORY_BUDGET).
        "memory": MemoryBudgetResource(),
        # trained_model with nproc > 1 trains in a subprocess it starts through Pipes.
        "pipes": dg.PipesSubprocessClient(),
    }


defs = dg.Definitions(
    assets=ALL_ASSETS,
    asset_checks=ALL_CHECKS,
    jobs=[train_job, distributed_train_job, partition_comparison_job],
    schedules=[nightly_retraining],
    sensors=[inbox],
    resources=build_resources(),
    # Steps forked from a forkserver (run config can still pick spawn or in_process).
    executor=executor,
)
