"""How a run of :func:`~gnncore.modes.train_graph_dir` is tracked, checkpointed
and shown, whatever its task and mode."""

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
    from gnncore.tracking import RunTracker


@dataclass(frozen=True)
class RunOptions:
    """How a run of :func:`train_graph_dir` is tracked, checkpointed and shown
    (its arguments of the same names)."""

    tracking: RunTracker | None = None
    tags: Mapping[str, Any] | None = None
    progress: Progress = True
    run_name: str | None = None
    checkpoint_dir: str | os.PathLike[str] | None = None
    resume: bool = False
    keep_checkpoints: int = 2
    on_epoch_end: EpochCallback | None = None
    #: Run parameters every task logs besides its own (how the mode was chosen).
    params: Mapping[str, Any] | None = None

    def hooks(self, checkpoints: CheckpointDir | None) -> RunHooks:
        """The training call's hooks (its logger is the tracked run's, if any)."""
        return RunHooks(None, self.progress, checkpoints, self.resume, self.on_epoch_end)

    def recording(
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
