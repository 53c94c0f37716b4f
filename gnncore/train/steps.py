"""What one training epoch does, whatever the task: mixed precision, the
optimiser step, and the pass over a (prefetched) loader with its timers.

The node and link loops differ only in how one batch becomes a loss; they pass
that as ``step(batch, timer, total_loss) -> count`` to :func:`train_epoch`.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from typing import Any

import torch

from gnncore.train.config_base import ConfigError
from gnncore.train.prefetch import Prefetcher
from gnncore.train.throughput import EpochTimer

#: ``step(batch, timer, total_loss) -> count``: one batch forward, backward and
#: optimiser step; adds the batch's summed loss to ``total_loss`` (on the
#: device) and returns what it counts (seed nodes, positive triples).
BatchStep = Callable[[Any, EpochTimer, torch.Tensor], int]


def autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    """``torch.autocast`` for ``dtype`` on ``device``; a no-op when ``dtype`` is ``None``."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def amp_settings(config: Any, device: torch.device) -> tuple[torch.dtype | None, Any | None]:
    """``(autocast dtype, GradScaler)`` of ``config.amp`` (``"off"``, ``"bf16"``,
    ``"fp16"``); both ``None`` when mixed precision is off or the device is not
    CUDA (with a warning)."""
    if config.amp == "off":
        return None, None
    if device.type != "cuda":
        warnings.warn(f"amp={config.amp!r} needs a CUDA device; training on {device} in "
                      "float32", RuntimeWarning, stacklevel=3)
        return None, None
    if config.amp == "bf16":
        if not torch.cuda.is_bf16_supported():
            raise ConfigError(f"amp='bf16': {torch.cuda.get_device_name(device)} has no "
                              "bfloat16 support; use amp='fp16'")
        return torch.bfloat16, None
    return torch.float16, torch.amp.GradScaler("cuda")


def backward_and_step(loss: torch.Tensor, optimizer: torch.optim.Optimizer,
                      scaler: Any | None) -> None:
    """Backward pass and optimiser step, through the fp16 ``scaler`` when there is one."""
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()


def train_epoch(model: torch.nn.Module, loader: Prefetcher, device: torch.device,
                step: BatchStep, on_batch: Callable[[], Any]) -> tuple[float, dict[str, float]]:
    """One pass over ``loader``: the mean loss per counted item, and the epoch's
    throughput figures (:meth:`EpochTimer.summary`); ``on_batch()`` after each batch.
    The loss is summed on the device: one host sync per epoch."""
    model.train()
    total_loss = torch.zeros((), device=device)
    total = 0
    timer = EpochTimer(device)
    with iter(loader) as batches:
        while (batch := timer.next_batch(batches)) is not None:
            total += step(batch, timer, total_loss)
            on_batch()
    return float(total_loss) / max(total, 1), timer.summary()


__all__ = ["BatchStep", "amp_settings", "autocast", "backward_and_step", "train_epoch"]
