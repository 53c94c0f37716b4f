"""Degree-corrected planted-partition graphs: gnncore's built-in data set.

The model
---------
A :class:`SynthSpec` fixes everything; the same spec always gives the same
graph, features and splits, whatever the chunk sizes or thread counts.

Nodes and communities
    The ``num_nodes`` nodes are shuffled and dealt round-robin into
    ``num_classes * communities_per_class`` communities, so community sizes
    differ by at most one. Community ``k`` belongs to class
    ``k % num_classes``: with ``communities_per_class > 1`` a class is several
    communities, each one tight, the way real graphs are local at a finer
    grain than their labels (what min-edge-cut partitions and out-of-core
    methods that train partition by partition rely on).
    Each node ``v`` gets a propensity ``theta[v]``: a Pareto draw with density
    ``~ theta ** -power_law_exponent`` on ``[1, inf)``, capped at
    ``sqrt(num_nodes / avg_degree)`` times its mean and rescaled to mean 1.
    ``avg_degree * theta[v]`` is about the expected degree of ``v``, so degrees
    are heavy-tailed, with the largest expected degree near the structural
    cut-off ``sqrt(num_nodes * avg_degree)``.

Edges
    There are ``M = round(num_nodes * avg_degree / 2)`` undirected edges,
    stored once each as a ``(src, dst)`` pair. Edge ``e`` picks ``src`` with
    probability proportional to ``theta``. With probability ``intra_fraction``
    it picks ``dst`` proportionally to ``theta`` inside the community of
    ``src``; otherwise it picks one of the other communities in proportion to
    its total ``theta`` and then ``dst`` inside it. So ``intra_fraction`` is
    exactly the expected fraction of intra-community edges. A ``dst`` equal to
    ``src`` is redrawn up to three times, leaving very few self-loops; repeated
    pairs are kept (the ingestion step drops and counts both). Edge ``e``
    depends only on ``(seed, e)``; the C++ core draws it from splitmix64
    counters, in parallel, chunk by chunk (:func:`iter_edge_chunks`).

Labels
    The class of a node is its community's class. With ``label_noise > 0`` that
    fraction of the nodes gets a class drawn uniformly at random instead.

Features
    Class ``c`` has a centroid ``mu_c``: a standard normal vector in
    ``num_features`` dimensions scaled to unit length. Node ``v`` has
    ``x_v = mu_{label(v)} + feature_noise * z_v`` with ``z_v`` standard normal
    (Box-Muller over splitmix64 counters keyed by ``(seed, v)``), so each row
    can be written on its own, chunk by chunk, into a memory map
    (:func:`fill_features`). The default noise leaves the classes overlapping:
    features alone give a mediocre classifier, and averaging over
    neighbours, most of them in the same community, sharpens the signal. That
    is, the graph matters.

Splits
    Train, validation and test sets are stratified by class: inside each class,
    a seeded shuffle puts the first ``round(train_fraction * n_c)`` nodes in
    train, the next ``round(val_fraction * n_c)`` in validation and the rest in
    test.

With the defaults, on ``num_nodes=20_000, avg_degree=10, num_classes=8,
num_features=64`` (seeds 0, 1, 2), a 2-layer full-batch GraphSAGE (hidden 64,
Adam, 200 epochs, best validation epoch) reaches 0.94-0.95 test accuracy while
the same-sized MLP on the features alone reaches 0.55-0.57.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from gnncore import _C
from gnncore.synth.heavy_tail import HEAVY_TAILED_MODELS, iter_heavy_tailed_edges, random_labels

# Tags that separate the NumPy random streams drawn from one seed.
_TAG_COMMUNITY = 1
_TAG_THETA = 2
_TAG_CENTROIDS = 3
_TAG_LABELS = 4
_TAG_SPLIT = 5


@dataclass(frozen=True)
class SynthSpec:
    """Parameters of a degree-corrected planted-partition graph.

    Args:
        num_nodes (int): Number of nodes, in ``[num_classes, 2**31)``.
        avg_degree (float): Mean undirected degree; the graph has
            ``round(num_nodes * avg_degree / 2)`` edges.
        num_classes (int): Number of classes (at least 2).
        num_features (int): Feature dimension (at least 1).
        seed (int): Seed of every random choice, in ``[0, 2**64)``.
        power_law_exponent (float): Exponent of the propensity (and so degree)
            distribution, above 2.
        intra_fraction (float): Expected fraction of edges inside a community,
            in ``[0, 1]``.
        feature_noise (float): Standard deviation of the per-dimension feature
            noise around the unit-length class centroids.
        label_noise (float): Fraction of nodes whose class is redrawn uniformly
            at random, in ``[0, 1]``.
        train_fraction (float): Fraction of each class in the training set.
        val_fraction (float): Fraction of each class in the validation set;
            the rest is the test set.
        communities_per_class (int): Communities of each class (at least 1);
            ``num_classes * communities_per_class`` must not exceed
            ``num_nodes``.
        model (str): ``"planted"`` (this module), or one of the heavy-tailed
            models without communities of :mod:`gnncore.synth.heavy_tail`:
            ``"powerlaw"`` (Chung-Lu, degree exponent ``power_law_exponent``)
            or ``"bipartite"`` (two node types, Zipf degrees on both sides).
            Those ignore ``intra_fraction``, ``label_noise`` and
            ``communities_per_class`` and draw uniform random labels.
        right_exponent (float | None): ``"bipartite"``: the degree exponent of
            the right side (above 2); None: ``power_law_exponent``.
        left_fraction (float): ``"bipartite"``: the share of the nodes on the
            left side, in ``(0, 1)``.

    Raises:
        ValueError: On construction (see :meth:`validate`).
    """

    num_nodes: int
    avg_degree: float
    num_classes: int
    num_features: int
    seed: int = 0
    power_law_exponent: float = 2.5
    intra_fraction: float = 0.8
    feature_noise: float = 0.6
    label_noise: float = 0.0
    train_fraction: float = 0.1
    val_fraction: float = 0.1
    communities_per_class: int = 1
    model: str = "planted"
    right_exponent: float | None = None
    left_fraction: float = 0.5

    def __post_init__(self) -> None:
        self.validate()

    @property
    def num_communities(self) -> int:
        """``num_classes * communities_per_class``."""
        return self.num_classes * self.communities_per_class

    @property
    def num_edges(self) -> int:
        """Number of undirected edges ``round(num_nodes * avg_degree / 2)``."""
        return int(round(self.num_nodes * self.avg_degree / 2))

    def validate(self) -> None:
        """Raise ValueError naming the first field with a bad value."""

        def integer(name: str, low: int, high: int | None = None) -> None:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise ValueError(f"SynthSpec.{name} must be an integer, got {value!r}")
            number = int(value)  # exact for an Integral; typeshed's Integral lacks >=
            if number < low or (high is not None and number >= high):
                bound = f"[{low}, {high})" if high is not None else f">= {low}"
                raise ValueError(f"SynthSpec.{name} must be {bound}, got {value}")

        def real(name: str, low: float, high: float, low_open: bool, high_open: bool) -> None:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ValueError(f"SynthSpec.{name} must be a number, got {value!r}")
            value = float(value)
            too_low = value <= low if low_open else value < low
            too_high = value >= high if high_open else value > high
            if math.isnan(value) or too_low or too_high:
                interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
                raise ValueError(f"SynthSpec.{name} must lie in {interval}, got {value}")

        integer("num_classes", 2)
        integer("communities_per_class", 1)
        integer("num_nodes", self.num_communities, 2**31)
        real("avg_degree", 0.0, math.inf, True, True)
        integer("num_features", 1)
        integer("seed", 0, 2**64)
        real("power_law_exponent", 2.0, math.inf, True, True)
        real("intra_fraction", 0.0, 1.0, False, False)
        real("feature_noise", 0.0, math.inf, False, True)
        real("label_noise", 0.0, 1.0, False, False)
        real("train_fraction", 0.0, 1.0, True, False)
        real("val_fraction", 0.0, 1.0, False, False)
        if self.model not in MODELS:
            raise ValueError(f"SynthSpec.model must be one of {MODELS}, got {self.model!r}")
        if self.right_exponent is not None:
            real("right_exponent", 2.0, math.inf, True, True)
        real("left_fraction", 0.0, 1.0, True, True)
        if self.model == "bipartite" and self.num_nodes < 2:
            raise ValueError("SynthSpec.num_nodes must be at least 2 for a bipartite graph")
        if self.train_fraction + self.val_fraction > 1.0 + 1e-12:
            raise ValueError(
                "SynthSpec.train_fraction + val_fraction must be at most 1, got "
                f"{self.train_fraction} + {self.val_fraction}"
            )


MODELS = ("planted", *HEAVY_TAILED_MODELS)
"""The generator models (``SynthSpec.model``); ``planted`` is the default."""


def _rng(spec: SynthSpec, tag: int) -> np.random.Generator:
    return np.random.default_rng([spec.seed, tag])


_NODE_CHUNK = 1 << 22
"""Nodes dealt to communities at a time by :func:`node_table`."""


def node_table(spec: SynthSpec) -> tuple[np.ndarray, np.ndarray]:
    """Community and propensity of every node.

    Returns:
        ``(community int64[N], theta float64[N])``: communities of sizes
        differing by at most one, dealt to shuffled nodes; ``theta`` capped
        Pareto with mean 1.
    """
    n, c = spec.num_nodes, spec.num_communities
    # 16 bytes a node at the peak: the permutation and the table (the
    # community of positions [start, stop) dealt in chunks, no full temporaries)
    community = np.empty(n, dtype=np.int64)
    order = _rng(spec, _TAG_COMMUNITY).permutation(n)
    for start in range(0, n, _NODE_CHUNK):
        stop = min(start + _NODE_CHUNK, n)
        community[order[start:stop]] = np.arange(start, stop, dtype=np.int64) % c
    del order
    shape = spec.power_law_exponent - 1.0  # density ~ theta ** -(shape + 1)
    theta = _rng(spec, _TAG_THETA).random(n)  # uniform, then in place:
    np.subtract(1.0, theta, out=theta)
    theta **= -1.0 / shape  # Pareto on [1, inf)
    cap = shape / (shape - 1.0) * math.sqrt(n / spec.avg_degree)
    np.minimum(theta, max(cap, 1.0), out=theta)
    theta /= theta.mean()
    return community, theta


def iter_edge_chunks(
    spec: SynthSpec, chunk_edges: int = 4_000_000
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield the ``spec.num_edges`` edges as ``(src int64, dst int64)`` chunks.

    Each chunk holds ``chunk_edges`` edges (the last one fewer) and is made in
    C++ on all cores with the GIL released. Edge ``e`` depends only on
    ``(spec.seed, e)``, so the concatenated stream is the same for every
    ``chunk_edges``. Self-loops are rare and repeated pairs possible.
    """
    if isinstance(chunk_edges, bool) or not isinstance(chunk_edges, numbers.Integral):
        raise ValueError(f"chunk_edges must be an integer, got {chunk_edges!r}")
    if chunk_edges < 1:
        raise ValueError(f"chunk_edges must be positive, got {chunk_edges}")
    if spec.model != "planted":
        right = spec.right_exponent
        yield from iter_heavy_tailed_edges(
            spec.model,
            spec.num_nodes,
            spec.num_edges,
            spec.seed,
            spec.power_law_exponent,
            spec.power_law_exponent if right is None else right,
            spec.left_fraction,
            int(chunk_edges),
        )
        return
    community, theta = node_table(spec)
    generator = _C.PlantedPartition(
        community, theta, spec.num_communities, float(spec.intra_fraction), spec.seed
    )
    del community, theta
    total = spec.num_edges
    for first in range(0, total, int(chunk_edges)):
        yield generator.generate(first, min(int(chunk_edges), total - first))


