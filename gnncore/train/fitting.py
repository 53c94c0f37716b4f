r"""One training loop for every task: :func:`fit` drives a :class:`Task`.

A task (node classification: :class:`~gnncore.train.node.task.NodeTask`; link
prediction: :class:`~gnncore.train.link.task.LinkTask`) holds its data and
builds what differs between tasks: the model and its optimiser, the samplers
and loaders of the training batches, the step that turns a batch into a loss,
the validation and test metrics, and the result. :func:`fit` does what every
task shares, in one order: seed, build, resume from a checkpoint, run the
epochs (:class:`~gnncore.train.core.session.TrainingSession`), restore the best
epoch and test it. It computes only; recording the run (MLflow parameters, the
curves, the model) is :mod:`gnncore.train.record`'s.
"""

from __future__ import annotations

import contextlib
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import torch

from gnncore.train.core.batches import BatchSource
from gnncore.train.core.checkpoint import CheckpointDir
from gnncore.train.core.config import ConfigError
from gnncore.train.core.device import resolve_device
from gnncore.train.core.session import EpochProgress, Outcome, Progress, TrainingSession
from gnncore.train.core.steps import BatchStep, OptimizerStep, amp_settings

R = TypeVar("R")
#: ``on_epoch_end(epoch, checkpoint_path)``: called after an epoch's metrics are
#: logged and its checkpoint (``None`` without a checkpoint directory) is written.
EpochCallback = Callable[[int, Path | None], None]


class MetricLogger(Protocol):
    """The part of :class:`gnncore.tracking.RunLogger` the loop uses."""

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None: ...


@dataclass(frozen=True)
class RunHooks:
    r"""Where a training call reports, and what it checkpoints.

    Args:
        logger (RunLogger, optional): Receives per epoch (``step=epoch``) the
            task's validation metrics, ``train_loss`` and the throughput figures
            (plus ``eval_s``); at the end the task's test metrics, ``best_epoch``,
            ``stopped_epoch``, ``resumed_from_epoch`` and ``seconds``. A resumed
            run first re-logs the epochs its checkpoint covers.
        progress (bool or callable): tqdm bars (``True``), nothing (``False``),
            or one line per epoch to ``progress(line)``.
        checkpoints (CheckpointDir or str or Path, optional): Where to write a
            checkpoint after every epoch (a path keeps the newest 2). A fresh
            run keeps the checkpoints already there until its own first
            checkpoint is written, then removes them.
        resume (bool): Continue from the newest readable checkpoint in
            ``checkpoints`` (a fresh start when there is none); raises
            :class:`~gnncore.train.core.checkpoint.CheckpointError` when it was
            written with other settings or data.
        on_epoch_end (callable, optional): ``f(epoch, checkpoint_path)`` after
            each epoch is logged and checkpointed.
    """

    logger: MetricLogger | None = None
    progress: Progress = True
    checkpoints: CheckpointDir | str | os.PathLike[str] | None = None
    resume: bool = False
    on_epoch_end: EpochCallback | None = None


@dataclass
class Built:
    """What a task builds before the epochs: the model and its optimiser, the
    training batches, the data fingerprint its checkpoints carry, and the
    evaluation samplers whose counters are checkpointed."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    source: BatchSource
    fingerprint: dict[str, Any]
    eval_samplers: dict[str, Any] = field(default_factory=dict)


@dataclass
class Measures:
    """How a task trains one batch (``step``) and measures the model on the
    validation and test data (``validate()``, ``test()`` -> its metrics)."""

    step: BatchStep
    validate: Callable[[], Any]
    test: Callable[[], Any]


class Task(ABC, Generic[R]):
    """One training task: its data, and what :func:`fit` asks of it.

    A task object is built for one call of :func:`fit`: :meth:`build` keeps
    what :meth:`measures` and :meth:`result` read.
    """

    #: The task's name in tracked runs' tags (``"node"``, ``"link"``).
    name: ClassVar[str]
    #: The per-epoch progress the task records and checkpoints.
    progress_type: ClassVar[type[EpochProgress]]
    #: The node features, read by :mod:`gnncore.train.record` for the model's
    #: input example.
    feature_store: Any

    def check(self, config: Any) -> None:  # noqa: B027 - optional hook
        """Refuse data the task cannot train on (before anything is built)."""

    @abstractmethod
    def build(self, config: Any, device: torch.device, source: BatchSource | None) -> Built:
        """The model, its optimiser, and the training batches: ``source``, or
        the task's own samplers and loaders when it is ``None``."""

    @abstractmethod
    def measures(
        self,
        config: Any,
        built: Built,
        optimize: OptimizerStep,
        device: torch.device,
        amp_dtype: torch.dtype | None,
    ) -> Measures:
        """The step and the metrics, built once the run has resumed (a source
        may wrap the model for the step, e.g. in DDP, only then)."""

    def epochs(self) -> contextlib.AbstractContextManager[Any]:
        """A context the epochs run in (default: none)."""
        return contextlib.nullcontext()

    def epoch_ended(self, state: Any, epoch: int) -> None:  # noqa: B027 - optional hook
        """Called after each epoch, before the caller's ``on_epoch_end``."""

    @abstractmethod
    def describe(self, loss: float, val: Any, state: Any) -> dict[str, str]:
        """The labels of an epoch's progress bar (or line)."""

    @abstractmethod
    def final_metrics(self, test: Any, state: Any) -> dict[str, float]:
        """What the logger receives at the end, besides the bookkeeping."""

    @abstractmethod
    def result(self, fields: dict[str, Any], state: Any, outcome: Outcome[Any]) -> R:
        """The task's result from the shared fields, the progress and the test."""


