"""The served model's request limits and checks (issue 25, item 7): caps on
nodes and edges read when the model loads, integer ids only, and every bad
request a one-line :class:`RequestError` that MLflow's scoring server answers
with HTTP 400 and no traceback."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from mlflow.models import Model, ModelSignature
from mlflow.pyfunc import PyFuncModel, scoring_server

from gnncore.predict import ModelSpec
from gnncore.predict.pyfunc import (
    MAX_EDGES_ENV,
    MAX_NODES_ENV,
    GraphPyfunc,
    RequestError,
    RequestLimits,
    ServeConfigError,
    parse_request,
)
from gnncore.tracking.flavor import pyfunc_signature
from gnncore.tracking.mlflow import _input_names, _tensor_signature
from tests.gnncore.predict.pyfunc_models import (
    DIM,
    ENTITIES,
    FEATURES,
    link_spec,
    load,
    node_spec,
    save,
)

#: Rows no request could hold: its float32 copy (1.2e15 bytes) exceeds the
#: address space, so code that converted it before checking the cap fails.
HUGE = 10**14


@pytest.fixture(scope="module")
def node_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save(tmp_path_factory.mktemp("node") / "gnncore", node_spec())


@pytest.fixture(scope="module")
def link_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save(tmp_path_factory.mktemp("link") / "gnncore", link_spec())


@pytest.fixture
def node_model(node_folder: Path, monkeypatch: pytest.MonkeyPatch) -> GraphPyfunc:
    monkeypatch.delenv(MAX_NODES_ENV, raising=False)
    monkeypatch.delenv(MAX_EDGES_ENV, raising=False)
    return load(node_folder)


@pytest.fixture
def link_model(link_folder: Path, monkeypatch: pytest.MonkeyPatch) -> GraphPyfunc:
    monkeypatch.delenv(MAX_NODES_ENV, raising=False)
    monkeypatch.delenv(MAX_EDGES_ENV, raising=False)
    return load(link_folder)


def _node_request(n: int, num_edges: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(n + num_edges)
    return {
        "x": rng.random((n, FEATURES), dtype=np.float32),
        "edge_index": rng.integers(0, max(n, 1), (2, num_edges)),
    }


def test_the_node_cap_from_the_environment_refuses_one_node_more(
    node_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MAX_NODES_ENV, "5")
    model = load(node_folder)
    assert len(model.predict(_node_request(5, 8))) == 5
    with pytest.raises(RequestError, match=rf"6 nodes; .* at most 5 \({MAX_NODES_ENV}\)"):
        model.predict(_node_request(6, 8))


def test_the_edge_cap_from_the_environment_refuses_one_edge_more(
    node_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MAX_EDGES_ENV, "10")
    model = load(node_folder)
    assert len(model.predict(_node_request(4, 10))) == 4
    with pytest.raises(RequestError, match=rf"11 edges; .* at most 10 \({MAX_EDGES_ENV}\)"):
        model.predict(_node_request(4, 11))


def test_the_model_config_caps_win_over_the_environment(
    node_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MAX_NODES_ENV, "100")
    model = load(node_folder, {"max_nodes": 2, "max_edges": 3})
    assert (model.limits.max_nodes, model.limits.max_edges) == (2, 3)
    with pytest.raises(RequestError, match="3 nodes"):
        model.predict(_node_request(3))


@pytest.mark.parametrize("value", ["0", "-1", "lots", "1.5"])
def test_a_cap_that_is_not_a_positive_integer_stops_the_load(
    node_folder: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """``mlflow models serve`` fails at start, naming the variable, rather than
    serving without the cap it was given."""
    monkeypatch.setenv(MAX_EDGES_ENV, value)
    with pytest.raises(ServeConfigError, match=rf"{MAX_EDGES_ENV}: expected a positive integer"):
        load(node_folder)


def test_huge_requests_are_refused_before_anything_is_allocated(
    node_model: GraphPyfunc, link_model: GraphPyfunc
) -> None:
    """Zero-stride views claim 10^14 rows or edges: converting one before the
    cap is checked raises MemoryError (or takes hours); with the default caps
    each is one RequestError at once."""
    start = time.monotonic()
    small = _node_request(2)
    huge_x = np.broadcast_to(np.float32(0), (HUGE, FEATURES))
    with pytest.raises(RequestError, match=f"{HUGE:,} nodes"):
        node_model.predict({"x": huge_x, "edge_index": small["edge_index"]})
    huge_edges = np.broadcast_to(np.int32(0), (2, HUGE))
    with pytest.raises(RequestError, match=f"{HUGE:,} edges"):
        node_model.predict({"x": small["x"], "edge_index": huge_edges})
    huge_ids = np.broadcast_to(np.int32(0), (HUGE,))
    with pytest.raises(RequestError, match=f"{HUGE:,} nodes"):
        link_model.predict({"n_id": huge_ids, "edge_index": huge_edges})
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("n_id", [[3.7, 0.2], [3.0, 1.0]], ids=["fractional", "integral-floats"])
def test_float_node_ids_are_refused_not_truncated(link_model: GraphPyfunc, n_id: list) -> None:
    with pytest.raises(RequestError, match="n_id must hold integer node ids, got float64"):
        link_model.predict({"n_id": np.array(n_id), "edge_index": np.array([[0], [1]])})
    answer = link_model.predict({"n_id": np.array([3, 0]), "edge_index": np.array([[0], [1]])})
    assert np.stack(answer["embedding"].to_numpy()).shape == (2, DIM)


@pytest.mark.parametrize(
    ("task", "request_", "message"),
    [
        ("node", {"x": [["a", "b", "c"]], "edge_index": [[0], [0]]}, "x must hold numbers"),
        ("node", {"x": np.ones((1, FEATURES)) * 1j, "edge_index": []}, "x must hold numbers"),
        ("node", {"x": [[1.0, 2.0, 3.0], [1.0]], "edge_index": []}, "x is not a rectangular"),
        ("node", {"x": np.ones((2, FEATURES)), "edge_index": [[0, 1], [1]]}, "not a rectangular"),
        ("node", {"x": np.ones((1, FEATURES)), "edge_index": [], "y": 1}, "unknown input 'y'"),
        ("link", {"n_id": [[1], [2]], "edge_index": []}, r"n_id must have shape \[n\]"),
        ("link", {"n_id": [2**70], "edge_index": []}, "n_id must hold integer node ids"),
        ("link", {"n_id": [True, False], "edge_index": []}, "n_id must hold integer node ids"),
    ],
    ids=[
        "strings-in-x",
        "complex-x",
        "ragged-x",
        "ragged-edge-index",
        "unknown-key",
        "2d-n-id",
        "id-beyond-int64",
        "bool-n-id",
    ],
)
def test_malformed_requests_are_one_line_request_errors(
    node_model: GraphPyfunc, link_model: GraphPyfunc, task: str, request_: dict, message: str
) -> None:
    """Each of these raised a plain ValueError or RuntimeError from NumPy or the
    engine (a 400 with a traceback when served), or was silently accepted."""
    model = node_model if task == "node" else link_model
    with pytest.raises(RequestError, match=message) as error:
        model.predict(request_)
    assert "\n" not in str(error.value)


def test_a_request_without_nodes_answers_no_rows(
    node_model: GraphPyfunc, link_model: GraphPyfunc
) -> None:
    empty = node_model.predict({"x": np.zeros((0, FEATURES), np.float32), "edge_index": []})
    assert len(empty) == 0 and list(empty.columns) == ["predicted_class", "probabilities"]
    empty = link_model.predict({"n_id": np.zeros(0, np.int64), "edge_index": [[], []]})
    assert len(empty) == 0 and list(empty.columns) == ["embedding"]


def test_the_scoring_server_answers_a_request_error_with_400_and_its_line(
    link_model: GraphPyfunc,
) -> None:
    """MLflow's scoring server (its ``invocations``, in process) over the
    pyfunc: a refused request is HTTP 400 whose message ends with the
    RequestError's line, without the traceback MLflow attaches to other errors.
    (Without a signature the JSON is parsed as it is, so ``3.5`` reaches the
    pyfunc as a float.)"""
    served = PyFuncModel(model_meta=Model(), model_impl=link_model)
    cases = {
        json.dumps({"inputs": {"n_id": [3.5, 0], "edge_index": [[0], [1]]}}): (
            "n_id must hold integer node ids, got float64"
        ),
        json.dumps({"inputs": {"n_id": [3, ENTITIES], "edge_index": [[0], [1]]}}): (
            f"n_id must be node ids in [0, {ENTITIES})"
        ),
        json.dumps({"inputs": {"n_id": [3, -1], "edge_index": [[0], [1]]}}): (
            f"n_id must be node ids in [0, {ENTITIES})"
        ),
        json.dumps({"inputs": {"n_id": [3, 0], "edge_index": [[0], [2]]}}): (
            "edge_index must hold node positions in [0, 2)"
        ),
    }
    for body, line in cases.items():
        with pytest.raises(RequestError) as error:
            scoring_server.invocations(body, "application/json", served, None)
        assert error.value.get_http_status_code() == 400
        answer = json.loads(error.value.serialize_as_json())
        assert answer["error_code"] == "INVALID_PARAMETER_VALUE"
        assert answer["message"].endswith(f"Error: {line}"), answer["message"]
        assert "stack_trace" not in answer
    ok = scoring_server.invocations(
        json.dumps({"inputs": {"n_id": [3, 0], "edge_index": [[0], [1]]}}),
        "application/json",
        served,
        None,
    )
    assert ok.status == 200 and len(json.loads(ok.response)["predictions"]) == 2


def _logged_signature(model: GraphPyfunc, example: tuple[torch.Tensor, ...]) -> ModelSignature:
    """The signature ``MlflowTracker.log_model`` gives this model (same functions)."""
    names = _input_names(model.spec, len(example))
    return pyfunc_signature(_tensor_signature(model.module, example, names), model.spec.task)


def _served(model: GraphPyfunc) -> tuple[PyFuncModel, ModelSignature]:
    """``model`` as ``mlflow models serve`` loads it: a PyFuncModel with its logged signature."""
    if model.spec.task == "node":
        example: tuple[torch.Tensor, ...] = (torch.rand(2, FEATURES), torch.tensor([[0], [1]]))
    else:
        example = (torch.tensor([3, 0]), torch.tensor([[0], [1]]))
    signature = _logged_signature(model, example)
    return PyFuncModel(model_meta=Model(signature=signature), model_impl=model), signature


#: One edge, and the starts of the RequestError lines for non-integer entries.
EDGE = [[0], [1]]
NOT_AN_ID = "n_id must hold integer node ids, got "
NOT_A_POSITION = "edge_index must hold integers, got "
RAGGED = "edge_index is not a rectangular array of numbers"
BEYOND_INT64 = f"n_id must hold integer node ids within int64, got {2**64}"


@pytest.mark.parametrize(
    ("task", "inputs", "line"),
    [
        ("link", {"n_id": [3.7, 0], "edge_index": EDGE}, NOT_AN_ID + "3.7"),
        ("link", {"n_id": [3.0, 0], "edge_index": EDGE}, NOT_AN_ID + "3.0"),
        ("link", {"n_id": [3, True], "edge_index": EDGE}, NOT_AN_ID + "True"),
        ("link", {"n_id": ["3", 0], "edge_index": EDGE}, NOT_AN_ID + "'3'"),
        ("link", {"n_id": [3, 0], "edge_index": [[0], [1.5]]}, NOT_A_POSITION + "1.5"),
        ("link", {"n_id": [3, 0], "edge_index": [[0, 1], [1]]}, RAGGED),
        ("link", {"n_id": [2**64, 0], "edge_index": EDGE}, BEYOND_INT64),
        ("node", {"x": [[1.0, 2.0, 3.0]] * 2, "edge_index": [[0.5], [1]]}, NOT_A_POSITION + "0.5"),
    ],
    ids=["fractional-n-id", "integral-float-n-id", "bool-n-id", "string-n-id", "float-edge",
         "ragged-edge-index", "id-beyond-int64", "node-model-float-edge"],
)  # fmt: skip
def test_the_scoring_server_refuses_non_integer_ids_under_the_logged_signature(
    node_model: GraphPyfunc, link_model: GraphPyfunc, task: str, inputs: dict, line: str
) -> None:
    """Through MLflow's scoring server with the signature the model is logged
    with: a JSON float (or bool, string) in ``n_id`` or ``edge_index`` is HTTP
    400 with the RequestError's line naming the value. Under the former
    ``int64`` specs MLflow built the arrays with ``np.array(..., dtype=int64)``
    first, so ``3.7`` reached the model as ``3`` and was answered (200)."""
    served, signature = _served(node_model if task == "node" else link_model)
    body = json.dumps({"inputs": inputs})
    with pytest.raises(RequestError) as error:
        scoring_server.invocations(body, "application/json", served, signature.inputs)
    assert error.value.get_http_status_code() == 400
    answer = json.loads(error.value.serialize_as_json())
    assert answer["error_code"] == "INVALID_PARAMETER_VALUE" and "stack_trace" not in answer
    assert answer["message"].endswith(f"Error: {line}"), answer["message"]


def test_integer_requests_under_the_logged_signature_are_answered_exactly(
    node_model: GraphPyfunc, link_model: GraphPyfunc
) -> None:
    """The same signature answers integer requests: JSON through the scoring
    server (node and link), int64 arrays through ``PyFuncModel.predict`` (what
    ``mlflow.pyfunc.load_model(uri).predict`` runs), and ids near ``2**63``
    reach the request parser exact (no detour through float64)."""
    for model, inputs in [
        (node_model, {"x": [[1.0, 2.0, 3.0], [0.0, 1.0, 0.5]], "edge_index": [[0], [1]]}),
        (link_model, {"n_id": [ENTITIES - 1, 0], "edge_index": [[0], [1]]}),
    ]:
        served, signature = _served(model)
        ok = scoring_server.invocations(
            json.dumps({"inputs": inputs}), "application/json", served, signature.inputs
        )
        assert ok.status == 200 and len(json.loads(ok.response)["predictions"]) == 2
    served, signature = _served(link_model)
    assert [str(s.type) for s in signature.inputs.inputs] == ["object", "object"]
    direct = served.predict(
        {"n_id": np.array([ENTITIES - 1, 0], np.int64), "edge_index": np.array([[0], [1]])}
    )
    assert np.stack(direct["embedding"].to_numpy()).shape == (2, DIM)
    with pytest.raises(RequestError, match="n_id must hold integer node ids, got float64"):
        served.predict({"n_id": np.array([3.0, 0.0]), "edge_index": np.array([[0], [1]])})
    big = [2**63 - 2, 2**62 + 1, 2**53 + 1, 0]
    parsed = scoring_server.infer_and_parse_data(
        {"inputs": {"n_id": big, "edge_index": [[0, 3], [1, 2]]}}, signature.inputs
    )
    huge = ModelSpec("link", {**link_model.spec.architecture, "num_nodes": 2**63 - 1})
    request = parse_request(parsed, huge, RequestLimits())
    assert request.n_id is not None and request.n_id.dtype == np.int64
    assert request.n_id.tolist() == big
    assert request.edge_index.tolist() == [[0, 3], [1, 2]]
