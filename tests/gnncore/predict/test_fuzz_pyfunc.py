"""Hypothesis over the pyfunc's request parser (issue 25, item 8, pyfunc half).

Three small real models (a GraphSAGE node classifier, a link encoder over
learned embeddings, one over features) loaded by the pyfunc's MLflow entry
point with small caps. Random valid requests, as arrays or nested lists, give
one well-formed row per node; random malformed ones (missing, unknown or
renamed keys, wrong dtypes and shapes, floats in ``n_id``, ids out of range,
NaN and infinite features, counts over the caps, up to 10^14 rows as
zero-stride views) raise :class:`RequestError` with one line and nothing else.
Examples are bounded and derandomized: the suite takes a few seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gnncore.predict.pyfunc import GraphPyfunc, RequestError
from tests.gnncore.predict.pyfunc_models import (
    CLASSES,
    DIM,
    ENTITIES,
    FEATURES,
    link_spec,
    load,
    node_spec,
    save,
)

MAX_NODES = 24
MAX_EDGES = 64
CAPS = {"max_nodes": MAX_NODES, "max_edges": MAX_EDGES}
HUGE = 10**14

FUZZ = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

Models = dict[str, GraphPyfunc]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Models:
    """``node``, ``link`` (learned embeddings) and ``link-x`` (features), capped
    at :data:`MAX_NODES` nodes and :data:`MAX_EDGES` edges."""
    base: Path = tmp_path_factory.mktemp("fuzz-pyfunc")
    specs = {"node": node_spec(), "link": link_spec(), "link-x": link_spec(FEATURES)}
    return {name: load(save(base / name, spec), CAPS) for name, spec in specs.items()}


finite = st.floats(-1e3, 1e3, allow_nan=False, width=32)
int_dtypes = st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32])


@st.composite
def valid_requests(draw: st.DrawFn, kind: str) -> tuple[int, dict[str, Any]]:
    """``(n, request)`` for model ``kind``: ``n`` nodes, up to the caps."""
    n = draw(st.integers(0, MAX_NODES))
    num_edges = draw(st.integers(0, MAX_EDGES)) if n else 0
    edge_dtype = draw(int_dtypes)  # every one holds positions < MAX_NODES
    edge_index = draw(
        hnp.arrays(edge_dtype, (2, num_edges), elements=st.integers(0, max(n - 1, 0)))
    )
    request: dict[str, Any] = {"edge_index": edge_index}
    if kind in ("node", "link-x"):
        request["x"] = draw(hnp.arrays(np.float32, (n, FEATURES), elements=finite))
    if kind.startswith("link"):
        request["n_id"] = draw(hnp.arrays(np.int64, n, elements=st.integers(0, ENTITIES - 1)))
    if draw(st.booleans()):  # as JSON would give them: nested lists
        request = {k: v.tolist() for k, v in request.items()}
    return n, request


def _check_rows(kind: str, n: int, answer: pd.DataFrame) -> None:
    assert len(answer) == n
    if kind == "node":
        assert list(answer.columns) == ["predicted_class", "probabilities"]
        if n:
            probs = np.stack(answer["probabilities"].to_numpy())
            assert probs.shape == (n, CLASSES) and np.isfinite(probs).all()
            assert np.allclose(probs.sum(axis=1), 1, atol=1e-5)
            assert (answer["predicted_class"].to_numpy() == probs.argmax(axis=1)).all()
    else:
        assert list(answer.columns) == ["embedding"]
        if n:
            embedding = np.stack(answer["embedding"].to_numpy())
            assert embedding.shape == (n, DIM) and np.isfinite(embedding).all()


@pytest.mark.parametrize("kind", ["node", "link", "link-x"])
def test_valid_requests_give_one_row_per_node(models: Models, kind: str) -> None:
    @FUZZ
    @given(valid_requests(kind))
    def check(case: tuple[int, dict[str, Any]]) -> None:
        n, request = case
        _check_rows(kind, n, models[kind].predict(request))

    check()


def test_a_node_answer_depends_only_on_its_in_neighbourhood(models: Models) -> None:
    """The same subgraph sent twice, once with an extra node that sends no edge
    into the first ones: their rows agree (layer-wise inference, not padding)."""

    @FUZZ
    @given(valid_requests("node"))
    def check(case: tuple[int, dict[str, Any]]) -> None:
        n, request = case
        x = np.asarray(request["x"], dtype=np.float32).reshape(n, FEATURES)
        edge_index = np.asarray(request["edge_index"], dtype=np.int64).reshape(2, -1)
        extra = {
            "x": np.vstack([x, np.ones((1, FEATURES), np.float32)]),
            "edge_index": np.hstack([edge_index, [[0], [n]]]) if n else edge_index,
        }
        if n + 1 > MAX_NODES or extra["edge_index"].shape[1] > MAX_EDGES:
            return
        alone = models["node"].predict(request)
        grown = models["node"].predict(extra)
        assert np.allclose(
            np.stack(list(alone["probabilities"])) if n else np.zeros((0, CLASSES)),
            np.stack(list(grown["probabilities"]))[:n],
            atol=1e-5,
        )

    check()


# --- malformed requests -------------------------------------------------------

Mutation = Callable[[dict[str, Any], int], Any]


def _drop(key: str) -> Mutation:
    return lambda r, n: {k: v for k, v in r.items() if k != key}


def _set(key: str, value: Callable[[int], Any]) -> Mutation:
    return lambda r, n: {**r, key: value(n)}


def _rename(key: str, to: str) -> Mutation:
    return lambda r, n: {(to if k == key else k): v for k, v in r.items()}


#: Mutations of a valid request of each model; each must give a RequestError.
COMMON: dict[str, Mutation] = {
    "no edge_index": _drop("edge_index"),
    "unknown key": lambda r, n: {**r, "weights": [1.0]},
    "edge_index renamed": _rename("edge_index", "edges"),
    "edge_index 3 rows": _set("edge_index", lambda n: np.zeros((3, 2), np.int64)),
    "edge_index 1-D": _set("edge_index", lambda n: np.zeros(4, np.int64)),
    "edge_index 3-D": _set("edge_index", lambda n: np.zeros((2, 2, 2), np.int64)),
    "edge_index scalar": _set("edge_index", lambda n: 0),
    "edge_index floats": _set("edge_index", lambda n: np.array([[0.5], [0.0]])),
    "edge_index integral floats": _set("edge_index", lambda n: np.array([[0.0], [0.0]])),
    "edge_index bools": _set("edge_index", lambda n: np.array([[True], [False]])),
    "edge_index strings": _set("edge_index", lambda n: [["0"], ["1"]]),
    "edge_index negative": _set("edge_index", lambda n: np.array([[-1], [0]])),
    "edge_index out of range": _set("edge_index", lambda n: np.array([[0], [n]])),
    "edge_index beyond int64": _set("edge_index", lambda n: [[2**64], [0]]),
    "edge_index ragged": _set("edge_index", lambda n: [[0, 0], [0]]),
    "edge_index over the cap": _set("edge_index", lambda n: np.zeros((2, MAX_EDGES + 1), int)),
    "edge_index huge": _set("edge_index", lambda n: np.broadcast_to(np.int32(0), (2, HUGE))),
    "not a dict": lambda r, n: list(r.values()),
    "a DataFrame": lambda r, n: pd.DataFrame({"a": [1]}),
    "None": lambda r, n: None,
    "a string": lambda r, n: "x",
}
X_MUTATIONS: dict[str, Mutation] = {
    "x wrong width": _set("x", lambda n: np.zeros((n, FEATURES + 1), np.float32)),
    "x 1-D": _set("x", lambda n: np.zeros(n * FEATURES, np.float32)),
    "x scalar": _set("x", lambda n: 1.0),
    "x NaN": lambda r, n: {**r, "x": _with(r["x"], n, np.nan)},
    "x inf": lambda r, n: {**r, "x": _with(r["x"], n, -np.inf)},
    "x beyond float32": lambda r, n: {**r, "x": _with(r["x"], n, 1e300)},
    "x strings": _set("x", lambda n: np.full((n, FEATURES), "a")),
    "x complex": _set("x", lambda n: np.ones((n, FEATURES), np.complex64)),
    "x objects": _set("x", lambda n: [[None] * FEATURES] * n),
    "x ragged": _set("x", lambda n: [[0.0] * FEATURES, [0.0]] + [[0.0] * FEATURES] * (n - 2)),
}
NODE: dict[str, Mutation] = {
    **COMMON,
    **X_MUTATIONS,
    "no x": _drop("x"),
    "x renamed": _rename("x", "features"),
    "n_id sent": lambda r, n: {**r, "n_id": np.arange(n)},
    "x over the cap": _set("x", lambda n: np.zeros((MAX_NODES + 1, FEATURES), np.float32)),
    "x huge": _set("x", lambda n: np.broadcast_to(np.float32(0), (HUGE, FEATURES))),
}
N_ID_MUTATIONS: dict[str, Mutation] = {
    "no n_id": _drop("n_id"),
    "n_id renamed": _rename("n_id", "ids"),
    "n_id fractional floats": lambda r, n: {**r, "n_id": np.asarray(r["n_id"]) + 0.5},
    "n_id integral floats": lambda r, n: {**r, "n_id": np.asarray(r["n_id"], np.float64)},
    "n_id float list": lambda r, n: {**r, "n_id": [float(i) + 0.25 for i in r["n_id"]]},
    "n_id negative": lambda r, n: {**r, "n_id": _ids_with(r["n_id"], n, -1)},
    "n_id = num_nodes": lambda r, n: {**r, "n_id": _ids_with(r["n_id"], n, ENTITIES)},
    "n_id beyond int64": lambda r, n: {**r, "n_id": [2**64] * n},
    "n_id bools": lambda r, n: {**r, "n_id": np.ones(n, bool)},
    "n_id strings": lambda r, n: {**r, "n_id": [str(i) for i in r["n_id"]]},
    "n_id 2-D": lambda r, n: {**r, "n_id": np.asarray(r["n_id"]).reshape(n, 1)},
    "n_id scalar": _set("n_id", lambda n: 3),
    "n_id over the cap": _set("n_id", lambda n: np.zeros(MAX_NODES + 1, np.int64)),
    "n_id huge": _set("n_id", lambda n: np.broadcast_to(np.int64(0), (HUGE,))),
}
LINK: dict[str, Mutation] = {
    **COMMON,
    **N_ID_MUTATIONS,
    "x sent": lambda r, n: {**r, "x": np.zeros((n, FEATURES), np.float32)},
}
LINK_X: dict[str, Mutation] = {
    **COMMON,
    **X_MUTATIONS,
    **N_ID_MUTATIONS,
    "no x": _drop("x"),
    "x one row more": lambda r, n: {**r, "x": np.zeros((n + 1, FEATURES), np.float32)},
    "x one row less": lambda r, n: {**r, "x": np.zeros((n - 1, FEATURES), np.float32)},
}
MUTATIONS = {"node": NODE, "link": LINK, "link-x": LINK_X}


def _with(x: Any, n: int, value: float) -> np.ndarray:
    """``x`` (as float64) with ``value`` in its last cell."""
    out = np.array(x, dtype=np.float64).reshape(n, FEATURES)
    out[-1, -1] = value
    return out


def _ids_with(n_id: Any, n: int, value: int) -> np.ndarray:
    """``n_id`` with ``value`` as its last id."""
    out = np.array(n_id, dtype=np.int64).reshape(n)
    out[-1] = value
    return out


@pytest.mark.parametrize("kind", ["node", "link", "link-x"])
def test_malformed_requests_raise_one_line_request_errors(models: Models, kind: str) -> None:
    """A valid request of at least two nodes, one random mutation: RequestError,
    one line, and no other exception."""
    mutations = MUTATIONS[kind]

    @settings(FUZZ, max_examples=80)
    @given(
        valid_requests(kind).filter(lambda case: case[0] >= 2),
        st.sampled_from(sorted(mutations)),
    )
    def check(case: tuple[int, dict[str, Any]], name: str) -> None:
        n, request = case
        bad = mutations[name](request, n)
        with pytest.raises(RequestError) as error:
            models[kind].predict(bad)
        message = str(error.value)
        assert "\n" not in message and 0 < len(message) < 300, (name, message)

    check()


def test_every_mutation_is_refused_at_least_once(models: Models) -> None:
    """Each named mutation, on one fixed valid request of each model, is a
    RequestError (Hypothesis may not draw every name in its bounded examples)."""
    rng = np.random.default_rng(0)
    n = 4
    base = {
        "edge_index": np.array([[0, 1, 2], [1, 2, 3]]),
        "x": rng.random((n, FEATURES), dtype=np.float32),
        "n_id": np.array([5, 0, 7, 49]),
    }
    for kind, mutations in MUTATIONS.items():
        keys = {"node": ["x", "edge_index"], "link": ["n_id", "edge_index"]}.get(
            kind, ["n_id", "edge_index", "x"]
        )
        request = {k: base[k] for k in keys}
        _check_rows(kind, n, models[kind].predict(request))
        for name, mutate in mutations.items():
            try:
                models[kind].predict(mutate(request, n))
            except RequestError:
                continue
            except Exception as exc:  # noqa: BLE001 - any other exception is the failure
                pytest.fail(f"{kind}, {name}: {type(exc).__name__}: {exc}")
            pytest.fail(f"{kind}, {name}: accepted")
