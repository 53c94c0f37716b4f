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

Every request is checked (:func:`parse_request`) before the pyfunc allocates
or computes anything proportional to it: at most :data:`DEFAULT_MAX_NODES`
nodes and :data:`DEFAULT_MAX_EDGES` edges (``GNNCORE_SERVE_MAX_NODES`` /
``GNNCORE_SERVE_MAX_EDGES``, or the ``max_nodes`` / ``max_edges`` of the model
config, read when the model loads); ``n_id`` and ``edge_index`` hold integers
(float arrays are refused, not truncated), ids in range, ``x`` finite numbers
of the model's width, and no other keys. A request that fails raises
:class:`RequestError`, an ``MlflowException`` with ``INVALID_PARAMETER_VALUE``:
the scoring server answers HTTP 400 with its one-line message and no
traceback. MLflow's scoring server parses the JSON body, and builds each
input as an array of the signature's dtype, before the pyfunc sees it: the
signature declares ``n_id`` and ``edge_index`` as ``object`` tensors
(:func:`gnncore.tracking.flavor.pyfunc_signature`), so their JSON numbers
arrive as parsed, Python ``int`` or ``float``, and a ``3.7`` (or ``3.0``,
``true``, ``"3"``) is refused here, naming it, where an ``int64`` spec
(models logged before) truncated it to ``3``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE

from gnncore.errors import GnnCoreError
from gnncore.predict.engine import model_outputs
from gnncore.train.core.layerwise import Adjacency
from gnncore.train.spec import ModelSpec, load_model_files

#: Nodes per batch inside one request.
REQUEST_BATCH_SIZE = 4096
#: Most nodes (rows of ``x`` / entries of ``n_id``) one request may hold, unless configured.
DEFAULT_MAX_NODES = 1_000_000
#: Most edges (columns of ``edge_index``) one request may hold, unless configured.
DEFAULT_MAX_EDGES = 10_000_000
#: Environment variables read when the model loads (``mlflow models serve``).
MAX_NODES_ENV = "GNNCORE_SERVE_MAX_NODES"
MAX_EDGES_ENV = "GNNCORE_SERVE_MAX_EDGES"


