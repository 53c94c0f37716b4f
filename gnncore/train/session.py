"""Checkpoint bookkeeping shared by the training loops: resume at the start, save per epoch."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from gnncore.train.checkpoint import (
    FORMAT,
    VERSION,
    CheckpointDir,
    capture_rng,
    check_resumable,
    restore_rng,
)

P = TypeVar("P", bound="EpochProgress")


@dataclass
class TrainingSession:
    r"""What a training call checkpoints, and where.

    Args:
        checkpoints: A :class:`CheckpointDir`, a path (newest 2 kept), or
            ``None`` for no checkpoints.
        config: The run's configuration (``to_dict`` / ``mismatches``).
        fingerprint: :func:`~gnncore.train.checkpoint.data_fingerprint` of the data.
        model, optimizer, scaler: Trained objects (``scaler`` may be ``None``).
        generator: The loader's shuffling generator.
        samplers: Name -> sampler whose batch counters are checkpointed.
        device: The training device (CUDA RNG states are saved on CUDA).
        run_id: The tracked run, recorded in every checkpoint.
    """

    checkpoints: CheckpointDir | str | os.PathLike[str] | None
    config: Any
    fingerprint: dict[str, Any]
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scaler: Any | None
    generator: torch.Generator
    samplers: dict[str, Any]
    device: torch.device
    run_id: str | None = None
    resumed_from: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.checkpoints is not None and not isinstance(self.checkpoints, CheckpointDir):
            self.checkpoints = CheckpointDir(self.checkpoints)

    @property
    def directory(self) -> str | None:
        return None if self.checkpoints is None else str(self.checkpoints.directory)

    def start(self, resume: bool) -> dict[str, Any] | None:
        """Fresh run: remove old checkpoints and return ``None``. With ``resume``
        and a checkpoint: load it into the objects (after checking it was written
        by this configuration and data) and return its ``progress`` dict."""
        store = self.checkpoints
        if store is None:
            return None
        found = store.latest() if resume else None
        if found is None:
            store.clear()
            return None
        check_resumable(found, self.config, self.fingerprint)
        saved = found.state
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        if self.scaler is not None and saved.get("scaler") is not None:
            self.scaler.load_state_dict(saved["scaler"])
        restore_rng(saved["rng"], self.generator, self.samplers)
        store.remove_temporaries()
        self.resumed_from = found.epoch
        return dict(saved["progress"])

    def resume_progress(self, resume: bool, progress_type: type[P],
                        logger: Any | None = None) -> P:
        """:meth:`start`, as a ``progress_type`` (fresh when nothing was resumed);
        ``logger`` gets the resumed epochs' metrics again, so a resumed run's
        history is whole."""
        restored = self.start(resume)
        state = progress_type() if restored is None else progress_type.from_dict(restored)
        if logger is not None:
            for epoch in range(1, self.resumed_from + 1):
                logger.log_metrics(state.epoch_metrics(epoch), step=epoch)
        return state

    def end_epoch(self, epoch: int, state: EpochProgress, logger: Any | None = None,
                  on_epoch_end: Callable[[int, Path | None], None] | None = None) -> None:
        """Log the epoch's metrics, write its checkpoint, then call ``on_epoch_end``."""
        if logger is not None:
            logger.log_metrics(state.epoch_metrics(epoch), step=epoch)
        path = self.save(epoch, state.to_dict())
        if on_epoch_end is not None:
            on_epoch_end(epoch, path)

    def save(self, epoch: int, progress: dict[str, Any]) -> Path | None:
        """Write the checkpoint of ``epoch`` (``None`` without a checkpoint directory)."""
        if self.checkpoints is None:
            return None
        return self.checkpoints.save(epoch, {
            "format": FORMAT, "version": VERSION, "epoch": epoch,
            "config": self.config.to_dict(), "data": self.fingerprint, "run_id": self.run_id,
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "progress": progress,
            "rng": capture_rng(self.generator, self.samplers, cuda=self.device.type == "cuda"),
        })


@dataclass
class EpochProgress:
    """The resumable state of a run besides model, optimiser and RNG: the
    per-epoch history, the best epoch (and its weights, on the CPU) and the
    early-stopping count. Loops subclass it with their metric series."""

    epoch: int = 0
    train_loss: list[float] = field(default_factory=list)
    throughput: list[dict[str, float]] = field(default_factory=list)
    best_epoch: int = 0
    best_state: dict[str, torch.Tensor] | None = None
    bad_epochs: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Every field, for the checkpoint's ``progress`` entry."""
        return {key: getattr(self, key) for key in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> EpochProgress:
        return cls(**{key: values[key] for key in cls.__dataclass_fields__})

    def advance(self, epoch: int, loss: float, throughput: dict[str, float], improved: bool,
                model: torch.nn.Module) -> None:
        """Record the epoch; keep the model's weights when it ``improved``."""
        self.epoch = epoch
        self.train_loss.append(loss)
        self.throughput.append(throughput)
        if improved:
            self.best_epoch = epoch
            self.best_state = {k: v.detach().to("cpu", copy=True)
                               for k, v in model.state_dict().items()}
            self.bad_epochs = 0
        else:
            self.bad_epochs += 1

    def should_stop(self, patience: int) -> bool:
        """Early stopping: ``patience`` epochs in a row without improvement."""
        return patience > 0 and self.bad_epochs >= patience

    def epoch_metrics(self, epoch: int) -> dict[str, float]:
        """What a run logger receives for ``epoch`` (1-based)."""
        raise NotImplementedError
