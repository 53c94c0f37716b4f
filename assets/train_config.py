"""The launchpad config of ``trained_model``, derived from the library's training configs.

Every field of :class:`~gnncore.train.NodeTrainConfig` and
:class:`~gnncore.train.LinkTrainConfig` becomes a field of ``node`` or
``link`` here, with the library's default, type, choices (``Literal`` fields
show as drop-downs) and help; nothing is declared twice. ``device`` comes from
the ``compute`` resource instead, so every training step of a deployment uses
one device setting.
"""

from typing import Any, Literal

import dagster as dg
from pydantic import Field

from assets.options import options_config
from gnncore.train import TASK_CONFIGS, LinkTrainConfig, NodeTrainConfig

#: Library options the launchpad does not repeat, and where they come from instead.
FROM_RESOURCES = {"device": "the compute resource (ComputeResource.device)"}


NodeTrainOptions = options_config(NodeTrainConfig, "NodeTrainOptions", FROM_RESOURCES)
LinkTrainOptions = options_config(LinkTrainConfig, "LinkTrainOptions", FROM_RESOURCES)


class TrainConfig(dg.Config):
    """What to train: the task, and the options of that task (library defaults)."""

    task: Literal["node", "link"] = Field(
        default="node",
        description="node (classification) or link (prediction on the "
        "graph's triples or a split of its edges); picks the `node` or `link` options.",
    )
    node: NodeTrainOptions = Field(  # type: ignore[valid-type]
        default_factory=NodeTrainOptions, description="Node classification options."
    )
    link: LinkTrainOptions = Field(  # type: ignore[valid-type]
        default_factory=LinkTrainOptions, description="Link prediction options."
    )
    nproc: int = Field(
        default=1,
        ge=1,
        description="World size: 1 trains in the asset's process; N > 1 trains the task "
        "on N ranks (one per partition of graph_partition, whose parts must be N) in a "
        "subprocess started through Pipes (docs/DISTRIBUTED.md). Link prediction across "
        "ranks needs node features (model sage, gcn, gat or gin).",
    )
    backend: Literal["auto", "gloo", "nccl"] = Field(
        default="auto",
        description="With nproc > 1: the process-group backend. auto: nccl on a CUDA device "
        "(one GPU per rank), else gloo; gloo on a CUDA device shares the GPUs between the "
        "ranks (several ranks on one GPU).",
    )
    max_restarts: int = Field(
        default=0,
        ge=0,
        description="With nproc > 1: after a rank fails, restart all ranks from the newest "
        "checkpoint up to this many times before the materialization fails.",
    )

    def options(self) -> dict[str, Any]:
        """The chosen task's options by library field name (``None``: model default)."""
        chosen: Any = self.link if self.task == "link" else self.node
        return chosen.model_dump()

    def build(self, device: str) -> Any:
        """The validated library configuration of the task, on ``device``."""
        return TASK_CONFIGS[self.task](**self.options(), device=device).validate()

    @property
    def model(self) -> str:
        """The chosen task's model (``none`` is a valid name)."""
        return str(self.options()["model"])