class RequestError(MlflowException, GnnCoreError, ValueError):
    """A request that does not fit the model, in one line.

    An ``MlflowException`` with ``INVALID_PARAMETER_VALUE``: MLflow's scoring
    server answers it with HTTP 400 and this message (other exceptions become a
    400 whose body is a generic sentence and a traceback).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, error_code=INVALID_PARAMETER_VALUE)


class ServeConfigError(GnnCoreError, ValueError):
    """A request limit that is not a positive integer (the model does not load)."""


@dataclass(frozen=True)
class RequestLimits:
    """The largest request the pyfunc answers.

    Args:
        max_nodes (int): Most nodes (rows of ``x``, entries of ``n_id``).
        max_edges (int): Most edges (columns of ``edge_index``).
    """

    max_nodes: int = DEFAULT_MAX_NODES
    max_edges: int = DEFAULT_MAX_EDGES

    @classmethod
    def resolve(
        cls,
        model_config: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> RequestLimits:
        """The limits from ``model_config`` (``max_nodes``, ``max_edges``), else
        the environment (:data:`MAX_NODES_ENV`, :data:`MAX_EDGES_ENV`), else the
        defaults; :class:`ServeConfigError` when one is not a positive integer."""
        config = model_config or {}
        env = os.environ if environ is None else environ
        return cls(
            max_nodes=_limit(config, "max_nodes", env, MAX_NODES_ENV, DEFAULT_MAX_NODES),
            max_edges=_limit(config, "max_edges", env, MAX_EDGES_ENV, DEFAULT_MAX_EDGES),
        )


def _limit(
    config: Mapping[str, Any], key: str, env: Mapping[str, str], var: str, default: int
) -> int:
    if config.get(key) is not None:
        raw, where = config[key], f"model config {key}"
    elif env.get(var, "").strip():
        raw, where = env[var].strip(), var
    else:
        return default
    try:
        if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
            raise ValueError(raw)
        value = int(raw)
    except (TypeError, ValueError):
        raise ServeConfigError(f"{where}: expected a positive integer, got {raw!r}") from None
    if value < 1:
        raise ServeConfigError(f"{where}: expected a positive integer, got {raw!r}")
    return value


class GraphPyfunc:
    """``predict(model_input)`` over a subgraph (see the module docstring)."""

    def __init__(
        self,
        spec: ModelSpec,
        module: torch.nn.Module,
        device: str = "cpu",
        limits: RequestLimits | None = None,
    ) -> None:
        self.spec = spec
        self.device = torch.device(device)
        self.module = module.to(self.device).eval()
        self.limits = limits or RequestLimits()

    def get_raw_model(self) -> torch.nn.Module:
        return self.module

    def predict(self, model_input: Any, params: dict[str, Any] | None = None) -> Any:
        """One row per node of the request: ``predicted_class`` and
        ``probabilities`` (node task) or ``embedding`` (link task); a request
        that does not fit raises :class:`RequestError`."""
        import pandas as pd

        request = parse_request(model_input, self.spec, self.limits)
        n, x, n_id = request.num_nodes, request.x, request.n_id
        if n == 0:  # no nodes, no rows (the engine needs at least one)
            node = self.spec.task == "node"
            columns = ["predicted_class", "probabilities"] if node else ["embedding"]
            return pd.DataFrame({c: [] for c in columns})
        adjacency = Adjacency.from_edge_index(request.edge_index, n)
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


@dataclass(frozen=True)
class Request:
    """A checked request: ``num_nodes`` nodes, ``edge_index`` int64 ``[2, E]``
    of positions in ``[0, num_nodes)``, ``x`` float32 ``[num_nodes, F]`` (or
    ``None``) and ``n_id`` int64 ids in ``[0, num_nodes of the model)`` (link
    task; ``None`` for node classification)."""

    num_nodes: int
    edge_index: np.ndarray
    x: np.ndarray | None
    n_id: np.ndarray | None


def parse_request(model_input: Any, spec: ModelSpec, limits: RequestLimits) -> Request:
    """``model_input`` checked against ``spec`` and ``limits``.

    The sizes are read from the inputs' shapes (or the lengths of nested lists)
    and checked against ``limits`` before anything is converted, copied or
    computed; then the dtypes, shapes and values. Any problem raises
    :class:`RequestError` with one line.
    """
    data = _named_inputs(model_input, spec)
    if "edge_index" not in data:
        raise RequestError("the request has no edge_index")
    if spec.task == "node":
        if "x" not in data:
            raise RequestError("the request has no x (node features)")
        nodes_from = "x"
    else:
        if "n_id" not in data:
            raise RequestError("the request has no n_id (node ids of the subgraph)")
        if spec.in_channels and "x" not in data:
            raise RequestError("the request has no x (this model reads node features)")
        nodes_from = "n_id"
    # Sizes first, from shapes alone: nothing proportional to the request before the caps.
    n = _leading_length(data[nodes_from], nodes_from)
    if n > limits.max_nodes:
        raise RequestError(
            f"the request has {n:,} nodes; this server answers at most {limits.max_nodes:,} "
            f"({MAX_NODES_ENV})"
        )
    if "x" in data and nodes_from != "x":
        rows = _leading_length(data["x"], "x")
        if rows != n:
            raise RequestError(f"x has {rows:,} rows, n_id {n:,}")
    num_edges = _edge_count(data["edge_index"])
    if num_edges > limits.max_edges:
        raise RequestError(
            f"the request has {num_edges:,} edges; this server answers at most "
            f"{limits.max_edges:,} ({MAX_EDGES_ENV})"
        )
    n_id = _node_ids(data["n_id"], spec) if spec.task == "link" else None
    x = _features(data["x"], spec.in_channels) if "x" in data else None
    edge_index = _edge_index(data["edge_index"], n)
    return Request(num_nodes=n, edge_index=edge_index, x=x, n_id=n_id)


def _named_inputs(model_input: Any, spec: ModelSpec) -> dict[str, Any]:
    import pandas as pd

    if isinstance(model_input, pd.DataFrame):
        raise RequestError(
            'send the subgraph as named tensors, e.g. {"inputs": {"x": [[...]], '
            '"edge_index": [[...], [...]]}}'
        )
    if not isinstance(model_input, Mapping):
        raise RequestError(f"expected a dict of arrays, got {type(model_input).__name__}")
    if spec.task == "node":
        expected = ["x", "edge_index"]
    else:
        expected = ["n_id", "edge_index"] + (["x"] if spec.in_channels else [])
    data = {str(k): v for k, v in model_input.items()}
    if unknown := sorted(set(data) - set(expected)):
        names = ", ".join(repr(k[:40]) for k in unknown[:5])
        raise RequestError(f"unknown input {names}; this model reads {', '.join(expected)}")
    return data


def _shape(value: Any, depth: int) -> tuple[int, ...] | None:
    """The shape of ``value`` without converting it: an array's (or tensor's)
    shape, or the lengths along the first elements of nested lists, at most
    ``depth`` deep; ``None`` for a scalar or anything without a length."""
    shape: list[int] = []
    if isinstance(value, (np.ndarray, torch.Tensor)):
        shape = [int(d) for d in value.shape]
        if not (isinstance(value, np.ndarray) and value.dtype == object and value.size):
            return tuple(shape)
        # An object array (JSON through an ``object`` spec): a ragged one holds lists.
        value = value.flat[0]
    while len(shape) < depth and isinstance(value, (list, tuple)):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return tuple(shape) if shape else None


def _leading_length(value: Any, name: str) -> int:
    shape = _shape(value, 1)
    if not shape:
        raise RequestError(f"{name} must be an array with one entry per node")
    return shape[0]


def _edge_count(value: Any) -> int:
    """Columns of ``edge_index`` from its shape alone (0 for an empty one)."""
    shape = _shape(value, 2)
    if not shape:
        raise RequestError("edge_index must have shape [2, E], got a scalar")
    if 0 in shape:
        return 0  # no edges: [], [[], []]
    if len(shape) < 2 or shape[0] != 2:
        raise RequestError(f"edge_index must have shape [2, E], got {list(shape)}")
    return shape[1]


def _array(value: Any, name: str) -> np.ndarray:
    """``value`` as an array (after the caps); ragged or odd values are a RequestError."""
    try:
        if isinstance(value, torch.Tensor):
            return value.detach().cpu().numpy()
        return np.asarray(value)
    except (ValueError, TypeError, OverflowError):
        raise RequestError(f"{name} is not a rectangular array of numbers") from None


def _is_integer_type(kind: type) -> bool:
    return issubclass(kind, (int, np.integer)) and not issubclass(kind, (bool, np.bool_))


def _integers(values: np.ndarray, name: str, what: str) -> np.ndarray:
    """The ``object`` array ``values`` as ``int64``, exactly: what MLflow's
    scoring server makes of a JSON array under an ``object`` spec (Python
    ``int`` and ``float`` as parsed). Every entry must be an integer (not a
    bool) within int64; else a :class:`RequestError` naming the first that is
    not. Never truncates: ``3.7`` and ``3.0`` are refused, not read as ``3``."""
    items = values.ravel().tolist()
    kinds = set(map(type, items))
    if not all(_is_integer_type(kind) for kind in kinds):
        if any(issubclass(kind, (list, tuple, np.ndarray)) for kind in kinds):
            raise RequestError(f"{name} is not a rectangular array of numbers")
        bad = next(v for v in items if not _is_integer_type(type(v)))
        raise RequestError(f"{name} must hold {what}, got {_brief(bad)}")
    try:
        return values.astype(np.int64)
    except OverflowError:
        bad = next(v for v in items if not -(2**63) <= int(v) < 2**63)
        raise RequestError(f"{name} must hold {what} within int64, got {_brief(bad)}") from None


def _brief(value: Any) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int past Python's digit limit for str()
        return "an integer of thousands of digits"
    return text if len(text) <= 40 else text[:37] + "..."


def _edge_index(value: Any, n: int) -> np.ndarray:
    edge_index = _array(value, "edge_index")
    if edge_index.size == 0:
        return np.zeros((2, 0), dtype=np.int64)
    if edge_index.dtype == object:
        edge_index = _integers(edge_index, "edge_index", "integers")
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise RequestError(f"edge_index must have shape [2, E], got {list(edge_index.shape)}")
    if edge_index.dtype.kind not in "iu":
        raise RequestError(f"edge_index must hold integers, got {edge_index.dtype}")
    if edge_index.min() < 0 or edge_index.max() >= n:
        raise RequestError(f"edge_index must hold node positions in [0, {n})")
    return edge_index.astype(np.int64, copy=False)


def _features(value: Any, width: int) -> np.ndarray:
    if not width:
        raise RequestError("this model reads no node features; send no x")
    x = _array(value, "x")
    if x.size == 0 and x.ndim and x.shape[0] == 0:
        return np.zeros((0, width), dtype=np.float32)  # no nodes: JSON's [] has no width
    if x.ndim != 2 or x.shape[1] != width:
        raise RequestError(f"x must have shape [n, {width}], got {list(x.shape)}")
    if x.dtype.kind not in "fiu":
        raise RequestError(f"x must hold numbers, got {x.dtype}")
    with np.errstate(over="ignore", invalid="ignore"):
        x = np.array(x, dtype=np.float32)  # a writable copy; beyond float32 becomes inf
    if not np.isfinite(x).all():
        raise RequestError("x holds NaN or infinite values (or values beyond float32)")
    return x


def _node_ids(value: Any, spec: ModelSpec) -> np.ndarray:
    n_id = _array(value, "n_id")
    if n_id.ndim != 1:
        raise RequestError(f"n_id must have shape [n], got {list(n_id.shape)}")
    if n_id.size == 0:
        return np.zeros(0, dtype=np.int64)
    if n_id.dtype == object:
        n_id = _integers(n_id, "n_id", "integer node ids")
    if n_id.dtype.kind not in "iu":
        raise RequestError(f"n_id must hold integer node ids, got {n_id.dtype}")
    num_nodes = int(spec.architecture["num_nodes"])
    if n_id.min() < 0 or n_id.max() >= num_nodes:
        raise RequestError(f"n_id must be node ids in [0, {num_nodes})")
    return n_id.astype(np.int64, copy=False)


def _load_pyfunc(data_path: str, model_config: dict[str, Any] | None = None) -> GraphPyfunc:
    """MLflow's entry point: the pyfunc of the gnncore folder ``data_path``, with
    the request limits of ``model_config`` or the environment
    (:meth:`RequestLimits.resolve`)."""
    limits = RequestLimits.resolve(model_config)
    spec, module = load_model_files(data_path)
    device = str((model_config or {}).get("device") or "cpu")
    return GraphPyfunc(spec, module, device, limits)
