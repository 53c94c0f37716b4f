"""What it takes to rebuild a trained model: its architecture as JSON and its weights.

A ``pt2`` (``torch.export``) program runs the whole forward pass on one
``(x, edge_index)``; layer-wise inference needs the layers themselves. So every
logged model also carries, in its ``gnncore/`` folder:

* ``model.json``: :class:`ModelSpec` (task, architecture, the preprocessing
  training's evaluation applied, the training configuration and the graph it was
  trained on);
* ``state_dict.pt``: the ``state_dict``, read back with
  ``torch.load(..., weights_only=True)`` (plain tensors; nothing unpickled runs
  code).

:func:`build_module` turns the two back into the ``nn.Module`` training built,
loading the weights strictly (an architecture that does not match its weights
fails).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from gnncore.errors import GnnCoreError
from gnncore.store.manifest import sha256_of
from gnncore.tracking.flavor import MODEL_SUBDIR as MODEL_SUBDIR  # the folder, re-exported
from gnncore.train.core.models import build_model
from gnncore.train.link.models import DistMult, LinkModel

SPEC_FORMAT = "gnncore.model"
SPEC_VERSION = 1
SPEC_FILE = "model.json"
WEIGHTS_FILE = "state_dict.pt"


class ModelSpecError(GnnCoreError):
    """A model folder without a readable gnncore spec or weights that fit it."""


@dataclass(frozen=True)
class ModelSpec:
    """A trained model's architecture and provenance.

    Args:
        task (str): ``"node"`` or ``"link"``.
        architecture (dict): The constructor arguments. Node task:
            ``model, in_channels, hidden, out_channels, num_layers, dropout,
            heads`` (:func:`gnncore.train.build_model`). Link task:
            ``num_nodes, num_relations, dim, encoder, decoder, num_layers,
            in_channels, dropout, heads`` (:class:`gnncore.train.LinkModel`).
        preprocessing (dict): What training applied to the features before the
            model (``normalize_features``).
        config (dict): The training configuration (``to_dict()``).
        graph (dict): The graph trained on: ``name``, ``path``,
            ``manifest_sha256``, ``num_nodes``, ``num_features``,
            ``num_classes``.
        metrics (dict): Training's headline test figures
            (``test_accuracy`` or ``test_mrr``).
    """

    task: str
    architecture: dict[str, Any]
    preprocessing: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    graph: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def normalize_features(self) -> bool:
        return bool(self.preprocessing.get("normalize_features", False))

    @property
    def num_classes(self) -> int:
        """Output classes of a node classifier (0 for link prediction)."""
        return int(self.architecture["out_channels"]) if self.task == "node" else 0

    @property
    def in_channels(self) -> int:
        """Feature width the model reads (0: a link model over learned embeddings)."""
        return int(self.architecture.get("in_channels") or 0)

    @property
    def amp(self) -> str:
        amp = str(self.config.get("amp", "none"))
        return "none" if amp == "off" else amp  # "off": models logged before the rename

    def save(self, folder: str | os.PathLike[str], module: torch.nn.Module) -> None:
        """Write this spec and ``module``'s weights into ``folder``
        (:func:`save_model_files`; what the MLflow flavor calls)."""
        save_model_files(folder, module, self)

    def to_json(self) -> dict[str, Any]:
        return {"format": SPEC_FORMAT, "format_version": SPEC_VERSION, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str | os.PathLike[str] = "") -> ModelSpec:
        if data.get("format") != SPEC_FORMAT:
            raise ModelSpecError(
                f"{where}: not a {SPEC_FORMAT} spec (format {data.get('format')!r})"
            )
        if int(data.get("format_version", 0)) > SPEC_VERSION:
            raise ModelSpecError(
                f"{where}: spec version {data['format_version']} is newer than this "
                f"gnncore reads ({SPEC_VERSION}); upgrade gnncore"
            )
        if data.get("task") not in ("node", "link"):
            raise ModelSpecError(f"{where}: unknown task {data.get('task')!r}")
        return cls(
            task=str(data["task"]),
            architecture=dict(data["architecture"]),
            preprocessing=dict(data.get("preprocessing") or {}),
            config=dict(data.get("config") or {}),
            graph=dict(data.get("graph") or {}),
            metrics={str(k): float(v) for k, v in (data.get("metrics") or {}).items()},
        )


def model_spec(
    model: torch.nn.Module, config: Any, graph: Any, metrics: dict[str, float]
) -> ModelSpec:
    """The spec of ``model`` as training built it from ``config`` on ``graph``
    (a :class:`~gnncore.store.GraphDir`)."""
    m = graph.manifest
    graph_info = {
        "name": m.name,
        "path": str(Path(graph.path).absolute()),
        "manifest_sha256": sha256_of(Path(graph.path) / "manifest.json"),
        "num_nodes": int(m.num_nodes),
        "num_features": int(m.num_features),
        "num_classes": int(m.num_classes),
    }
    if isinstance(model, LinkModel):
        decoder = "distmult" if isinstance(model.decoder, DistMult) else "dot"
        relations = (
            int(model.decoder.relations.num_embeddings)
            if isinstance(model.decoder, DistMult)
            else 1
        )
        architecture = {
            "num_nodes": int(m.num_nodes),
            "num_relations": relations,
            "dim": int(config.dim),
            "encoder": str(config.model),
            "decoder": decoder,
            "num_layers": max(int(config.num_layers), 1),
            "in_channels": 0 if model.embedding is not None else int(m.num_features),
            "dropout": float(config.dropout),
            "heads": int(config.heads),
        }
        return ModelSpec("link", architecture, {}, _plain(config.to_dict()), graph_info, metrics)
    architecture = {
        "model": str(config.model),
        "in_channels": int(m.num_features),
        "hidden": int(config.hidden),
        "out_channels": int(m.num_classes),
        "num_layers": int(config.num_layers),
        "dropout": float(config.dropout),
        "heads": int(config.heads),
    }
    preprocessing = {"normalize_features": bool(config.normalize_features)}
    return ModelSpec(
        "node", architecture, preprocessing, _plain(config.to_dict()), graph_info, metrics
    )


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def build_module(
    spec: ModelSpec, state_dict: dict[str, torch.Tensor] | None = None
) -> torch.nn.Module:
    """The module ``spec`` describes, in eval mode, with ``state_dict`` loaded
    strictly when given."""
    a = spec.architecture
    try:
        if spec.task == "node":
            module = build_model(
                str(a["model"]),
                int(a["in_channels"]),
                int(a["hidden"]),
                int(a["out_channels"]),
                int(a["num_layers"]),
                float(a["dropout"]),
                heads=int(a["heads"]),
            )
        else:
            module = LinkModel(
                int(a["num_nodes"]),
                int(a["num_relations"]),
                int(a["dim"]),
                encoder=str(a["encoder"]),
                decoder=str(a["decoder"]),
                num_layers=int(a["num_layers"]),
                in_channels=int(a.get("in_channels") or 0) or None,
                dropout=float(a["dropout"]),
                heads=int(a["heads"]),
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelSpecError(f"cannot build the model the spec describes: {exc}") from exc
    if state_dict is not None:
        try:
            module.load_state_dict(state_dict, strict=True)
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0]
            raise ModelSpecError(
                f"the weights do not fit the spec's architecture: {first}"
            ) from exc
    return module.eval()


def save_model_files(
    folder: str | os.PathLike[str], module: torch.nn.Module, spec: ModelSpec
) -> None:
    """Write :data:`SPEC_FILE` and :data:`WEIGHTS_FILE` into ``folder`` (created)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SPEC_FILE).write_text(json.dumps(spec.to_json(), indent=2, sort_keys=True) + "\n")
    state = {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}
    torch.save(state, folder / WEIGHTS_FILE)


def load_model_files(folder: str | os.PathLike[str]) -> tuple[ModelSpec, torch.nn.Module]:
    """The spec and the rebuilt module (CPU, eval mode) saved in ``folder``."""
    folder = Path(folder)
    spec_file, weights_file = folder / SPEC_FILE, folder / WEIGHTS_FILE
    if not spec_file.is_file() or not weights_file.is_file():
        raise ModelSpecError(
            f"{folder}: no {SPEC_FILE} / {WEIGHTS_FILE}; the model was logged before gnncore "
            "stored architectures with its models (retrain it to predict with it)"
        )
    try:
        data = json.loads(spec_file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelSpecError(f"{spec_file}: unreadable spec ({exc})") from exc
    spec = ModelSpec.from_json(data, spec_file)
    try:
        state = torch.load(weights_file, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable weights file is this error
        raise ModelSpecError(f"{weights_file}: unreadable weights ({exc})") from exc
    if not isinstance(state, dict):
        raise ModelSpecError(f"{weights_file}: expected a state_dict, found {type(state).__name__}")
    return spec, build_module(spec, state)
