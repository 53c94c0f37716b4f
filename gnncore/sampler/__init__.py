"""Graph samplers: PyG ``BaseSampler`` subclasses over gnncore's C++ kernels, and
negative sampling / known-edge filtering for link prediction.

The choice names (:mod:`gnncore.sampler.names`) load eagerly; the samplers import
torch and PyG and load on first use (:mod:`gnncore.lazy`).
"""

from typing import TYPE_CHECKING

from gnncore.lazy import lazy_attributes
from gnncore.sampler.names import NEGATIVE_MODES, SAMPLER_MODES

if TYPE_CHECKING:  # what the lazy names below are, for type checkers
    from gnncore.sampler.biased import (
        BiasedDenseSampler,
        LocalityAwareSampler,
        PrunedSampler,
        ScaleController,
        boost_path_counts,
        boost_sets,
        edge_weight_of,
    )
    from gnncore.sampler.dense import DenseSampler
    from gnncore.sampler.factory import build_sampler
    from gnncore.sampler.negative import KnownEdges, NegativeDraw, degree_weights
    from gnncore.sampler.neighbor import NeighborSampler
    from gnncore.sampler.per_layer import PerLayerSampler

__getattr__ = lazy_attributes(
    __name__,
    {
        "KnownEdges": "gnncore.sampler.negative",
        "NegativeDraw": "gnncore.sampler.negative",
        "degree_weights": "gnncore.sampler.negative",
        "NeighborSampler": "gnncore.sampler.neighbor",
        "DenseSampler": "gnncore.sampler.dense",
        "build_sampler": "gnncore.sampler.factory",
        "PerLayerSampler": "gnncore.sampler.per_layer",
        "BiasedDenseSampler": "gnncore.sampler.biased",
        "LocalityAwareSampler": "gnncore.sampler.biased",
        "PrunedSampler": "gnncore.sampler.biased",
        "ScaleController": "gnncore.sampler.biased",
        "boost_path_counts": "gnncore.sampler.biased",
        "boost_sets": "gnncore.sampler.biased",
        "edge_weight_of": "gnncore.sampler.biased",
    },
)

__all__ = [
    "NEGATIVE_MODES",
    "SAMPLER_MODES",
    "BiasedDenseSampler",
    "DenseSampler",
    "KnownEdges",
    "LocalityAwareSampler",
    "NegativeDraw",
    "NeighborSampler",
    "PerLayerSampler",
    "PrunedSampler",
    "ScaleController",
    "boost_path_counts",
    "boost_sets",
    "build_sampler",
    "degree_weights",
    "edge_weight_of",
]
