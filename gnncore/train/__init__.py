"""Models, the mini-batch training loop and the record of a run (tracked through
:mod:`gnncore.tracking`); the entry point that picks a training mode and runs it
on a graph directory is :func:`gnncore.modes.train_graph_dir`.

One call trains on stores the caller built: ``fit(task, config, source=None,
hooks=None)`` of a :class:`NodeTask` or :class:`LinkTask` (the data and the
model-side options), with an optional batch ``source`` and :class:`RunHooks`
(logger, progress, checkpoints, resume, per-epoch callback).

The configurations load eagerly (they are plain dataclasses, and Dagster's code
location builds its config schemas from them); everything that imports torch or
PyG loads on first use (:mod:`gnncore.lazy`).
"""

from typing import TYPE_CHECKING

from gnncore.lazy import lazy_attributes
from gnncore.train.link.config import LinkTrainConfig
from gnncore.train.node.config import MODEL_DEFAULTS, ConfigError, NodeTrainConfig

if TYPE_CHECKING:  # what the lazy names below are, for type checkers
    from gnncore.train.core.checkpoint import (
        CheckpointDir,
        CheckpointError,
        default_checkpoint_dir,
    )
    from gnncore.train.core.device import resolve_device
    from gnncore.train.core.models import MODELS, build_model
    from gnncore.train.fitting import RunHooks, Task, fit
    from gnncore.train.link.data import LinkSplits, link_splits
    from gnncore.train.link.loop import LinkTrainResult
    from gnncore.train.link.models import DECODERS, LinkModel
    from gnncore.train.link.task import LinkTask
    from gnncore.train.node.loop import NodeTrainResult, evaluate
    from gnncore.train.node.metrics import ClassificationMetrics
    from gnncore.train.node.task import NodeTask
    from gnncore.train.record import example_input, training_curves

__getattr__ = lazy_attributes(
    __name__,
    {
        "CheckpointDir": "gnncore.train.core.checkpoint",
        "CheckpointError": "gnncore.train.core.checkpoint",
        "default_checkpoint_dir": "gnncore.train.core.checkpoint",
        "resolve_device": "gnncore.train.core.device",
        "MODELS": "gnncore.train.core.models",
        "build_model": "gnncore.train.core.models",
        "RunHooks": "gnncore.train.fitting",
        "Task": "gnncore.train.fitting",
        "fit": "gnncore.train.fitting",
        "LinkSplits": "gnncore.train.link.data",
        "link_splits": "gnncore.train.link.data",
        "LinkTrainResult": "gnncore.train.link.loop",
        "DECODERS": "gnncore.train.link.models",
        "LinkModel": "gnncore.train.link.models",
        "LinkTask": "gnncore.train.link.task",
        "NodeTrainResult": "gnncore.train.node.loop",
        "evaluate": "gnncore.train.node.loop",
        "ClassificationMetrics": "gnncore.train.node.metrics",
        "NodeTask": "gnncore.train.node.task",
        "example_input": "gnncore.train.record",
        "training_curves": "gnncore.train.record",
    },
)

#: Task name -> its training configuration (the CLI's ``--task`` and the
#: Dagster launchpad's ``task`` choices come from here).
TASK_CONFIGS: dict[str, type[NodeTrainConfig] | type[LinkTrainConfig]] = {
    "node": NodeTrainConfig,
    "link": LinkTrainConfig,
}

__all__ = [
    "MODELS",
    "MODEL_DEFAULTS",
    "TASK_CONFIGS",
    "DECODERS",
    "CheckpointDir",
    "CheckpointError",
    "ClassificationMetrics",
    "ConfigError",
    "LinkModel",
    "LinkSplits",
    "LinkTask",
    "LinkTrainConfig",
    "LinkTrainResult",
    "NodeTask",
    "NodeTrainConfig",
    "NodeTrainResult",
    "build_model",
    "default_checkpoint_dir",
    "evaluate",
    "link_splits",
    "example_input",
    "resolve_device",
    "RunHooks",
    "Task",
    "fit",
    "training_curves",
]