def labels(spec: SynthSpec, community: np.ndarray) -> np.ndarray:
    """Class of every node: its community's class (``community % num_classes``),
    redrawn for a ``label_noise`` fraction.

    Returns:
        int64[N] in ``[0, num_classes)``.
    """
    community = np.asarray(community)
    if community.shape != (spec.num_nodes,):
        raise ValueError(f"community must have shape ({spec.num_nodes},), got {community.shape}")
    y = community.astype(np.int64) % spec.num_classes
    if spec.label_noise > 0:
        rng = _rng(spec, _TAG_LABELS)
        flip = rng.random(spec.num_nodes) < spec.label_noise
        y[flip] = rng.integers(0, spec.num_classes, size=int(flip.sum()))
    return y


def node_labels(spec: SynthSpec) -> np.ndarray:
    """Class of every node under ``spec.model``: :func:`labels` of the planted
    communities, or uniform random classes for the heavy-tailed models.

    Returns:
        int64[N] in ``[0, num_classes)``.
    """
    if spec.model != "planted":
        return random_labels(spec.num_nodes, spec.num_classes, spec.seed)
    return labels(spec, node_table(spec)[0])


def class_centroids(spec: SynthSpec) -> np.ndarray:
    """Unit-length class centroids, float32[num_classes, num_features]."""
    mu = _rng(spec, _TAG_CENTROIDS).standard_normal((spec.num_classes, spec.num_features))
    mu /= np.linalg.norm(mu, axis=1, keepdims=True)
    return mu.astype(np.float32)


