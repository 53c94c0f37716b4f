"""MLflow backend of :mod:`gnncore.tracking`, built on ``mlflow.MlflowClient``.

Runs are created and written through an explicit client bound to one tracking
URI, so nothing depends on MLflow's process-global "active run". Logging a
model is the exception: ``mlflow.pytorch.log_model`` resolves the tracking URI
globally, so :meth:`MlflowRunLogger.log_model` sets it for the duration of the
call and restores the previous value (not thread-safe across trackers with
different URIs). The model itself is an MLflow 3 LoggedModel created in the
run's experiment and linked to the run as an output.

Local layout (:func:`default_tracking_uri`): ``<data_root>/mlflow/mlflow.db``
(SQLite backend store) and ``<data_root>/mlflow/artifacts`` (the experiment's
artifact location). Nothing is written to ``./mlruns``. Processes that open a
new SQLite store at once (two Dagster runs started by one sensor tick) would
race to create its tables, so the first use of a store and the lookup or
creation of an experiment happen under an inter-process lock beside the
database (:func:`store_lock`, :func:`open_client`). A new database is a copy of
a migrated, empty template (:mod:`gnncore.tracking.template`): MLflow's
migrations run once per MLflow version and user, not once per store.
"""

from __future__ import annotations

import copy
import fcntl
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mlflow
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag

from gnncore.tracking import flavor
from gnncore.tracking.base import FINISHED, BaseRunLogger
from gnncore.tracking.template import seed_database

DEFAULT_UI_URL = "http://127.0.0.1:5000"
MAX_PARAM_LENGTH = 6000


def default_tracking_uri(data_root: str | os.PathLike[str]) -> str:
    """``sqlite:///<data_root>/mlflow/mlflow.db`` (absolute), creating the folder."""
    folder = Path(data_root).expanduser().resolve() / "mlflow"
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'mlflow.db'}"


def default_artifact_root(tracking_uri: str) -> Path | None:
    """``artifacts/`` beside a local SQLite store; ``None`` for other backends
    (a tracking server decides its own artifact location)."""
    prefix = "sqlite:///"
    if not tracking_uri.startswith(prefix):
        return None
    return Path(tracking_uri[len(prefix) :]).parent / "artifacts"


