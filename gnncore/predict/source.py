"""Finding a trained model: an MLflow model URI or a local model directory.

``models:/NAME@ALIAS`` (e.g. ``models:/gnncore-node-cora@production``),
``models:/NAME/VERSION`` and ``models:/<model id>`` are resolved through the
MLflow store at ``tracking_uri`` (tracking and registry); a local directory
is an MLflow model folder (holding ``MLmodel``), or the LoggedModel folder
above its ``artifacts/``. Either way the model must carry the gnncore spec
and weights (:mod:`gnncore.train.spec`).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gnncore.errors import GnnCoreError
from gnncore.train.spec import MODEL_SUBDIR, ModelSpec, load_model_files


class ModelNotFoundError(GnnCoreError):
    """No model behind the given URI or directory."""


@dataclass
class TrainedModel:
    """A rebuilt model (CPU, eval mode) with its spec and where it came from."""

    spec: ModelSpec
    module: torch.nn.Module
    uri: str
    run_id: str | None = None
    model_id: str | None = None
    registered_model: str | None = None
    version: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        """JSON-friendly provenance."""
        return {
            "uri": self.uri,
            "run_id": self.run_id,
            "model_id": self.model_id,
            "registered_model": self.registered_model,
            "version": self.version,
        }


def model_dir_of(path: str | os.PathLike[str]) -> Path:
    """The MLflow model folder at or directly below ``path`` (``artifacts/``)."""
    path = Path(path)
    for candidate in (path, path / "artifacts"):
        if (candidate / "MLmodel").is_file():
            return candidate
    if (path / "model.json").is_file():  # the gnncore folder itself
        return path.parent
    raise ModelNotFoundError(
        f"{path}: not a model directory (no MLmodel here or in {path / 'artifacts'})"
    )


def load_trained_model(
    source: str | os.PathLike[str], tracking_uri: str | None = None
) -> TrainedModel:
    """Load the model at ``source``: a ``models:/`` URI (resolved in the MLflow
    store at ``tracking_uri``) or a local model directory."""
    text = os.fspath(source)
    if text.startswith("models:/"):
        if tracking_uri is None:
            raise ModelNotFoundError(f"{text}: a models:/ URI needs a tracking URI")
        return _load_registered(text, tracking_uri)
    if text.startswith("file://"):
        from urllib.parse import unquote, urlsplit

        text = unquote(urlsplit(text).path)
    elif "://" in text or text.startswith("runs:/"):
        raise ModelNotFoundError(
            f"{text}: give a models:/ URI (models:/NAME@ALIAS, models:/NAME/VERSION, "
            "models:/MODEL_ID) or a local model directory"
        )
    folder = model_dir_of(text)
    spec, module = load_model_files(folder / MODEL_SUBDIR)
    return TrainedModel(spec, module, str(folder.absolute()), **_local_ids(folder))


def _local_ids(folder: Path) -> dict[str, Any]:
    """``run_id`` / ``model_id`` recorded in a model folder's ``MLmodel``."""
    import yaml

    try:
        data = yaml.safe_load((folder / "MLmodel").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return {}
    return {
        "run_id": data.get("run_id"),
        "model_id": data.get("model_id"),
    }


def _load_registered(uri: str, tracking_uri: str) -> TrainedModel:
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    from gnncore.tracking.mlflow import global_tracking_uri

    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    rest = uri[len("models:/") :].strip("/")
    name = version = model_id = run_id = None
    try:
        if "@" in rest:
            name, alias = rest.split("@", 1)
            found = client.get_model_version_by_alias(name, alias)
            version, run_id, model_id = str(found.version), found.run_id, found.model_id
        elif "/" in rest:
            name, number = rest.split("/", 1)
            found = client.get_model_version(name, number)
            version, run_id, model_id = str(found.version), found.run_id, found.model_id
        else:
            logged = client.get_logged_model(rest)
            model_id, run_id = logged.model_id, logged.source_run_id
    except MlflowException as exc:
        raise ModelNotFoundError(
            f"{uri}: not found in {tracking_uri} ({_first_line(exc)})"
        ) from exc
    import mlflow

    with tempfile.TemporaryDirectory(prefix="gnncore-model-") as tmp:
        try:
            with global_tracking_uri(tracking_uri), _no_download_bar():
                local = mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=tmp)
        except MlflowException as exc:
            raise ModelNotFoundError(
                f"{uri}: cannot download it from {tracking_uri} ({_first_line(exc)})"
            ) from exc
        folder = model_dir_of(local)
        spec, module = load_model_files(folder / MODEL_SUBDIR)
    return TrainedModel(
        spec,
        module,
        uri,
        run_id=str(run_id) if run_id else None,
        model_id=str(model_id) if model_id else None,
        registered_model=name,
        version=version,
    )


@contextlib.contextmanager
def _no_download_bar() -> Iterator[None]:
    """MLflow's per-download tqdm bar off for the block (a model is a handful of
    small files; the bar would only clutter the command's one-line output)."""
    name = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    previous = os.environ.get(name)
    os.environ[name] = "false"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
