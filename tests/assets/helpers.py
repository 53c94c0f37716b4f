"""What the asset tests share: a Dagster instance that knows a file's dataset
partitions, the ``raw_dataset`` config of a generated graph, a materializer of
the pipeline's assets with the real resources on one data root, and an asset's
metadata values."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from assets import ALL_ASSETS, ALL_CHECKS
from assets.partitions import PARTITIONS_NAME
from pipelines.definitions import build_resources
from resources import MemoryBudgetResource


def metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    """The metadata values of ``asset``'s one materialization in ``result``."""
    (mat,) = result.asset_materializations_for_node(asset)
    return {k: v.value for k, v in mat.metadata.items()}


def partitioned_instance(*partitions: str) -> dg.DagsterInstance:
    """An ephemeral Dagster instance whose dataset partitions are ``partitions``."""
    instance = dg.DagsterInstance.ephemeral()
    if partitions:
        instance.add_dynamic_partitions(PARTITIONS_NAME, list(partitions))
    return instance


def generated(
    num_nodes: int, avg_degree: int, num_classes: int, num_features: int, **more: Any
) -> dict[str, Any]:
    """The ``raw_dataset`` op config of a generated graph (``more``: its other fields,
    e.g. ``seed``), as a run config's ``ops`` entry."""
    config = {
        "num_nodes": num_nodes,
        "avg_degree": avg_degree,
        "num_classes": num_classes,
        "num_features": num_features,
        **more,
    }
    return {"raw_dataset": {"config": config}}


class Materializer:
    """``dg.materialize`` of the pipeline's assets on one instance, data root and
    dataset partition, with the resources of the deployment (``build_resources``).

    Call it with the asset names to select (none: every asset and check), the run
    config's ``ops`` and, where a test sets one, the ``memory`` resource's budget."""

    def __init__(
        self,
        root: str | Path,
        partition: str,
        *,
        assets: Sequence[Any] = (*ALL_ASSETS, *ALL_CHECKS),
        instance: dg.DagsterInstance | None = None,
    ) -> None:
        self.root = Path(root)
        self.partition = partition
        self.assets = list(assets)
        self.instance = instance if instance is not None else partitioned_instance(partition)
        self.resources: dict[str, Any] = build_resources(str(self.root))

    def __call__(
        self,
        *assets: str,
        config: dict[str, Any] | None = None,
        budget: str | None = None,
        raise_on_error: bool = True,
        selection: dg.AssetSelection | None = None,
    ) -> dg.ExecuteInProcessResult:
        """Materialize ``assets`` (or ``selection``; neither: all) with ``config`` as
        the run config's ``ops``, under the memory ``budget`` when one is given."""
        resources = self.resources
        if budget is not None:
            resources = {**resources, "memory": MemoryBudgetResource(budget=budget)}
        if selection is None and assets:
            selection = dg.AssetSelection.assets(*assets)
        return dg.materialize(
            self.assets,
            instance=self.instance,
            resources=resources,
            selection=selection,
            partition_key=self.partition,
            run_config={"ops": config or {}},
            raise_on_error=raise_on_error,
        )
