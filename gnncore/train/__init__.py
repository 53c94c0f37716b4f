"""Models, the mini-batch training loop and the record of a run (tracked through
:mod:`gnncore.tracking`); the entry point that picks a training mode and runs it
on a graph directory is :func:`gnncore.modes.train_graph_dir`."""

from gnncore.train.core.checkpoint import CheckpointDir, CheckpointError, default_checkpoint_dir
from gnncore.train.core.device import resolve_device
from gnncore.train.core.models import MODELS, build_model
from gnncore.train.fit import RunHooks, Task, fit
from gnncore.train.link.config import LinkTrainConfig
from gnncore.train.link.data import LinkSplits, link_splits
from gnncore.train.link.loop import LinkTrainResult
from gnncore.train.link.models import DECODERS, LinkModel
from gnncore.train.link.task import LinkTask, train_link_predictor
from gnncore.train.node.config import MODEL_DEFAULTS, ConfigError, NodeTrainConfig
from gnncore.train.node.loop import NodeTrainResult, evaluate
from gnncore.train.node.metrics import ClassificationMetrics
from gnncore.train.node.task import NodeTask, train_node_classifier
from gnncore.train.record import example_input, training_curves

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
    "train_link_predictor",
    "train_node_classifier",
    "training_curves",
]
