"""How gnncore saves a model for MLflow: ``pytorch`` + ``python_function`` flavors.

``mlflow.pytorch.save_model`` in the ``pt2`` format (``torch.export``) writes
the ``pytorch`` flavor, but no ``python_function`` flavor for a model of
several tensor inputs (``x``, ``edge_index``), so ``mlflow.pyfunc.load_model``
and ``mlflow models serve`` refuse it. :func:`save_model` is a flavor module
for ``mlflow.models.Model.log``: it lets ``mlflow.pytorch`` save the program
(``mlflow.pytorch.load_model`` keeps working), adds ``gnncore/model.json`` and
``gnncore/state_dict.pt`` (:mod:`gnncore.train.spec`), and registers the
``python_function`` flavor with :mod:`gnncore.predict.pyfunc` as its loader
module: the pyfunc rebuilds the model from those two files (no pickle) and
answers subgraph requests (:class:`gnncore.predict.pyfunc.GraphPyfunc`).
"""

from __future__ import annotations

import os
from typing import Any, Protocol

FLAVOR_NAME = "gnncore"
LOADER_MODULE = "gnncore.predict.pyfunc"
#: The folder of a logged MLflow model holding the spec and the weights.
MODEL_SUBDIR = "gnncore"


class SavableSpec(Protocol):
    """What the flavor needs of a model spec (:class:`gnncore.train.spec.ModelSpec`):
    its task, and a way to write itself and the weights into a folder."""

    task: str

    def save(self, folder: str | os.PathLike[str], module: Any) -> None:
        """Write the spec and ``module``'s weights into ``folder`` (created)."""


def save_model(
    path: str | os.PathLike[str],
    mlflow_model: Any,
    pytorch_model: Any,
    spec: SavableSpec,
    **pytorch_kwargs: Any,
) -> None:
    """Save ``pytorch_model`` (``mlflow.pytorch.save_model(..., **pytorch_kwargs)``)
    at ``path`` with its gnncore ``spec`` and the ``python_function`` flavor."""
    import mlflow.pyfunc
    import mlflow.pytorch
    from mlflow.models.model import MLMODEL_FILE_NAME
    from mlflow.utils.file_utils import get_total_file_size

    import gnncore

    mlflow.pytorch.save_model(pytorch_model, path, mlflow_model=mlflow_model, **pytorch_kwargs)
    spec.save(os.path.join(path, MODEL_SUBDIR), pytorch_model)
    mlflow_model.add_flavor(
        FLAVOR_NAME,
        data=MODEL_SUBDIR,
        task=spec.task,
        gnncore_version=getattr(gnncore, "__version__", "unknown"),
    )
    mlflow.pyfunc.add_to_model(
        mlflow_model,
        loader_module=LOADER_MODULE,
        data=MODEL_SUBDIR,
        conda_env="conda.yaml",
        python_env="python_env.yaml",
    )
    if mlflow_model.signature is not None:
        # mlflow.pytorch exported the program with the tensor signature (its -1
        # dimensions are the program's dynamic ones); the MLmodel carries the
        # pyfunc's, which MLflow's scoring server parses JSON requests with.
        mlflow_model.signature = pyfunc_signature(mlflow_model.signature, spec.task)
    if size := get_total_file_size(os.fspath(path)):
        mlflow_model.model_size_bytes = size  # with the gnncore folder
    mlflow_model.save(os.path.join(path, MLMODEL_FILE_NAME))


#: Inputs of the pyfunc's signature that hold integers (node ids, node positions).
INTEGER_INPUTS = ("n_id", "edge_index")


def pyfunc_signature(signature: Any, task: str) -> Any:
    """``signature``'s tensor inputs, with the outputs the pyfunc returns: one row
    per node with ``predicted_class`` and ``probabilities`` (node task) or an
    ``embedding`` (link task). The MLmodel's signature
    (:func:`gnncore.tracking.flavor.save_model` sets it once ``mlflow.pytorch``
    has exported the program with ``signature``, whose ``-1`` dimensions it
    makes dynamic).

    The integer inputs (:data:`INTEGER_INPUTS`) are declared
    ``Tensor('object', (-1,))``, MLflow's documented spec for ragged arrays,
    which its schema check passes as given: MLflow's scoring server builds
    each input with ``np.array(json_value, dtype=<the spec's dtype>)``, so an
    ``int64`` spec truncated a JSON ``3.7`` to ``3`` before the pyfunc could
    see it. With ``object`` the JSON numbers arrive as parsed (Python ``int``
    and ``float``, ids up to ``2**63 - 1`` exact) and the pyfunc refuses
    anything but integers (:func:`gnncore.predict.pyfunc.parse_request`);
    ``int64`` arrays given to ``mlflow.pyfunc.load_model(...).predict`` pass
    unchanged. (An ``object`` spec of shape ``(2, -1)`` would refuse those:
    MLflow compares the dtype of every other shape.) ``x`` keeps its
    ``float32`` spec.
    """
    import numpy as np
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema, TensorSpec
    from mlflow.types.schema import Array

    if task == "node":
        outputs = Schema(
            [ColSpec("long", "predicted_class"), ColSpec(Array("float"), "probabilities")]
        )
    else:
        outputs = Schema([ColSpec(Array("float"), "embedding")])
    inputs = Schema(
        [
            TensorSpec(np.dtype(object), (-1,), spec.name) if spec.name in INTEGER_INPUTS else spec
            for spec in signature.inputs.inputs
        ]
    )
    return ModelSignature(inputs=inputs, outputs=outputs)
