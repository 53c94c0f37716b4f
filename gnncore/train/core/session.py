"""What the training loops share around their batches: the epoch loop, resuming
at the start and checkpointing after every epoch, and the per-epoch progress."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import torch
from tqdm.auto import tqdm

from gnncore.train.core.batches import BatchSource
from gnncore.train.core.checkpoint import (
    FORMAT,
    VERSION,
    CheckpointDir,
    capture_rng,
    check_resumable,
    restore_rng,
)
from gnncore.train.core.steps import BatchStep, train_epoch
from gnncore.train.core.throughput import epoch_timing, mean_throughput

#: Seconds of an epoch's training past which it is checkpointed before its
#: validation too (and again after it), so that a validation that fails (out of
#: memory, killed) resumes at the validation, not at the training.
CHECKPOINT_BEFORE_VALIDATION_S = 60.0
P = TypeVar("P", bound="EpochProgress")
M = TypeVar("M")
#: ``True``: tqdm bars; ``False``: nothing; a callable: one line per epoch.
Progress = bool | Callable[[str], None]


@dataclass(frozen=True)
class Outcome(Generic[M]):
    """What :meth:`TrainingSession.finish` measured: the test metrics of the best
    epoch's weights, the run's wall seconds, whether early stopping ended it,
    and the model's parameter count."""

    test: M
    seconds: float
    early_stopped: bool
    num_parameters: int


@dataclass(kw_only=True)
class TrainResult:
    """What every task's training returns besides its own metrics.

    ``model`` holds the weights of ``best_epoch`` (the best validation epoch,
    earliest on ties), on the training device. Epochs count from 1;
    ``train_loss[e - 1]`` and ``throughput[e - 1]`` belong to epoch ``e``
    (epochs before a resume included). ``stopped_epoch`` is the last epoch
    trained: ``config.epochs``, or earlier when early stopping ended the run
    (``early_stopped``). ``resumed_from_epoch`` is the checkpoint's epoch the
    run continued from (0 for a fresh run). ``seconds`` is the wall time of
    the call. ``run_id`` and ``model_uri`` are set by
    :func:`gnncore.modes.train_graph_dir` when the run was tracked, and
    ``mode_choice`` (the mode, the mode asked for, why, the in-memory estimate
    and the budget: :class:`gnncore.modes.choose.ModeChoice`) whenever it ran.
    """

    model: torch.nn.Module
    config: Any
    train_loss: list[float]
    best_epoch: int
    seconds: float
    device: str
    num_parameters: int
    stopped_epoch: int = 0
    early_stopped: bool = False
    resumed_from_epoch: int = 0
    throughput: list[dict[str, float]] = field(default_factory=list)
    checkpoint_dir: str | None = None
    run_id: str | None = None
    model_uri: str | None = None
    mode_choice: dict[str, Any] | None = None


