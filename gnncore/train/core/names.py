"""The model and decoder names configs choose from, without importing torch or
PyG (the builders live in :mod:`gnncore.train.core.models` and
:mod:`gnncore.train.link.models`)."""

from __future__ import annotations

from typing import Literal, get_args

#: An architecture name (``"none"``: an MLP that ignores the edges).
ModelName = Literal["sage", "gcn", "gat", "gin", "none"]
#: Every :data:`ModelName`; :data:`gnncore.train.core.models.MODELS` has a builder for each.
MODEL_NAMES: tuple[str, ...] = get_args(ModelName)

#: How link prediction scores an edge from its two end embeddings.
DecoderName = Literal["distmult", "dot"]
#: Every :data:`DecoderName`.
DECODERS: tuple[str, ...] = get_args(DecoderName)
