"""Comparing what a training run leaves behind: nested states of tensors."""

from __future__ import annotations

from typing import Any

import torch


def assert_same_state(a: Any, b: Any, where: str = "") -> None:
    """Equal structure (dict keys, sequence lengths), ``torch.equal`` tensors and
    equal plain values, all the way down; ``where`` names the place that differs
    (``model/conv.weight``, ``rng[2]``)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            assert_same_state(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_state(x, y, f"{where}[{i}]")
    else:
        assert a == b, where