def fit(
    task: Task[R], config: Any, source: BatchSource | None = None, hooks: RunHooks | None = None
) -> R:
    r"""Train ``task`` as ``config`` says and return its result.

    Each epoch runs over the training batches (``source``, else the task's
    loaders), then measures the validation metric. Training ends after
    ``config.epochs`` epochs, or earlier once the validation metric has not
    improved for ``config.patience`` epochs; the weights of the best
    validation epoch are restored before the test metrics are measured.

    Pipelining: with ``config.prefetch_workers > 0`` batches are prepared in
    threads ahead of compute, with the same batches, and so the same
    parameters, as synchronous iteration. With ``hooks.checkpoints`` a
    checkpoint is written after every epoch, and with ``hooks.resume`` the run
    continues from the newest one; on a CPU, with ``num_workers=0``, a resumed
    run ends with exactly the parameters of an uninterrupted one.

    Args:
        task (Task): The task and its data.
        config: The task's configuration; validated here.
        source (BatchSource, optional): Where training batches come from
            (:mod:`gnncore.train.core.batches`), e.g. an out-of-core or
            distributed source; default the task's own loader. A source may
            also define ``wrap_model(module) -> module`` (the module the
            training step calls, e.g. in
            :class:`~torch.nn.parallel.DistributedDataParallel`; checkpoints,
            evaluation and the result keep the model) and ``reduce_sum(tensor)
            -> tensor`` (evaluation counts summed over the processes of a
            distributed run).
        hooks (RunHooks, optional): Logger, progress, checkpoints, resume and
            the per-epoch callback. (default: none of them, tqdm bars)
    """
    hooks = hooks or RunHooks()
    config.validate()
    task.check(config)
    if hooks.resume and hooks.checkpoints is None:
        raise ConfigError("resume=True needs a checkpoint directory (checkpoints=...)")
    started = time.perf_counter()
    device = resolve_device(config.device)
    amp_dtype, scaler = amp_settings(config, device)
    torch.manual_seed(config.seed)
    built = task.build(config, device, source)
    session = TrainingSession(
        hooks.checkpoints,
        config,
        built.fingerprint,
        built.model,
        built.optimizer,
        scaler,
        built.source,
        device,
        getattr(hooks.logger, "run_id", None),
        eval_samplers=built.eval_samplers,
    )
    state = session.resume_progress(hooks.resume, task.progress_type, hooks.logger)
    optimize = OptimizerStep(built.optimizer, scaler, config.max_grad_norm)
    measures = task.measures(config, built, optimize, device, amp_dtype)

    def epoch_ended(epoch: int, path: Path | None) -> None:
        task.epoch_ended(state, epoch)
        if hooks.on_epoch_end is not None:
            hooks.on_epoch_end(epoch, path)

    with task.epochs():
        session.run_epochs(
            state,
            epochs=config.epochs,
            patience=config.patience,
            step=measures.step,
            validate=measures.validate,
            logger=hooks.logger,
            on_epoch_end=epoch_ended,
            progress=hooks.progress,
            describe=task.describe,
        )
    outcome = session.finish(
        state,
        measures.test,
        started=started,
        logger=hooks.logger,
        final_metrics=lambda test: task.final_metrics(test, state),
    )
    return task.result(session.result_fields(state, outcome), state, outcome)


def source_hook(source: Any, name: str) -> Callable[..., Any] | None:
    """``source.<name>`` when the source defines it as a callable (``wrap_model``,
    ``reduce_sum``, ``eval_model``), else ``None``."""
    hook = getattr(source, name, None)
    return hook if callable(hook) else None
