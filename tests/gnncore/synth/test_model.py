"""The degree-corrected planted-partition generator (gnncore.synth)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gnncore import _C, synth
from gnncore.testing.reference import synth_feature_rows_reference

SPEC = synth.SynthSpec(num_nodes=6_000, avg_degree=8, num_classes=5, num_features=16, seed=3)


def all_edges(spec, chunk_edges=4_000_000):
    chunks = list(synth.iter_edge_chunks(spec, chunk_edges))
    src = np.concatenate([s for s, _ in chunks])
    dst = np.concatenate([d for _, d in chunks])
    return src, dst


@pytest.fixture(scope="module")
def graph():
    community, theta = synth.node_table(SPEC)
    src, dst = all_edges(SPEC)
    y = synth.labels(SPEC, community)
    return community, theta, src, dst, y


def test_spec_basics():
    assert SPEC.num_edges == 24_000
    tiny = synth.SynthSpec(num_nodes=5, avg_degree=1.3, num_classes=2, num_features=1)
    assert tiny.num_edges == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        SPEC.seed = 4  # type: ignore[misc]


@pytest.mark.parametrize(
    "bad",
    [
        {"num_nodes": 0},
        {"num_nodes": 4},  # fewer nodes than classes
        {"num_nodes": 2**31},
        {"num_nodes": 10.0},
        {"num_nodes": True},
        {"avg_degree": 0},
        {"avg_degree": float("nan")},
        {"avg_degree": float("inf")},
        {"num_classes": 1},
        {"num_features": 0},
        {"seed": -1},
        {"seed": 2**64},
        {"power_law_exponent": 2.0},
        {"intra_fraction": 1.5},
        {"intra_fraction": -0.1},
        {"feature_noise": -1.0},
        {"label_noise": 2.0},
        {"train_fraction": 0.0},
        {"val_fraction": -0.1},
        {"train_fraction": 0.7, "val_fraction": 0.4},
        {"avg_degree": "8"},
        {"communities_per_class": 0},
        {"communities_per_class": 1_201},  # 5 * 1201 communities > 6000 nodes
    ],
)
def test_bad_spec_raises(bad):
    kwargs = dict(num_nodes=6_000, avg_degree=8, num_classes=5, num_features=16, seed=3)
    kwargs.update(bad)
    with pytest.raises(ValueError, match="SynthSpec"):
        synth.SynthSpec(**kwargs)


def test_node_table(graph):
    community, theta, *_ = graph
    assert community.dtype == np.int64 and theta.dtype == np.float64
    sizes = np.bincount(community, minlength=SPEC.num_classes)
    assert sizes.max() - sizes.min() <= 1 and sizes.sum() == SPEC.num_nodes
    assert np.all(theta > 0) and theta.mean() == pytest.approx(1.0)
    assert theta.max() > 10 * np.median(theta)
    c2, t2 = synth.node_table(SPEC)
    np.testing.assert_array_equal(community, c2)
    np.testing.assert_array_equal(theta, t2)
    c3, _ = synth.node_table(dataclasses.replace(SPEC, seed=4))
    assert not np.array_equal(community, c3)


@pytest.mark.parametrize("exponent", [2.1, 2.5, 3.0, 5.0])
@pytest.mark.parametrize("chunk", [1, 7, 1 << 22])
def test_node_table_is_the_whole_array_formula(monkeypatch, exponent, chunk):
    """node_table deals communities in chunks and computes theta in place: the
    same arrays, bit for bit, as the whole-array formula (so the same edges)."""
    from gnncore.synth import model

    monkeypatch.setattr(model, "_NODE_CHUNK", chunk)
    spec = dataclasses.replace(SPEC, num_nodes=1001, power_law_exponent=exponent,
                               communities_per_class=3)  # fmt: skip
    community, theta = model.node_table(spec)
    n, c = spec.num_nodes, spec.num_communities
    expected = np.empty(n, dtype=np.int64)
    expected[model._rng(spec, model._TAG_COMMUNITY).permutation(n)] = np.arange(n) % c
    shape = exponent - 1.0
    uniform = model._rng(spec, model._TAG_THETA).random(n)
    reference = (1.0 - uniform) ** (-1.0 / shape)
    np.minimum(reference, max(shape / (shape - 1.0) * np.sqrt(n / spec.avg_degree), 1.0),
               out=reference)  # fmt: skip
    reference /= reference.mean()
    np.testing.assert_array_equal(community, expected)
    assert theta.tobytes() == reference.tobytes()


def test_edges_count_range_and_quality(graph):
    _, _, src, dst, _ = graph
    assert src.dtype == np.int64 and dst.dtype == np.int64
    assert len(src) == len(dst) == SPEC.num_edges
    assert src.min() >= 0 and dst.min() >= 0
    assert max(src.max(), dst.max()) < SPEC.num_nodes
    assert np.mean(src == dst) < 0.002
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    distinct = len(np.unique(lo * SPEC.num_nodes + hi))
    assert 1 - distinct / len(src) < 0.05


def test_degrees_follow_theta_and_are_heavy_tailed(graph):
    _, theta, src, dst, _ = graph
    degree = np.bincount(src, minlength=SPEC.num_nodes) + np.bincount(dst, minlength=SPEC.num_nodes)
    assert degree.mean() == pytest.approx(SPEC.avg_degree)
    assert degree.max() > 10 * degree.mean()
    # The expected degree of v is avg_degree * theta[v].
    assert np.corrcoef(degree, theta)[0, 1] > 0.9
    top = theta > np.quantile(theta, 0.99)
    ratio = degree[top].sum() / (SPEC.avg_degree * theta[top].sum())
    assert 0.9 < ratio < 1.1


@pytest.mark.parametrize("intra", [0.0, 0.3, 0.8, 1.0])
def test_intra_community_fraction(intra):
    spec = dataclasses.replace(SPEC, intra_fraction=intra)
    community, _ = synth.node_table(spec)
    src, dst = all_edges(spec)
    fraction = np.mean(community[src] == community[dst])
    sigma = np.sqrt(max(intra * (1 - intra), 1e-4) / len(src))
    assert abs(fraction - intra) < max(5 * sigma, 1e-9)


def test_several_communities_per_class_are_each_tight():
    """With 40 communities per class, edges stay inside their (small) community at
    ``intra_fraction``, a class is the union of its communities, and the spec of
    the default (one community per class) still writes no new field."""
    from gnncore.synth.dataset import spec_dict

    spec = dataclasses.replace(SPEC, communities_per_class=40)
    assert spec.num_communities == 200
    community, _ = synth.node_table(spec)
    assert set(np.bincount(community)) <= {29, 30}  # 6000 nodes in 200 communities
    y = synth.labels(spec, community)
    np.testing.assert_array_equal(y, community % 5)
    src, dst = all_edges(spec)
    intra = np.mean(community[src] == community[dst])
    sigma = np.sqrt(0.8 * 0.2 / len(src))
    assert abs(intra - 0.8) < 5 * sigma
    assert np.mean(y[src] == y[dst]) > intra  # other communities of the same class
    assert spec_dict(spec)["communities_per_class"] == 40
    assert "communities_per_class" not in spec_dict(SPEC)


def test_edges_reproducible_and_chunk_invariant(graph):
    _, _, src, dst, _ = graph
    for chunk in (1, 999, 5_000, 24_000):
        if chunk == 1:  # one-edge chunks: just the first few
            chunks = synth.iter_edge_chunks(SPEC, chunk)
            head = [next(chunks) for _ in range(5)]
            np.testing.assert_array_equal(np.concatenate([s for s, _ in head]), src[:5])
            continue
        s2, d2 = all_edges(SPEC, chunk)
        np.testing.assert_array_equal(src, s2)
        np.testing.assert_array_equal(dst, d2)
    s3, d3 = all_edges(dataclasses.replace(SPEC, seed=4))
    assert np.mean(src == s3) < 0.05


def test_edges_independent_of_threads(graph):
    community, theta, src, dst, _ = graph
    gen = _C.PlantedPartition(community, theta, SPEC.num_classes, SPEC.intra_fraction, SPEC.seed)
    assert gen.num_nodes == SPEC.num_nodes and gen.num_communities == SPEC.num_classes
    for threads in (1, 2, 5):
        s, d = gen.generate(1_000, 20_000, num_threads=threads)
        np.testing.assert_array_equal(s, src[1_000:21_000])
        np.testing.assert_array_equal(d, dst[1_000:21_000])


def test_generator_rejects_bad_tables():
    community = np.array([0, 1, 1], dtype=np.int64)
    with pytest.raises(ValueError, match="theta\\[1\\]"):
        _C.PlantedPartition(community, np.array([1.0, -1.0, 1.0]), 2, 0.5, 0)
    with pytest.raises(ValueError, match="sums to zero"):
        _C.PlantedPartition(community, np.zeros(3), 2, 0.5, 0)
    with pytest.raises(IndexError, match="community\\[2\\] = 5"):
        _C.PlantedPartition(np.array([0, 1, 5]), np.ones(3), 2, 0.5, 0)
    with pytest.raises(ValueError, match="differ in length"):
        _C.PlantedPartition(community, np.ones(2), 2, 0.5, 0)
    with pytest.raises(ValueError, match="num_communities"):
        _C.PlantedPartition(community, np.ones(3), 4, 0.5, 0)
    with pytest.raises(ValueError, match="intra_fraction"):
        _C.PlantedPartition(community, np.ones(3), 2, 1.5, 0)
    with pytest.raises(ValueError, match="chunk_edges"):
        next(synth.iter_edge_chunks(SPEC, 0))


def test_labels(graph):
    community, *_, y = graph
    np.testing.assert_array_equal(y, community)
    noisy_spec = dataclasses.replace(SPEC, label_noise=0.3)
    noisy = synth.labels(noisy_spec, community)
    assert noisy.min() >= 0 and noisy.max() < SPEC.num_classes
    changed = np.mean(noisy != community)
    assert abs(changed - 0.3 * (1 - 1 / SPEC.num_classes)) < 0.03
    np.testing.assert_array_equal(noisy, synth.labels(noisy_spec, community))


def test_features_chunk_invariant_and_reproducible(graph):
    *_, y = graph
    whole = synth.features(SPEC, y)
    assert whole.dtype == np.float32 and whole.shape == (SPEC.num_nodes, SPEC.num_features)
    pieces = np.zeros_like(whole)
    for lo, hi in [(0, 1_234), (1_234, 1_235), (1_235, SPEC.num_nodes)]:
        out = synth.fill_features(SPEC, y, lo, pieces[lo:hi])
        assert out is not None
    np.testing.assert_array_equal(whole, pieces)
    np.testing.assert_array_equal(whole, synth.features(SPEC, y))
    other = synth.features(dataclasses.replace(SPEC, seed=4), y)
    assert not np.allclose(whole, other)
    # Per-class mean is the centroid; spread is feature_noise.
    mu = synth.class_centroids(SPEC)
    assert mu.dtype == np.float32 and mu.shape == (SPEC.num_classes, SPEC.num_features)
    np.testing.assert_allclose(np.linalg.norm(mu, axis=1), 1.0, rtol=1e-5)
    for c in range(SPEC.num_classes):
        rows = whole[y == c]
        tolerance = 5 * SPEC.feature_noise / np.sqrt(len(rows))
        np.testing.assert_allclose(rows.mean(0), mu[c], atol=tolerance)
    assert (whole - mu[y]).std() == pytest.approx(SPEC.feature_noise, rel=0.02)


def test_features_into_memmap(tmp_path, graph):
    *_, y = graph
    path = tmp_path / "x.f32"
    mm = np.memmap(path, dtype=np.float32, mode="w+", shape=(SPEC.num_nodes, SPEC.num_features))
    for lo in range(0, SPEC.num_nodes, 2_500):
        synth.fill_features(SPEC, y, lo, mm[lo : lo + 2_500])
    mm.flush()
    back = np.fromfile(path, dtype=np.float32).reshape(SPEC.num_nodes, SPEC.num_features)
    np.testing.assert_array_equal(back, synth.features(SPEC, y))


@pytest.mark.parametrize("num_features", [16, 7, 1])
def test_features_match_numpy_reference(num_features, graph):
    *_, y = graph
    spec = dataclasses.replace(SPEC, num_features=num_features, seed=2**64 - 5)
    rows = np.array([0, 1, 17, 4_321, SPEC.num_nodes - 1])
    out = np.empty((SPEC.num_nodes, num_features), dtype=np.float32)
    synth.fill_features(spec, y, 0, out)
    ref = synth_feature_rows_reference(
        synth.class_centroids(spec), y, rows, spec.seed, spec.feature_noise
    )
    np.testing.assert_allclose(out[rows], ref, rtol=1e-6, atol=1e-6)


def test_fill_features_rejects_bad_output(graph):
    *_, y = graph
    F = SPEC.num_features
    with pytest.raises(ValueError, match="float32"):
        synth.fill_features(SPEC, y, 0, np.zeros((4, F), dtype=np.float64))
    with pytest.raises(ValueError, match="columns"):
        synth.fill_features(SPEC, y, 0, np.zeros((4, F + 1), dtype=np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        synth.fill_features(SPEC, y, 0, np.zeros((F, 4), dtype=np.float32).T)
    with pytest.raises(IndexError, match="outside"):
        synth.fill_features(SPEC, y, SPEC.num_nodes - 2, np.zeros((4, F), dtype=np.float32))
    bad = y.copy()
    bad[3] = SPEC.num_classes
    with pytest.raises(IndexError, match="labels\\[3\\]"):
        synth.fill_features(SPEC, bad, 0, np.zeros((4, F), dtype=np.float32))
    with pytest.raises(ValueError, match="labels must have shape"):
        synth.fill_features(SPEC, y[:-1], 0, np.zeros((4, F), dtype=np.float32))


def test_split(graph):
    *_, y = graph
    train, val, test = synth.split(SPEC, y)
    for part in (train, val, test):
        assert part.dtype == np.int64 and np.all(np.diff(part) > 0)
    both = np.concatenate([train, val, test])
    assert len(both) == SPEC.num_nodes and len(np.unique(both)) == SPEC.num_nodes
    sizes = np.bincount(y, minlength=SPEC.num_classes)
    for part, fraction in ((train, SPEC.train_fraction), (val, SPEC.val_fraction)):
        per_class = np.bincount(y[part], minlength=SPEC.num_classes)
        assert np.all(np.abs(per_class - fraction * sizes) <= 1)
    again = synth.split(SPEC, y)
    for a, b in zip((train, val, test), again):
        np.testing.assert_array_equal(a, b)
    other = synth.split(dataclasses.replace(SPEC, seed=4), y)
    assert not np.array_equal(train, other[0])
    spec = dataclasses.replace(SPEC, train_fraction=0.6, val_fraction=0.4)
    train, val, test = synth.split(spec, y)
    assert len(test) <= SPEC.num_classes and len(train) + len(val) + len(test) == SPEC.num_nodes
