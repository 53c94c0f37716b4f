"""Graph samplers: PyG ``BaseSampler`` subclasses over gnncore's C++ kernels, and
negative sampling / known-edge filtering for link prediction."""

from gnncore.sampler.negative import NEGATIVE_MODES, KnownEdges, NegativeDraw, degree_weights
from gnncore.sampler.neighbor import NeighborSampler

__all__ = ["NEGATIVE_MODES", "KnownEdges", "NegativeDraw", "NeighborSampler", "degree_weights"]

from gnncore.sampler.dense import DenseSampler  # noqa: E402
from gnncore.sampler.factory import SAMPLER_MODES, build_sampler  # noqa: E402
from gnncore.sampler.per_layer import PerLayerSampler  # noqa: E402

__all__ += ["DenseSampler", "PerLayerSampler", "SAMPLER_MODES", "build_sampler"]

from gnncore.sampler.biased import (  # noqa: E402
    BiasedDenseSampler,
    LocalityAwareSampler,
    PrunedSampler,
    ScaleController,
    boost_path_counts,
    boost_sets,
    edge_weight_of,
)

__all__ += [
    "BiasedDenseSampler",
    "LocalityAwareSampler",
    "PrunedSampler",
    "ScaleController",
    "boost_path_counts",
    "boost_sets",
    "edge_weight_of",
]
