"""Small real models saved as gnncore model folders, for the pyfunc's request tests.

Each is built from its :class:`~gnncore.predict.ModelSpec` by
:func:`~gnncore.predict.build_module` (seeded random weights), written with
:func:`~gnncore.train.spec.save_model_files` and loaded back by the pyfunc's
own MLflow entry point, so the tests exercise the loader that ``mlflow models
serve`` calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from gnncore.predict import ModelSpec, build_module
from gnncore.predict.pyfunc import GraphPyfunc, _load_pyfunc
from gnncore.train.spec import save_model_files

#: Feature width and classes of the node classifier; entities and width of the link models.
FEATURES = 3
CLASSES = 4
ENTITIES = 50
DIM = 8


def node_spec() -> ModelSpec:
    """A 2-layer GraphSAGE classifier over ``FEATURES`` features, ``CLASSES`` classes."""
    architecture = {
        "model": "sage",
        "in_channels": FEATURES,
        "hidden": 8,
        "out_channels": CLASSES,
        "num_layers": 2,
        "dropout": 0.0,
        "heads": 1,
    }
    return ModelSpec("node", architecture, {"normalize_features": True})


def link_spec(in_channels: int = 0) -> ModelSpec:
    """A 2-layer GraphSAGE link encoder over ``ENTITIES`` nodes: learned
    embeddings (``in_channels=0``) or ``in_channels`` features."""
    architecture = {
        "num_nodes": ENTITIES,
        "num_relations": 1,
        "dim": DIM,
        "encoder": "sage",
        "decoder": "dot",
        "num_layers": 2,
        "in_channels": in_channels,
        "dropout": 0.0,
        "heads": 1,
    }
    return ModelSpec("link", architecture)


def save(folder: Path, spec: ModelSpec, seed: int = 0) -> Path:
    """``spec``'s module with seeded weights, saved in ``folder``."""
    torch.manual_seed(seed)
    save_model_files(folder, build_module(spec), spec)
    return folder


def load(folder: Path, model_config: dict[str, Any] | None = None) -> GraphPyfunc:
    """The pyfunc MLflow would load from ``folder`` (environment caps apply)."""
    return _load_pyfunc(str(folder), model_config)
