"""Graph samplers: PyG ``BaseSampler`` subclasses over gnncore's C++ kernels."""

from gnncore.sampler.neighbor import NeighborSampler

__all__ = ["NeighborSampler"]

from gnncore.sampler.dense import DenseSampler  # noqa: E402

__all__ += ["DenseSampler"]
