"""What a run of :func:`~gnncore.modes.train_graph_dir` reads besides the graph
(:class:`RunInputs`) and how it is tracked, checkpointed and shown
(:class:`RunRecording`), whatever its task and mode."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gnncore.store import GraphDir
from gnncore.train.core.checkpoint import Checkpoint, CheckpointDir
from gnncore.train.core.session import Progress
from gnncore.train.fitting import EpochCallback, RunHooks
from gnncore.train.record import Recording

if TYPE_CHECKING:
    from gnncore.modes.choose import ModeChoice
    from gnncore.tracking import RunTracker


@dataclass(frozen=True)
class RunInputs:
    r"""What a run of :func:`~gnncore.modes.train_graph_dir` reads besides the
    graph directory: plans and a partitioned store of the same graph, and the
    mode already chosen for them. All ``None`` (the default): the graph alone,
    the mode chosen by the run.

    Args:
        placement (str or PathLike, optional): A placement plan of this graph
            (:func:`~gnncore.plan.plan_placement`; mode ``mmap``, which ``auto``
            then picks): features are served through
            :class:`~gnncore.plan.feature_store.PlacedFeatureStore` as the
            plan's device 0 (same batches and results as without), and the
            per-tier read counts are logged per epoch. Node task only.
        replication (str or PathLike, optional): A replication plan of this
            graph, checked and recorded with the run (its path, stage key and
            memory increase); with ``config.hdr_part >= 0`` training samples
            as that partition of it, remote lists pruned (HyDRA). Node task only.
        store (str or PathLike, optional): A partitioned store of this graph
            (:func:`~gnncore.outofcore.write_partitioned_store`), read by the
            out-of-core modes ``config.mode="hierbatching"`` and
            ``"partition_buffer"`` (:mod:`gnncore.modes.node_data`); the run
            logs the mode, the budget and the bytes read per epoch. Node task
            only; mode ``auto`` may pick an out-of-core mode only with one.
        mode_choice (ModeChoice, optional): The mode already chosen for this
            graph and config by :func:`~gnncore.modes.choose.resolve_mode` (a
            caller that had to know it first, to know which of these inputs to
            read); ``None``: the run resolves it.
    """

    placement: str | os.PathLike[str] | None = None
    replication: str | os.PathLike[str] | None = None
    store: str | os.PathLike[str] | None = None
    mode_choice: ModeChoice | None = None

    @property
    def plans(self) -> bool:
        """Whether a placement or replication plan is given."""
        return self.placement is not None or self.replication is not None


@dataclass(frozen=True)
class RunRecording:
    r"""How a run of :func:`~gnncore.modes.train_graph_dir` is tracked,
    checkpointed and shown. The default: not tracked, no checkpoints, tqdm bars.

    Args:
        tracking (RunTracker, optional): Where to log the run, e.g.
            :class:`gnncore.tracking.MlflowTracker`: the parameters (config plus
            dataset name and counts), per-epoch metrics, the final metrics, a
            ``curves.png`` artifact and the model; the run ends ``FINISHED``, or
            ``FAILED`` when training raises (the exception propagates).
        tags (Mapping, optional): Extra run tags (the Dagster asset passes
            ``dagster_run_id``). ``dataset``, ``task`` and ``model`` are
            always set.
        progress (bool or callable): Show tqdm bars (``True``), nothing
            (``False``), or call ``progress(line)`` once per epoch (e.g. a
            Dagster logger's ``info``).
        run_name (str, optional): Run name; default ``"<dataset>-<model>"``.
        checkpoint_dir (str or PathLike, optional): Per-epoch checkpoints go
            here, e.g. :func:`~gnncore.train.default_checkpoint_dir`. A fresh
            run removes older checkpoints in it once its own first checkpoint
            is written (one that fails before keeps them).
        resume (bool): Continue from the newest checkpoint in
            ``checkpoint_dir``, a fresh start when there is none; raises
            :class:`~gnncore.train.CheckpointError` (before any run is created)
            when it was written with other settings or data. A resumed, tracked
            run is a new MLflow run tagged ``resumed_from_epoch`` and
            ``resumed_from_run_id`` that re-logs the earlier epochs; the
            interrupted run, if its process died without closing it
            (``SIGKILL``, power loss), is marked ``FAILED`` then.
        keep_checkpoints (int): Newest checkpoints kept.
        on_epoch_end (callable, optional): ``f(epoch, checkpoint_path)`` after
            each epoch.
        params (Mapping, optional): Run parameters logged besides the task's
            own (:func:`~gnncore.modes.train_graph_dir` adds how the mode was
            chosen).
    """

    tracking: RunTracker | None = None
    tags: Mapping[str, Any] | None = None
    progress: Progress = True
    run_name: str | None = None
    checkpoint_dir: str | os.PathLike[str] | None = None
    resume: bool = False
    keep_checkpoints: int = 2
    on_epoch_end: EpochCallback | None = None
    params: Mapping[str, Any] | None = None

    def hooks(self, checkpoints: CheckpointDir | None) -> RunHooks:
        """The training call's hooks (its logger is the tracked run's, if any)."""
        return RunHooks(None, self.progress, checkpoints, self.resume, self.on_epoch_end)

    def record(
        self,
        graph: GraphDir,
        params: dict[str, Any],
        previous: Checkpoint | None,
        run_name: str | None = None,
    ) -> Recording | None:
        """How the run is recorded (``run_name``: the default name), or ``None``
        when it is not tracked."""
        if self.tracking is None:
            return None
        name = self.run_name or run_name
        params = {**params, **(self.params or {})}
        return Recording(self.tracking, graph, params, self.tags, name, previous)


def line_logger(progress: Progress) -> Callable[[str], None] | None:
    """Where per-mega-batch lines go: the progress callable (a Dagster logger),
    above the bars on a terminal, or nowhere."""
    if callable(progress):
        return progress
    if progress:
        from tqdm import tqdm  # lazy: only runs that show progress need it

        return tqdm.write
    return None
