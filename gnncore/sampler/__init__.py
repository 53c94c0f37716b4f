"""Graph samplers: PyG ``BaseSampler`` subclasses over gnncore's C++ kernels."""

from gnncore.sampler.neighbor import NeighborSampler

__all__ = ["NeighborSampler"]
