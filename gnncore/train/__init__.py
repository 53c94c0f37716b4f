"""Models and the mini-batch training loop (tracked through :mod:`gnncore.tracking`)."""

from gnncore.train.api import example_input, train_graph_dir, training_curves
from gnncore.train.checkpoint import CheckpointDir, CheckpointError, default_checkpoint_dir
from gnncore.train.config import MODEL_DEFAULTS, ConfigError, NodeTrainConfig
from gnncore.train.device import resolve_device
from gnncore.train.link_config import LinkTrainConfig
from gnncore.train.link_data import LinkSplits, link_splits
from gnncore.train.link_loop import LinkTrainResult, train_link_predictor
from gnncore.train.link_models import DECODERS, LinkModel
from gnncore.train.loop import NodeTrainResult, evaluate, train_node_classifier
from gnncore.train.metrics import ClassificationMetrics
from gnncore.train.models import MODELS, build_model

__all__ = [
    "MODELS",
    "MODEL_DEFAULTS",
    "DECODERS",
    "CheckpointDir",
    "CheckpointError",
    "ClassificationMetrics",
    "ConfigError",
    "LinkModel",
    "LinkSplits",
    "LinkTrainConfig",
    "LinkTrainResult",
    "NodeTrainConfig",
    "NodeTrainResult",
    "build_model",
    "default_checkpoint_dir",
    "evaluate",
    "link_splits",
    "example_input",
    "resolve_device",
    "train_graph_dir",
    "train_link_predictor",
    "train_node_classifier",
    "training_curves",
]
