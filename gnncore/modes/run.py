"""How a run of :func:`~gnncore.modes.train_graph_dir` is tracked, checkpointed
and shown, whatever its task and mode."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gnncore.train.core.session import Progress
from gnncore.train.node.loop import EpochCallback

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


def line_logger(progress: Progress) -> Callable[[str], None] | None:
    """Where per-mega-batch lines go: the progress callable (a Dagster logger),
    above the bars on a terminal, or nowhere."""
    if callable(progress):
        return progress
    if progress:
        from tqdm import tqdm  # lazy: only runs that show progress need it

        return tqdm.write
    return None
