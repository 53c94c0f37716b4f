"""Choosing the torch device from a config string."""

from __future__ import annotations

import torch

from gnncore.errors import ConfigError
from gnncore.train.core.config import parse_device


def resolve_device(spec: str = "auto") -> torch.device:
    """The :class:`torch.device` for ``spec``.

    ``"auto"`` picks the current CUDA device when one is available, else the
    CPU. Asking for CUDA on a machine without it, or for a GPU index that does
    not exist, raises :class:`~gnncore.train.node.config.ConfigError`.
    """
    kind, index = parse_device(spec)
    if kind == "auto":
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    if kind == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ConfigError(f"device={spec!r}: CUDA is not available on this machine")
    if index is not None and index >= torch.cuda.device_count():
        raise ConfigError(
            f"device={spec!r}: only {torch.cuda.device_count()} CUDA device(s) present"
        )
    return torch.device("cuda", index) if index is not None else torch.device("cuda")