@dataclass
class TrainingSession:
    r"""What a training call checkpoints, and where.

    Args:
        checkpoints: A :class:`CheckpointDir`, a path (newest 2 kept), or
            ``None`` for no checkpoints.
        config: The run's configuration (``to_dict`` / ``mismatches``).
        fingerprint: :func:`~gnncore.train.core.checkpoint.data_fingerprint` of the data.
        model, optimizer, scaler: Trained objects (``scaler`` may be ``None``).
        source: The training batches (:class:`~gnncore.train.core.batches.BatchSource`);
            its :meth:`random_state` is checkpointed. A source with state on disk
            may define ``checkpoint_files(store, epoch, progress) -> dict``, called
            before each checkpoint is written, which attaches files to it
            (:meth:`CheckpointDir.attach`) and returns their records (the
            checkpoint's ``files``), and ``restore_files(store, checkpoint)``,
            called when a run resumes from ``checkpoint``. A source whose
            ``main_process`` is ``False`` (a rank other than 0 of a distributed
            run) reads checkpoints to resume but never writes, prunes or clears
            them: the main process of the run does.
        device: The training device (CUDA RNG states are saved on CUDA).
        run_id: The tracked run, recorded in every checkpoint.
        eval_samplers: Name -> evaluation sampler whose batch counters are
            checkpointed too.
    """

    checkpoints: CheckpointDir | str | os.PathLike[str] | None
    config: Any
    fingerprint: dict[str, Any]
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scaler: Any | None
    source: BatchSource
    device: torch.device
    run_id: str | None = None
    eval_samplers: dict[str, Any] = field(default_factory=dict)
    resumed_from: int = field(default=0, init=False)
    main_process: bool = field(default=True, init=False)

    store: CheckpointDir | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.main_process = bool(getattr(self.source, "main_process", True))
        if self.checkpoints is not None:
            self.store = (
                self.checkpoints
                if isinstance(self.checkpoints, CheckpointDir)
                else CheckpointDir(self.checkpoints)
            )

    @property
    def directory(self) -> str | None:
        return None if self.store is None else str(self.store.directory)

    def start(self, resume: bool) -> dict[str, Any] | None:
        """Fresh run: return ``None``; the checkpoints already there stay until
        this run's first one is written (:meth:`CheckpointDir.start_fresh`). With
        ``resume`` and a checkpoint: load it into the objects (after checking it
        was written by this configuration and data) and return its ``progress``
        dict."""
        store = self.store
        if store is None:
            return None
        found = store.latest() if resume else None
        if found is None:
            if self.main_process:
                store.start_fresh()
            return None
        check_resumable(found, self.config, self.fingerprint)
        saved = found.state
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        if self.scaler is not None and saved.get("scaler") is not None:
            self.scaler.load_state_dict(saved["scaler"])
        generator, samplers = self._random_state()
        restore_rng(saved["rng"], generator, samplers)
        restore_files = getattr(self.source, "restore_files", None)
        if callable(restore_files):
            restore_files(store, found)
        if self.main_process:
            store.remove_temporaries()
        self.resumed_from = found.epoch
        return dict(saved["progress"])

    def resume_progress(self, resume: bool, progress_type: type[P], logger: Any | None = None) -> P:
        """:meth:`start`, as a ``progress_type`` (fresh when nothing was resumed);
        ``logger`` gets the resumed epochs' metrics again, so a resumed run's
        history is whole."""
        restored = self.start(resume)
        state = progress_type() if restored is None else progress_type.from_dict(restored)
        if logger is not None:
            for epoch in range(1, state.epoch + 1):
                logger.log_metrics(state.epoch_metrics(epoch), step=epoch)
        return state

    def end_epoch(
        self,
        epoch: int,
        state: EpochProgress,
        logger: Any | None = None,
        on_epoch_end: Callable[[int, Path | None], None] | None = None,
    ) -> None:
        """Log the epoch's metrics, write its checkpoint, then call ``on_epoch_end``."""
        if logger is not None:
            logger.log_metrics(state.epoch_metrics(epoch), step=epoch)
        path = self.save(epoch, state.to_dict())
        if on_epoch_end is not None:
            on_epoch_end(epoch, path)

    def _checkpoint_before_validation(self, seconds: float) -> bool:
        """Whether an epoch whose training took ``seconds`` is checkpointed before
        its validation: past :data:`CHECKPOINT_BEFORE_VALIDATION_S`, unless the
        source attaches files to its checkpoints (the partition buffer's table
        snapshots: a second snapshot an epoch costs more than its validation)."""
        attaches = callable(getattr(self.source, "checkpoint_files", None))
        return seconds >= CHECKPOINT_BEFORE_VALIDATION_S and not attaches

    def _random_state(self) -> tuple[torch.Generator, dict[str, Any]]:
        generator, samplers = self.source.random_state()
        return generator, {**samplers, **self.eval_samplers}

    def _take_store_counts(self) -> dict[str, float]:
        """Counters of the source's feature store since the last call (a store that
        counts its reads per tier has ``take_counts``; others report nothing)."""
        take = getattr(self.source.feature_store, "take_counts", None)
        return take() if callable(take) else {}

    def run_epochs(
        self,
        state: EpochProgress,
        *,
        epochs: int,
        patience: int,
        step: BatchStep,
        validate: Callable[[], Any],
        describe: Callable[[float, Any, Any], dict[str, str]],
        logger: Any | None = None,
        on_epoch_end: Callable[[int, Path | None], None] | None = None,
        progress: Progress = True,
    ) -> None:
        """The epoch loop of every task, from the epoch after ``state.epoch`` to
        ``epochs`` unless early stopping (``patience``) ends it first.

        Each epoch: ``source.start_epoch``, ``step`` on every batch of the
        source (:func:`~gnncore.train.core.steps.train_epoch`),
        ``source.end_epoch`` (the feature store's per-tier read counts, when it
        keeps them, join the epoch's throughput figures, and so do those of
        ``source.adapt(epoch, throughput)`` when the source adapts), then
        ``validate() -> metrics`` (its wall time added as ``eval_s``), then
        ``state.record`` and :meth:`end_epoch`.
        ``describe(loss, metrics, state)`` labels the epoch bar; with a
        callable ``progress`` (e.g. a Dagster logger's ``info``) the bars stay
        hidden and every epoch is one line ``epoch E/N: key=value ...`` instead.
        """
        report = progress if callable(progress) else None
        show = progress is True
        validated = _Validation(
            self, state, epochs, validate, describe, report, logger, on_epoch_end
        )
        if state.pending is not None:  # resumed between an epoch's training and its validation
            validated.run(None)
        bar = tqdm(
            range(state.epoch + 1, epochs + 1),
            desc="epochs",
            unit="epoch",
            initial=state.epoch,
            total=epochs,
            disable=not show,
            dynamic_ncols=True,
        )
        for epoch in bar:
            if state.should_stop(patience):
                break
            with tqdm(
                desc=f"epoch {epoch}",
                unit="batch",
                leave=False,
                disable=not show,
                total=len(self.source),
                dynamic_ncols=True,
            ) as batches:
                trained = time.perf_counter()
                self.source.start_epoch(epoch)
                self._take_store_counts()  # drop reads made outside training (validation)
                loss, throughput = train_epoch(
                    self.model, self.source, self.device, step, batches.update
                )
                self.source.end_epoch(epoch)
                throughput.update(self._take_store_counts())
                adapt = getattr(self.source, "adapt", None)
                if callable(adapt):
                    throughput.update(adapt(epoch, dict(throughput)))
            state.pending = {"epoch": epoch, "loss": loss, "throughput": throughput}
            if self._checkpoint_before_validation(time.perf_counter() - trained):
                self.save(epoch, state.to_dict())  # a failed validation does not retrain it
            validated.run(bar)

    def finish(
        self,
        state: EpochProgress,
        test: Callable[[], M],
        final_metrics: Callable[[M], dict[str, float]],
        started: float,
        logger: Any | None = None,
    ) -> Outcome[M]:
        """End of every task's run: restore the best epoch's weights, measure
        ``test()``, and log ``final_metrics(test)`` with the run's bookkeeping
        (best and stopped epoch, resumed-from epoch, seconds since ``started``)."""
        assert state.best_state is not None  # epochs >= 1
        self.model.load_state_dict(state.best_state)
        metrics = test()
        seconds = time.perf_counter() - started
        config: Any = self.config
        early_stopped = state.should_stop(config.patience) and state.epoch < config.epochs
        if logger is not None:
            logger.log_metrics(
                {
                    **final_metrics(metrics),
                    "best_epoch": float(state.best_epoch),
                    "stopped_epoch": float(state.epoch),
                    "resumed_from_epoch": float(self.resumed_from),
                    "seconds": seconds,
                },
                step=state.epoch,
            )
        return Outcome(
            metrics, seconds, early_stopped, sum(p.numel() for p in self.model.parameters())
        )

    def result_fields(self, state: EpochProgress, outcome: Outcome[Any]) -> dict[str, Any]:
        """The :class:`TrainResult` fields of a finished run, by name."""
        return {
            "model": self.model,
            "config": self.config,
            "train_loss": state.train_loss,
            "best_epoch": state.best_epoch,
            "seconds": outcome.seconds,
            "device": str(self.device),
            "num_parameters": outcome.num_parameters,
            "stopped_epoch": state.epoch,
            "early_stopped": outcome.early_stopped,
            "resumed_from_epoch": self.resumed_from,
            "throughput": state.throughput,
            "checkpoint_dir": self.directory,
        }

    def save(self, epoch: int, progress: dict[str, Any]) -> Path | None:
        """Write the checkpoint of ``epoch`` (``None`` without a checkpoint directory,
        and in a process other than the run's main one)."""
        if self.store is None or not self.main_process:
            return None
        state = {
            "format": FORMAT,
            "version": VERSION,
            "epoch": epoch,
            "config": self.config.to_dict(),
            "data": self.fingerprint,
            "run_id": self.run_id,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "progress": progress,
            "rng": capture_rng(*self._random_state(), cuda=self.device.type == "cuda"),
        }
        checkpoint_files = getattr(self.source, "checkpoint_files", None)
        if callable(checkpoint_files):  # attached before the checkpoint that records them
            state["files"] = checkpoint_files(self.store, epoch, progress)
        return self.store.save(epoch, state)


