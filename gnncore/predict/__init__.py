"""Predictions of trained models: layer-wise inference, Parquet output, serving.

:func:`predict_graph_dir` writes every node's prediction (class and class
probabilities, or a link model's embedding) keyed by the original node ids;
:func:`load_trained_model` finds a model by ``models:/`` URI or directory;
:mod:`gnncore.predict.pyfunc` is the ``python_function`` flavor that
``mlflow models serve`` loads. Never imports Dagster.
"""

from gnncore.predict.api import PredictionReport, check_compatible, predict_graph_dir
from gnncore.predict.source import ModelNotFoundError, TrainedModel, load_trained_model
from gnncore.train.core.layerwise import Adjacency, layerwise_inference
from gnncore.train.core.nodebatches import node_batches
from gnncore.train.spec import ModelSpec, ModelSpecError, build_module, model_spec

__all__ = [
    "Adjacency",
    "ModelNotFoundError",
    "ModelSpec",
    "ModelSpecError",
    "PredictionReport",
    "TrainedModel",
    "build_module",
    "check_compatible",
    "layerwise_inference",
    "load_trained_model",
    "model_spec",
    "node_batches",
    "predict_graph_dir",
]
