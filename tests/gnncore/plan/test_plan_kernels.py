"""The planning kernels of ``gnncore._C`` (access estimators, feature placement,
HyDRA's greedy assignment) against their pure-Python references."""

from __future__ import annotations

import numpy as np
import pytest

from gnncore.testing.plan_reference import (
    access_reach_reference,
    access_spmv_reference,
    degree_greedy_assign_reference,
    place_features_reference,
)

_C = pytest.importorskip("gnncore._C")

#: Song & Jiang's worked example: undirected edges, stored both ways, plus self-loops.
EXAMPLE_EDGES = [(0, 1), (1, 2), (1, 3), (2, 3), (2, 4), (2, 5)]


def csr(n: int, src, dst, dtype=np.int64) -> tuple[np.ndarray, np.ndarray]:
    """Row ``t`` lists the ``src`` of every edge ``(src, t)``, in edge order."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    order = np.argsort(dst, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    return indptr, src[order].astype(dtype)


def example_graph(dtype=np.int64) -> tuple[np.ndarray, np.ndarray]:
    u, v = (np.array(c) for c in zip(*EXAMPLE_EDGES, strict=True))
    loops = np.arange(6)
    return csr(6, np.concatenate([u, v, loops]), np.concatenate([v, u, loops]), dtype)


def random_graph(seed: int, directed: bool, dtype, n: int = 60, m: int = 150):
    """A random multigraph whose last nodes are isolated (no edge touches them)."""
    rng = np.random.default_rng(seed)
    live = n - 5
    src, dst = rng.integers(0, live, m), rng.integers(0, live, m)
    if not directed:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    return csr(n, src, dst, dtype)


def random_train(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 100)
    train = rng.integers(0, n, n // 3)
    return np.concatenate([train, train[:4], [n - 1]]).astype(np.int64)  # duplicates, isolated


GRAPHS = [
    pytest.param(
        seed, directed, dtype, id=f"{'dir' if directed else 'undir'}-{dtype.__name__}-{seed}"
    )
    for seed in (0, 1, 2)
    for directed in (True, False)
    for dtype in (np.int32, np.int64)
]


# Access estimators ------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_reach_of_the_worked_example(dtype):
    indptr, indices = example_graph(dtype)
    train = np.arange(6, dtype=np.int64)
    f = _C.access_reach(indptr, indices, train, 2)
    assert f.dtype == np.int64
    assert f.tolist() == [4, 6, 6, 6, 5, 5]
    assert access_reach_reference(indptr, indices, train, 2).tolist() == [4, 6, 6, 6, 5, 5]


@pytest.mark.parametrize(("seed", "directed", "dtype"), GRAPHS)
@pytest.mark.parametrize("layers", [0, 1, 2, 3])
def test_reach_matches_the_reference(seed, directed, dtype, layers):
    indptr, indices = random_graph(seed, directed, dtype)
    train = random_train(seed, len(indptr) - 1)
    want = access_reach_reference(indptr, indices, train, layers)
    for threads in (1, 4):
        got = _C.access_reach(indptr, indices, train, layers, num_threads=threads)
        np.testing.assert_array_equal(got, want)
    if layers == 0:
        np.testing.assert_array_equal(want, np.isin(np.arange(len(want)), train))


@pytest.mark.parametrize(("seed", "directed", "dtype"), GRAPHS)
@pytest.mark.parametrize("layers", [0, 1, 2, 3])
def test_spmv_matches_the_reference(seed, directed, dtype, layers):
    indptr, indices = random_graph(seed, directed, dtype)
    train = random_train(seed, len(indptr) - 1)
    x = _C.access_spmv(indptr, indices, train, layers)
    assert x.dtype == np.float64
    np.testing.assert_allclose(x, access_spmv_reference(indptr, indices, train, layers), rtol=1e-12)


def test_spmv_of_the_worked_example_is_the_matrix_power():
    indptr, indices = example_graph()
    a = np.zeros((6, 6))
    for u, v in EXAMPLE_EDGES:
        a[u, v] = a[v, u] = 1.0
    a += 2 * np.eye(6)  # the self-loops plus the identity
    train = np.array([0, 2, 2, 5], dtype=np.int64)
    ones = np.zeros(6)
    ones[[0, 2, 5]] = 1.0
    x = _C.access_spmv(indptr, indices, train, 3)
    np.testing.assert_allclose(x, np.linalg.matrix_power(a, 3) @ ones, rtol=1e-12)
    np.testing.assert_allclose(x, access_spmv_reference(indptr, indices, train, 3), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_estimators_do_not_depend_on_the_thread_count(dtype):
    # Large enough for every parallel path (transpose, pull, index check).
    rng = np.random.default_rng(7)
    n, m = 20_000, 200_000
    hubs = rng.integers(0, 20, m)
    src = np.where(rng.random(m) < 0.2, hubs, rng.integers(0, n, m))
    indptr, indices = csr(n, src, rng.integers(0, n, m), dtype)
    train = rng.integers(0, n, 3000)
    x1 = _C.access_spmv(indptr, indices, train, 3, num_threads=1)
    for threads in (0, 2, 4):
        x = _C.access_spmv(indptr, indices, train, 3, num_threads=threads)
        assert x.tobytes() == x1.tobytes()
    f1 = _C.access_reach(indptr, indices, train[:300], 2, num_threads=1)
    for threads in (0, 4):
        np.testing.assert_array_equal(
            _C.access_reach(indptr, indices, train[:300], 2, num_threads=threads), f1
        )


def test_spmv_with_more_threads_than_nodes():
    # Many parallel edges between a few nodes: most workers own no transposed row.
    rng = np.random.default_rng(3)
    indptr, indices = csr(7, rng.integers(0, 7, 100_000), rng.integers(0, 7, 100_000))
    train = np.array([1, 4], dtype=np.int64)
    want = access_spmv_reference(indptr, indices, train, 2)
    for threads in (1, 3, 16):
        got = _C.access_spmv(indptr, indices, train, 2, num_threads=threads)
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_estimators_on_an_empty_training_set_and_graph():
    indptr, indices = example_graph()
    none = np.empty(0, dtype=np.int64)
    assert _C.access_reach(indptr, indices, none, 2).tolist() == [0] * 6
    assert _C.access_spmv(indptr, indices, none, 2).tolist() == [0.0] * 6
    empty = (np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int64))
    assert _C.access_reach(*empty, none, 3).shape == (0,)
    assert _C.access_spmv(*empty, none, 3).shape == (0,)


# Feature placement ------------------------------------------------------------


def test_placement_of_the_worked_example():
    p = np.array([4, 6, 6, 6, 5, 5]) / 6
    b = _C.place_features(p, 2, 2, 0.3)
    assert b.dtype == np.int64 and b.shape == (2, 2)
    assert b.tolist() == [[1, 3], [4, 2]]
    assert place_features_reference(p, 2, 2, 0.3).tolist() == [[1, 3], [4, 2]]


def random_p(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    p[rng.integers(0, n, n // 3)] = 0.5  # ties, broken by the smaller id
    p[rng.integers(0, n, n // 10)] = 0.0
    return p


@pytest.mark.parametrize("devices", [1, 2, 3, 4])
@pytest.mark.parametrize("slots", [0, 1, 7, 25, 40, 200])
@pytest.mark.parametrize("alpha", [0.0, 0.2, 0.9, 1e9])
def test_placement_matches_the_reference(devices, slots, alpha):
    n = 40
    p = random_p(devices * 1000 + slots, n)
    b = _C.place_features(p, devices, slots, alpha)
    want = place_features_reference(p, devices, slots, alpha)
    assert b.shape == (devices, min(slots, n))
    np.testing.assert_array_equal(b, want)
    top = np.lexsort((np.arange(n), -p))[: min(slots, n)]
    if devices == 1 or alpha >= 1e9:  # one device, or no swap pays: the hottest nodes
        np.testing.assert_array_equal(b, np.tile(top, (devices, 1)))
    for row in b:  # a device caches distinct nodes
        assert len(set(row.tolist())) == len(row)


def test_placement_with_alpha_zero_spreads_distinct_nodes():
    p = np.linspace(1.0, 2.0, 30)  # all positive: every swap pays with alpha 0
    b = _C.place_features(p, 3, 6, 0.0)
    assert len(np.unique(b)) == 18
    np.testing.assert_array_equal(b, place_features_reference(p, 3, 6, 0.0))


@pytest.mark.parametrize(("devices", "slots"), [(1, 10**9), (1, 70_000), (3, 30_000)])
def test_placement_of_many_nodes_matches_the_reference(devices, slots):
    # Long enough for the radix sort; few distinct values, so ties abound.
    rng = np.random.default_rng(devices)
    p = rng.integers(0, 500, 100_000) / 499
    p[rng.integers(0, len(p), 1000)] = -0.0  # equal to 0.0: ties by id too
    b = _C.place_features(p, devices, slots, 0.5)
    np.testing.assert_array_equal(b, place_features_reference(p, devices, slots, 0.5))
    if devices == 1:
        order = np.lexsort((np.arange(len(p)), -p))
        np.testing.assert_array_equal(b[0], order[: b.shape[1]])


def test_placement_of_no_nodes():
    assert _C.place_features(np.empty(0), 3, 5, 0.2).shape == (3, 0)


# Degree-balanced greedy -------------------------------------------------------


@pytest.mark.parametrize("parts", [1, 2, 3, 5])
@pytest.mark.parametrize("group_size", [1, 3, 16, 1000])
@pytest.mark.parametrize("skipping", [False, True])
def test_degree_greedy_matches_the_reference(parts, group_size, skipping):
    rng = np.random.default_rng(parts * 100 + group_size)
    degree = rng.integers(0, 12, 97).astype(np.int64)  # many ties
    degree[:3] = 80
    skip = (rng.random(97) < 0.2).astype(np.uint8) if skipping else None
    got = _C.degree_greedy_assign(degree, parts, group_size, skip)
    want = degree_greedy_assign_reference(degree, parts, group_size, skip)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.int64
    if skip is not None:
        assert np.all((got == -1) == skip.astype(bool))
    else:
        np.testing.assert_array_equal(got, _C.degree_greedy_assign(degree, parts, group_size))
    assert got.max() < parts


def test_degree_greedy_by_hand():
    degree = np.array([1, 5, 3, 5, 0, 2], dtype=np.int64)
    # Order 1, 3, 2, 5, 0, 4; groups (1, 3) (2, 5) (0, 4): sums 10 -> 0, 5 -> 1, 1 -> 1.
    assert _C.degree_greedy_assign(degree, 2, 2).tolist() == [1, 0, 1, 0, 1, 1]
    skip = np.array([0, 1, 0, 0, 0, 0], dtype=np.uint8)
    # Order 3, 2, 5, 0, 4; groups (3, 2) (5, 0) (4): 8 -> 0, 3 -> 1, 0 -> 1.
    assert _C.degree_greedy_assign(degree, 2, 2, skip).tolist() == [1, -1, 0, 0, 1, 1]


# Bad input --------------------------------------------------------------------


def _bad_calls():
    indptr, indices = example_graph()
    train = np.arange(6, dtype=np.int64)
    out_of_range = indices.copy()
    out_of_range[3] = 6
    negative = indices.astype(np.int32)
    negative[0] = -1
    p = np.full(6, 0.5)
    nan_p = p.copy()
    nan_p[2] = np.nan
    degree = np.arange(6, dtype=np.int64)
    fns = (_C.access_reach, _C.access_spmv)
    return [
        *[
            (f, (indptr, out_of_range, train, 2), r"indices\[3\] = 6 is outside \[0, 6\)")
            for f in fns
        ],
        *[(f, (indptr, negative, train, 2), r"indices\[0\] = -1") for f in fns],
        *[(f, (indptr, indices, train, -1), "layers must be >= 0, got -1") for f in fns],
        *[(f, (indptr, indices, np.array([0, 9]), 1), r"train\[1\] = 9 is outside") for f in fns],
        *[(f, (indptr[:-1], indices, train, 1), "indptr must") for f in fns],
        *[(f, (np.empty(0, dtype=np.int64), indices, train, 1), "indptr must") for f in fns],
        (_C.place_features, (p, 0, 2, 0.3), "devices must be >= 1, got 0"),
        (_C.place_features, (p, 2, -1, 0.3), "slots must be >= 0, got -1"),
        (_C.place_features, (p, 2, 2, -0.5), "alpha must be a finite number >= 0, got -0.5"),
        (_C.place_features, (p, 2, 2, float("nan")), "alpha must be a finite number >= 0"),
        (_C.place_features, (nan_p, 2, 2, 0.3), r"p\[2\] must be a finite number >= 0, got nan"),
        (_C.place_features, (-p, 2, 2, 0.3), r"p\[0\] must be a finite number >= 0"),
        (_C.degree_greedy_assign, (degree, 0, 2), "parts must be >= 1, got 0"),
        (_C.degree_greedy_assign, (degree, 2, 0), "group_size must be >= 1, got 0"),
        (_C.degree_greedy_assign, (degree - 1, 2, 2), r"degree\[0\] must be >= 0, got -1"),
        (
            _C.degree_greedy_assign,
            (degree, 2, 2, np.zeros(5, dtype=np.uint8)),
            "skip must have one entry per node",
        ),
    ]


BAD_CALLS = _bad_calls()


@pytest.mark.parametrize(
    ("fn", "args", "message"),
    BAD_CALLS,
    ids=[f"{fn.__name__}:{message.replace(chr(92), '')}" for fn, _, message in BAD_CALLS],
)
def test_bad_input_raises_value_error_naming_it(fn, args, message):
    with pytest.raises(ValueError, match=message):
        fn(*args)