def fill_features(
    spec: SynthSpec, labels: np.ndarray, start_row: int, out: np.ndarray
) -> np.ndarray:
    """Write the features of nodes ``start_row .. start_row + len(out)`` into ``out``.

    Args:
        spec: The graph.
        labels: int64[N], the class of every node (from :func:`labels`).
        start_row: First node written.
        out: float32[rows, num_features], C-contiguous and writable, e.g. a
            slice of a ``np.memmap``. Row ``i`` receives node ``start_row + i``.

    Returns:
        ``out``. A row's values do not depend on how the rows are chunked.
    """
    if not isinstance(out, np.ndarray) or out.dtype != np.float32 or out.ndim != 2:
        raise ValueError("out must be a float32 array of shape (rows, num_features)")
    if out.shape[1] != spec.num_features:
        raise ValueError(f"out has {out.shape[1]} columns, expected {spec.num_features}")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out must be C-contiguous and writable")
    labels = np.ascontiguousarray(labels, dtype=np.int64)
    if labels.shape != (spec.num_nodes,):
        raise ValueError(f"labels must have shape ({spec.num_nodes},), got {labels.shape}")
    _C.fill_features(
        class_centroids(spec),
        labels,
        int(start_row),
        spec.seed,
        float(spec.feature_noise),
        out,
    )
    return out