class _Validation:
    """Validate the epoch ``state.pending`` holds (trained, its loss and
    throughput recorded), record it and end it (:meth:`TrainingSession.end_epoch`)."""

    def __init__(
        self,
        session: TrainingSession,
        state: EpochProgress,
        epochs: int,
        validate: Callable[[], Any],
        describe: Callable[[float, Any, Any], dict[str, str]],
        report: Callable[[str], None] | None,
        logger: Any | None,
        on_epoch_end: Callable[[int, Path | None], None] | None,
    ) -> None:
        self.session, self.state, self.validate, self.describe = session, state, validate, describe
        self.report, self.logger, self.on_epoch_end = report, logger, on_epoch_end
        self.epochs = epochs

    def run(self, bar: Any | None) -> None:
        state = self.state
        assert state.pending is not None
        epoch, loss = int(state.pending["epoch"]), float(state.pending["loss"])
        throughput = dict(state.pending["throughput"])
        eval_started = time.perf_counter()
        metrics = self.validate()
        throughput["eval_s"] = time.perf_counter() - eval_started
        state.pending = None
        state.record(epoch, loss, metrics, throughput, self.session.model)
        labels = self.describe(loss, metrics, state)
        if bar is not None:
            bar.set_postfix(**labels)
        if self.report is not None:
            described = " ".join(f"{k}={v}" for k, v in labels.items())
            self.report(f"epoch {epoch}/{self.epochs}: {described}")
        self.session.end_epoch(epoch, state, self.logger, self.on_epoch_end)


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
    #: An epoch trained but not validated yet: ``{"epoch", "loss", "throughput"}``.
    pending: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Every field, for the checkpoint's ``progress`` entry."""
        return {key: getattr(self, key) for key in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls: type[P], values: dict[str, Any]) -> P:
        fields = cls.__dataclass_fields__  # a checkpoint from before ``pending`` has none
        return cls(**{key: values[key] for key in fields if key != "pending" or key in values})

    def advance(
        self,
        epoch: int,
        loss: float,
        throughput: dict[str, float],
        improved: bool,
        model: torch.nn.Module,
    ) -> None:
        """Record the epoch; keep the model's weights when it ``improved``."""
        self.epoch = epoch
        self.train_loss.append(loss)
        self.throughput.append(throughput)
        if improved:
            self.best_epoch = epoch
            self.best_state = {
                k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()
            }
            self.bad_epochs = 0
        else:
            self.bad_epochs += 1

    def record(
        self,
        epoch: int,
        loss: float,
        metrics: Any,
        throughput: dict[str, float],
        model: torch.nn.Module,
    ) -> None:
        """Add epoch ``epoch``'s validation ``metrics`` to the task's series, then
        :meth:`advance` (improved or not, by the task's validation metric)."""
        raise NotImplementedError

    def should_stop(self, patience: int) -> bool:
        """Early stopping: ``patience`` epochs in a row without improvement."""
        return patience > 0 and self.bad_epochs >= patience

    def epoch_metrics(self, epoch: int) -> dict[str, float]:
        """What a run logger receives for ``epoch`` (1-based)."""
        raise NotImplementedError


def run_summary(result: Any) -> dict[str, Any]:
    """The summary keys every task's result shares (a node or link training
    result: ``train_loss``, ``seconds``, ``device``, ``num_parameters``,
    ``config.seed``, ``resumed_from_epoch``, ``checkpoint_dir``, ``throughput``
    as the mean per epoch, ``epoch_timing``: each epoch's wall time, stall (the
    loop waiting for batches), its fraction, sampling, transfer, compute and,
    in distributed training, exchange seconds)."""
    return {
        "final_train_loss": result.train_loss[-1] if result.train_loss else None,
        "seconds": result.seconds,
        "device": result.device,
        "num_parameters": result.num_parameters,
        "seed": result.config.seed,
        "resumed_from_epoch": result.resumed_from_epoch,
        "checkpoint_dir": result.checkpoint_dir,
        "throughput": mean_throughput(result.throughput),
        "epoch_timing": epoch_timing(result.throughput),
    }
