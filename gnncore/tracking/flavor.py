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
        from gnncore.tracking.mlflow import _pyfunc_signature

        mlflow_model.signature = _pyfunc_signature(mlflow_model.signature, spec.task)
    if size := get_total_file_size(os.fspath(path)):
        mlflow_model.model_size_bytes = size  # with the gnncore folder
    mlflow_model.save(os.path.join(path, MLMODEL_FILE_NAME))
