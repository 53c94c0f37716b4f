"""The ``python_function`` flavor of gnncore models (``mlflow models serve``).

MLflow calls :func:`_load_pyfunc` with the model's ``gnncore/`` folder
(:mod:`gnncore.tracking.flavor` registers this module as the loader); it
rebuilds the model from ``model.json`` and ``state_dict.pt`` (weights only,
nothing unpickled) and returns a :class:`GraphPyfunc`.

A request is a self-contained subgraph, named like the model's tensor
signature:

* node classification: ``{"x": float32 [n, F], "edge_index": int64 [2, E]}``
  -> one row per node: ``predicted_class`` and ``probabilities``;
* link prediction: ``{"n_id": int64 [n], "edge_index": int64 [2, E]}`` (plus
  ``"x"`` when the encoder reads features) -> one ``embedding`` per node.

``edge_index`` holds local node positions ``0 .. n-1``, sources in row 0 and
targets in row 1 (PyG's convention: list both directions of an undirected
edge); self-loops are dropped, as ingestion drops them. Every node's output
is computed from the subgraph as given, by the same layer-wise code as
``gnncore predict`` (features normalised when training normalised them), so a
node's prediction matches ``gnncore predict`` when the subgraph holds its
``L``-hop in-neighbourhood. Served::

    mlflow models serve -m models:/gnncore-node-NAME@production --env-manager local \\
        -h 127.0.0.1 -p 5001
    curl -s 127.0.0.1:5001/invocations -H 'Content-Type: application/json' \\
        -d '{"inputs": {"x": [[...], [...]], "edge_index": [[0], [1]]}}'
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from gnncore.predict.engine import model_outputs
from gnncore.predict.layerwise import Adjacency
from gnncore.predict.spec import ModelSpec, load_model_files

#: Nodes per batch inside one request.
REQUEST_BATCH_SIZE = 4096


class RequestError(ValueError):
    """A request that does not fit the model (MLflow answers it with HTTP 400)."""


class GraphPyfunc:
    """``predict(model_input)`` over a subgraph (see the module docstring)."""

    def __init__(self, spec: ModelSpec, module: torch.nn.Module, device: str = "cpu") -> None:
        self.spec = spec
        self.device = torch.device(device)
        self.module = module.to(self.device).eval()

    def get_raw_model(self) -> torch.nn.Module:
        return self.module

    def predict(self, model_input: Any, params: dict[str, Any] | None = None) -> Any:
        import pandas as pd

        data = _as_arrays(model_input)
        edge_index = _edge_index(data)
        if self.spec.task == "node":
            x = _features(data, self.spec.in_channels, required=True)
            assert x is not None
            n = len(x)
            n_id = None
        else:
            n_id = _node_ids(data, self.spec)
            x = _features(data, self.spec.in_channels, required=bool(self.spec.in_channels))
            n = len(n_id)
            if x is not None and len(x) != n:
                raise RequestError(f"x has {len(x)} rows, n_id {n}")
        if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= n):
            raise RequestError(f"edge_index must hold node positions in [0, {n})")
        adjacency = Adjacency.from_edge_index(edge_index, n)
        rows = None
        if x is not None:
            features = torch.from_numpy(x)
            rows = lambda local: features[local]  # noqa: E731
        module = self.module
        embedding = getattr(module, "embedding", None)
        if n_id is not None and isinstance(embedding, torch.nn.Embedding):
            table = embedding.weight.detach()[torch.from_numpy(n_id).to(self.device)]
            rows = lambda local: table[local.to(table.device)]  # noqa: E731
            module = _WithoutTable(module)
        outputs = [
            out.cpu()
            for _, _, out in model_outputs(
                self.spec,
                module,
                adjacency,
                rows,
                n,
                batch_size=REQUEST_BATCH_SIZE,
                device=self.device,
            )
        ]
        result = torch.cat(outputs) if outputs else torch.zeros(0, 0)
        if self.spec.task == "node":
            probs = torch.softmax(result, dim=-1).numpy().astype(np.float32)
            return pd.DataFrame(
                {
                    "predicted_class": result.argmax(dim=-1).numpy().astype(np.int64),
                    "probabilities": list(probs),
                }
            )
        return pd.DataFrame({"embedding": list(result.numpy().astype(np.float32))})


class _WithoutTable(torch.nn.Module):
    """A link model whose embedding rows are already gathered for the request:
    the engine reads them through its row source, as if they were features."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.gnn = model.gnn
        self.embedding = None


def _as_arrays(model_input: Any) -> dict[str, np.ndarray]:
    import pandas as pd

    if isinstance(model_input, pd.DataFrame):
        raise RequestError(
            'send the subgraph as named tensors, e.g. {"inputs": {"x": [[...]], '
            '"edge_index": [[...], [...]]}}'
        )
    if not isinstance(model_input, dict):
        raise RequestError(f"expected a dict of arrays, got {type(model_input).__name__}")
    return {str(k): np.asarray(v) for k, v in model_input.items()}


def _edge_index(data: dict[str, np.ndarray]) -> np.ndarray:
    if "edge_index" not in data:
        raise RequestError("the request has no edge_index")
    edge_index = data["edge_index"]
    if edge_index.size == 0:
        return np.zeros((2, 0), dtype=np.int64)
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise RequestError(f"edge_index must have shape [2, E], got {list(edge_index.shape)}")
    if not np.issubdtype(edge_index.dtype, np.integer):
        raise RequestError(f"edge_index must hold integers, got {edge_index.dtype}")
    return edge_index.astype(np.int64, copy=False)


def _features(data: dict[str, np.ndarray], width: int, required: bool) -> np.ndarray | None:
    if "x" not in data:
        if required:
            raise RequestError("the request has no x (node features)")
        return None
    x = data["x"]
    if x.ndim != 2 or x.shape[1] != width:
        raise RequestError(f"x must have shape [n, {width}], got {list(x.shape)}")
    x = np.array(x, dtype=np.float32)  # a writable copy
    if not np.isfinite(x).all():
        raise RequestError("x holds NaN or infinite values")
    return x


def _node_ids(data: dict[str, np.ndarray], spec: ModelSpec) -> np.ndarray:
    if "n_id" not in data:
        raise RequestError("the request has no n_id (node ids of the subgraph)")
    n_id = data["n_id"].reshape(-1).astype(np.int64)
    num_nodes = int(spec.architecture["num_nodes"])
    if n_id.size and (n_id.min() < 0 or n_id.max() >= num_nodes):
        raise RequestError(f"n_id must be node ids in [0, {num_nodes})")
    return n_id


def _load_pyfunc(data_path: str, model_config: dict[str, Any] | None = None) -> GraphPyfunc:
    """MLflow's entry point: the pyfunc of the gnncore folder ``data_path``."""
    spec, module = load_model_files(data_path)
    device = str((model_config or {}).get("device") or "cpu")
    return GraphPyfunc(spec, module, device)
