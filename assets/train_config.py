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
from pydantic import Field, create_model

from gnncore.train import TASK_CONFIGS, LinkTrainConfig, NodeTrainConfig
from gnncore.train.core.options import describe_options

#: Library options the launchpad does not repeat, and where they come from instead.
FROM_RESOURCES = {"device": "the compute resource (ComputeResource.device)"}


def options_config(config_cls: type, name: str) -> type[dg.Config]:
    """A ``dg.Config`` class with one field per option of ``config_cls``."""
    fields: dict[str, Any] = {}
    for spec in describe_options(config_cls):
        if spec.name in FROM_RESOURCES:
            continue
        note = " None: the model's default." if spec.info.per_model else ""
        fields[spec.name] = (
            spec.python_type,
            Field(default=spec.plain_default, description=spec.info.help + note),
        )
    return create_model(
        name, __base__=dg.Config, __doc__=f"Options of {config_cls.__name__}.", **fields
    )


NodeTrainOptions = options_config(NodeTrainConfig, "NodeTrainOptions")
LinkTrainOptions = options_config(LinkTrainConfig, "LinkTrainOptions")


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
