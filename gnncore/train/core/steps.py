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

from gnncore.train.core.batches import BatchSource
from gnncore.train.core.config import ConfigError
from gnncore.train.core.throughput import EpochTimer

#: ``step(batch, timer, total_loss) -> count``: one batch forward, backward and
#: optimiser step; adds the batch's summed loss to ``total_loss`` (on the
#: device) and returns what it counts (seed nodes, positive triples).
BatchStep = Callable[[Any, EpochTimer, torch.Tensor], int]


def normalize_rows(x: torch.Tensor) -> torch.Tensor:
    """Each row divided by its sum (at least 1): what ``normalize_features`` does to
    the features before the model, in training, evaluation and predictions."""
    return x / x.sum(dim=-1, keepdim=True).clamp(min=1.0)


def autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    """``torch.autocast`` for ``dtype`` on ``device``; a no-op when ``dtype`` is ``None``."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def amp_settings(config: Any, device: torch.device) -> tuple[torch.dtype | None, Any | None]:
    """``(autocast dtype, GradScaler)`` of ``config.amp`` (``"none"``, ``"bf16"``,
    ``"fp16"``); both ``None`` when mixed precision is off or the device is not
    CUDA (with a warning)."""
    if config.amp == "none":
        return None, None
    if device.type != "cuda":
        warnings.warn(
            f"amp={config.amp!r} needs a CUDA device; training on {device} in float32",
            RuntimeWarning,
            stacklevel=3,
        )
        return None, None
    if config.amp == "bf16":
        if not torch.cuda.is_bf16_supported():
            raise ConfigError(
                f"amp='bf16': {torch.cuda.get_device_name(device)} has no "
                "bfloat16 support; use amp='fp16'"
            )
        return torch.bfloat16, None
    return torch.float16, torch.amp.GradScaler("cuda")


def clip_gradients(parameters: list[torch.nn.Parameter], max_norm: float) -> torch.Tensor:
    """Scale every gradient so that their joint L2 norm is at most ``max_norm``
    (``torch.nn.utils.clip_grad_norm_``'s rule, also for the sparse gradients of
    an ``nn.Embedding(sparse=True)``); returns the norm before clipping."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.zeros(())
    norms = [
        torch.linalg.vector_norm((g.coalesce().values() if g.is_sparse else g).float())
        for g in grads
    ]
    total = torch.linalg.vector_norm(torch.stack([n.to(norms[0].device) for n in norms]))
    coefficient = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        if g.is_sparse:
            g.mul_(coefficient.to(g.device).item())  # sparse tensors take a number
        else:
            g.mul_(coefficient.to(g.device, g.dtype))
    return total


class OptimizerStep:
    """Backward pass and optimiser step of every task: through the fp16 ``scaler``
    when there is one, clipping the gradient norm to ``max_grad_norm`` when it is
    positive (after unscaling, so the bound applies to the true gradients)."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        scaler: Any | None = None,
        max_grad_norm: float = 0.0,
    ) -> None:
        self.optimizer = optimizer
        self.scaler = scaler
        self.max_grad_norm = float(max_grad_norm)

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def __call__(self, loss: torch.Tensor) -> None:
        """``loss.backward()``, then clip and step."""
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            if self.max_grad_norm > 0:
                self.scaler.unscale_(self.optimizer)
                self._clip()
            self.scaler.step(self.optimizer)
            self.scaler.update()
            return
        loss.backward()
        if self.max_grad_norm > 0:
            self._clip()
        self.optimizer.step()

    def _clip(self) -> None:
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        clip_gradients(params, self.max_grad_norm)


def train_epoch(
    model: torch.nn.Module,
    source: BatchSource,
    device: torch.device,
    step: BatchStep,
    on_batch: Callable[[], Any],
) -> tuple[float, dict[str, float]]:
    """One pass over ``source.batches()``: the mean loss per counted item, and the
    epoch's throughput figures (:meth:`EpochTimer.summary`); ``on_batch()`` after
    each batch. The loss is summed on the device: one host sync per epoch."""
    model.train()
    total_loss = torch.zeros((), device=device)
    total = 0
    timer = EpochTimer(device)
    with source.batches() as batches:
        while (batch := timer.next_batch(batches)) is not None:
            total += step(batch, timer, total_loss)
            on_batch()
    return float(total_loss) / max(total, 1), timer.summary()


__all__ = [
    "BatchStep",
    "OptimizerStep",
    "amp_settings",
    "autocast",
    "clip_gradients",
    "train_epoch",
]
