"""The samplers' choice names, without importing torch or PyG: configs and the
Dagster code location validate against them before any sampler loads."""

from __future__ import annotations

from typing import Literal, get_args

#: How the neighbourhood of a batch is drawn (:func:`gnncore.sampler.build_sampler`).
SamplerMode = Literal["dense", "per-layer"]
#: Every :data:`SamplerMode`.
SAMPLER_MODES: tuple[str, ...] = get_args(SamplerMode)

#: How link prediction draws its negative edges (:class:`gnncore.sampler.NegativeDraw`).
NegativeMode = Literal["uniform", "degree"]
#: Every :data:`NegativeMode`.
NEGATIVE_MODES: tuple[str, ...] = get_args(NegativeMode)