@contextmanager
def store_lock(tracking_uri: str) -> Iterator[None]:
    """Hold, across processes, the lock of a local SQLite store
    (``<database>.lock`` beside it, ``flock``); other stores: no lock. Not
    reentrant: a process that holds it must not take it again.

    A database that does not exist yet is created, under the lock, from the
    migrated template (:func:`gnncore.tracking.template.seed_database`), so the
    store MLflow opens next needs no migrations."""
    prefix = "sqlite:///"
    if not tracking_uri.startswith(prefix):
        yield
        return
    database = Path(tracking_uri[len(prefix) :])
    database.parent.mkdir(parents=True, exist_ok=True)
    with open(database.with_name(database.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            seed_database(database)
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def open_client(tracking_uri: str, registry_uri: str | None = None) -> MlflowClient:
    """An ``MlflowClient`` whose store exists: a new SQLite store gets its tables
    (MLflow's migrations) under :func:`store_lock`, so concurrent processes never
    race to create them."""
    with store_lock(tracking_uri):  # the client builds its store at once
        client = MlflowClient(tracking_uri=tracking_uri, registry_uri=registry_uri)
        client.search_experiments(max_results=1)
    return client


@contextmanager
def global_tracking_uri(uri: str) -> Iterator[None]:
    """Point MLflow's fluent API at ``uri`` for a block, then restore it."""
    from mlflow.tracking._tracking_service.utils import is_tracking_uri_set

    previous_env = os.environ.get("MLFLOW_TRACKING_URI")
    previous = mlflow.get_tracking_uri() if is_tracking_uri_set() else None
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(previous)  # type: ignore[arg-type]  # None unsets it
        if previous_env is not None:
            os.environ["MLFLOW_TRACKING_URI"] = previous_env


class MlflowRunLogger(BaseRunLogger):
    """One MLflow run, written through ``client``.

    Use it as a context manager (see :class:`~gnncore.tracking.BaseRunLogger`)
    so the run ends ``FINISHED``, or ``FAILED`` / ``KILLED`` with an ``error``
    tag when an exception escapes.
    """

    def __init__(
        self, client: MlflowClient, run_id: str, experiment_id: str, tracking_uri: str
    ) -> None:
        self.client = client
        self.run_id = run_id
        self.experiment_id = experiment_id
        self.tracking_uri = tracking_uri
        self.status: str | None = None

    def log_params(self, params: Mapping[str, Any]) -> None:
        batch = [Param(str(k), str(v)[:MAX_PARAM_LENGTH]) for k, v in params.items()]
        for start in range(0, len(batch), 100):  # MLflow caps a batch at 100 params
            self.client.log_batch(self.run_id, params=batch[start : start + 100])

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        now = int(time.time() * 1000)
        batch = [Metric(str(k), float(v), now, int(step or 0)) for k, v in metrics.items()]
        self.client.log_batch(self.run_id, metrics=batch)

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        self.client.log_batch(self.run_id, tags=[RunTag(str(k), str(v)) for k, v in tags.items()])

    def log_artifact(self, path: str | os.PathLike[str], artifact_path: str | None = None) -> None:
        self.client.log_artifact(self.run_id, os.fspath(path), artifact_path)

    def log_figure(self, figure: Any, artifact_file: str) -> None:
        self.client.log_figure(self.run_id, figure, artifact_file)

    def log_model(
        self,
        module: Any,
        name: str = "model",
        input_example: Any | None = None,
        spec: Any | None = None,
    ) -> str:
        """Log ``module`` with ``mlflow.pytorch``; return its ``models:/`` URI.

        With ``input_example`` (a tensor or a tuple of tensors, e.g.
        ``(x, edge_index)``) the model is saved in PyTorch's ``pt2``
        (``torch.export``) format, MLflow 3's safe default, with a tensor
        signature whose leading dimensions are dynamic. Without one it is
        pickled, which loads back as the original class but runs arbitrary code
        on load; only load such models from trusted stores.

        With ``spec`` (a :class:`gnncore.predict.ModelSpec`, and an
        ``input_example``) the model also carries its architecture and weights
        (``gnncore/model.json``, ``gnncore/state_dict.pt``) and the
        ``python_function`` flavor (:mod:`gnncore.tracking.flavor`), so
        ``gnncore predict``, ``mlflow.pyfunc.load_model`` and ``mlflow models
        serve`` can use it; ``mlflow.pytorch.load_model`` still returns the
        exported program.
        """
        import torch

        if any(p.device.type != "cpu" for p in module.parameters()):
            module = copy.deepcopy(module).to("cpu")
        module = module.eval()
        kwargs: dict[str, Any] = {}
        if input_example is not None:
            example = (
                tuple(input_example)
                if isinstance(input_example, (tuple, list))
                else (input_example,)
            )
            example = tuple(t.detach().cpu() for t in example)
            kwargs.update(
                serialization_format="pt2",
                signature=_tensor_signature(module, example, _input_names(spec, len(example))),
                input_example=tuple(t.numpy() for t in example),
            )
        else:
            kwargs.update(serialization_format="pickle")
        requirements = [f"torch=={torch.__version__.split('+')[0]}"]
        try:
            import torch_geometric

            requirements.append(f"torch_geometric=={torch_geometric.__version__}")
        except ImportError:  # pragma: no cover - gnncore depends on it
            pass
        # The LoggedModel is created here, in this run's experiment: left to itself,
        # ``Model.log`` files it under the fluent "active" experiment (Default, with
        # artifacts in ./mlruns) when no fluent run is active. ``run_id`` links it to
        # the run without starting a fluent run (closing one would end ours).
        params = self.client.get_run(self.run_id).data.params
        logged = self.client.create_logged_model(
            self.experiment_id, name=name, source_run_id=self.run_id, params=params
        )
        with global_tracking_uri(self.tracking_uri):
            if spec is not None and input_example is not None:
                from mlflow.models import Model

                requirements.append(_gnncore_requirement())
                info = Model.log(
                    artifact_path=None,
                    name=name,
                    flavor=flavor,
                    model_id=logged.model_id,
                    run_id=self.run_id,
                    pytorch_model=module,
                    spec=spec,
                    pip_requirements=requirements,
                    **kwargs,
                )
            else:
                info = mlflow.pytorch.log_model(
                    module,
                    name=name,
                    model_id=logged.model_id,
                    run_id=self.run_id,
                    pip_requirements=requirements,
                    **kwargs,
                )
        return str(info.model_uri)

    def end(self, status: str = FINISHED) -> None:
        if self.status is None:
            self.client.set_terminated(self.run_id, status)
            self.status = status

    def __repr__(self) -> str:
        return f"{type(self).__name__}(run_id={self.run_id!r}, uri={self.tracking_uri!r})"


def _gnncore_requirement() -> str:
    """The pip requirement the pyfunc's loader module comes from."""
    import gnncore

    return f"gnncore=={gnncore.__version__}"


def _input_names(spec: Any | None, count: int) -> list[str]:
    """Names of the model's tensor inputs: ``x, edge_index`` (node classifiers,
    and models without a spec), ``n_id, edge_index[, x]`` (link models,
    :class:`~gnncore.train.LinkModel`'s forward)."""
    base = (
        ["n_id", "edge_index", "x"]
        if getattr(spec, "task", None) == "link"
        else ["x", "edge_index"]
    )
    return (base + [f"input_{i}" for i in range(len(base), count)])[:count]


def _tensor_signature(module: Any, example: tuple[Any, ...], names: list[str]) -> Any:
    """A tensor-spec signature with every leading (row / edge) dimension dynamic."""
    import numpy as np
    import torch
    from mlflow.models import ModelSignature
    from mlflow.types import Schema, TensorSpec

    def spec(t: torch.Tensor, name: str | None = None) -> TensorSpec:
        # Rows (nodes) vary; so does the edge dimension of a [2, E] edge_index.
        if t.dim() == 2 and t.shape[0] == 2 and not t.is_floating_point():
            shape: tuple[int, ...] = (2, -1)
        else:
            shape = (-1, *t.shape[1:])
        return TensorSpec(np.dtype(str(t.numpy().dtype)), shape, name)

    with torch.no_grad():
        out = module(*example)
    inputs = Schema([spec(t, n) for t, n in zip(example, names)])
    return ModelSignature(inputs=inputs, outputs=Schema([spec(out)]))


#: The experiment tag by which MLflow's UI (3.x) picks an experiment's view, and
#: our kind: model training, so the UI opens on runs, metrics and comparisons
#: rather than the GenAI traces view it may infer for a new experiment. A kind
#: a user set on an existing experiment is left alone.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"


class MlflowTracker:
    """Starts runs in ``experiment`` of the MLflow store at ``tracking_uri``.

    Args:
        tracking_uri (str): E.g. :func:`default_tracking_uri(data_root)` or a
            tracking server's ``http://host:port``.
        experiment (str, optional): Experiment name, created when missing
            (restored when deleted). (default: :obj:`"gnncore"`)
        artifact_root (str or PathLike, optional): Artifact location of a
            newly created experiment; default ``artifacts/`` beside a SQLite
            store, else the server's default. (default: :obj:`None`)
        ui_url (str, optional): Base of the links :meth:`run_url` returns.
            (default: :obj:`"http://127.0.0.1:5000"`)
    """

    def __init__(
        self,
        tracking_uri: str,
        experiment: str = "gnncore",
        artifact_root: str | os.PathLike[str] | None = None,
        ui_url: str = DEFAULT_UI_URL,
    ) -> None:
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.ui_url = ui_url.rstrip("/")
        root = (
            Path(artifact_root)
            if artifact_root is not None
            else default_artifact_root(tracking_uri)
        )
        with store_lock(tracking_uri):  # the store's tables, then one experiment of a name
            self.client = MlflowClient(tracking_uri=tracking_uri)
            self.experiment_id = self._experiment_id(root)

    def _experiment_id(self, artifact_root: Path | None) -> str:
        found = self.client.get_experiment_by_name(self.experiment)
        if found is not None:
            if found.lifecycle_stage == "deleted":
                self.client.restore_experiment(found.experiment_id)
            if EXPERIMENT_KIND_TAG not in found.tags:
                self.client.set_experiment_tag(
                    found.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND
                )
            return str(found.experiment_id)
        location = None
        if artifact_root is not None:
            artifact_root = artifact_root.expanduser().resolve()
            artifact_root.mkdir(parents=True, exist_ok=True)
            location = artifact_root.as_uri()
        return str(
            self.client.create_experiment(
                self.experiment,
                artifact_location=location,
                tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND},
            )
        )

    def start_run(
        self, run_name: str | None = None, tags: Mapping[str, Any] | None = None
    ) -> MlflowRunLogger:
        """Create a ``RUNNING`` run; use the result as a context manager."""
        run = self.client.create_run(
            self.experiment_id,
            run_name=run_name,
            tags={str(k): str(v) for k, v in (tags or {}).items()},
        )
        return MlflowRunLogger(self.client, run.info.run_id, self.experiment_id, self.tracking_uri)

    def run_status(self, run_id: str) -> str | None:
        """The run's status (``RUNNING``, ``FINISHED``, ``FAILED``, ``KILLED``, ...),
        ``None`` when this store has no such run."""
        from mlflow.exceptions import MlflowException

        try:
            return str(self.client.get_run(run_id).info.status)
        except MlflowException:
            return None

    def end_run(self, run_id: str, status: str, tags: Mapping[str, Any] | None = None) -> None:
        """Tag ``run_id`` and mark it terminated with ``status`` (e.g. a run whose
        process was killed before it could end the run itself)."""
        if tags:
            self.client.log_batch(run_id, tags=[RunTag(str(k), str(v)) for k, v in tags.items()])
        self.client.set_terminated(run_id, status)

    def run_url(self, run_id: str) -> str:
        """The MLflow UI link of ``run_id`` (``mlflow ui`` on :attr:`ui_url`)."""
        return f"{self.ui_url}/#/experiments/{self.experiment_id}/runs/{run_id}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(tracking_uri={self.tracking_uri!r}, "
            f"experiment={self.experiment!r})"
        )