def features(spec: SynthSpec, labels: np.ndarray) -> np.ndarray:
    """The whole float32[N, num_features] feature matrix, in memory."""
    out = np.empty((spec.num_nodes, spec.num_features), dtype=np.float32)
    return fill_features(spec, labels, 0, out)


def split(spec: SynthSpec, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stratified train/validation/test node ids.

    Returns:
        ``(train_idx, val_idx, test_idx)``, sorted int64 arrays that are
        disjoint and cover every node.
    """
    labels = np.asarray(labels, dtype=np.int64)
    if labels.shape != (spec.num_nodes,):
        raise ValueError(f"labels must have shape ({spec.num_nodes},), got {labels.shape}")
    perm = _rng(spec, _TAG_SPLIT).permutation(spec.num_nodes)
    order = perm[np.argsort(labels[perm], kind="stable")]  # by class, shuffled within
    sizes = np.bincount(labels, minlength=spec.num_classes)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    y = labels[order]
    rank = np.arange(spec.num_nodes) - starts[y]  # position inside its class
    n_train = np.rint(sizes * spec.train_fraction).astype(np.int64)
    n_val = np.rint(sizes * spec.val_fraction).astype(np.int64)
    n_val = np.minimum(n_val, sizes - n_train)
    in_train = rank < n_train[y]
    in_val = ~in_train & (rank < n_train[y] + n_val[y])
    in_test = ~in_train & ~in_val
    return np.sort(order[in_train]), np.sort(order[in_val]), np.sort(order[in_test])
