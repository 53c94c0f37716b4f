"""Progress of long steps that are not loops: named stages.

Library code marks where a long step is (``stage("reading edges")``); whoever
called it decides how that is shown, with :func:`reporting`: a terminal bar
(:class:`StageBar`), Dagster log lines, or nothing (the default: a library call
with no reporter prints nothing). The reporter lives in a context variable, so
the stages of nested helpers reach it without every signature passing it on,
and concurrent threads or tasks keep their own.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

StageFn = Callable[[str], None]

_REPORTER: ContextVar[StageFn | None] = ContextVar("gnncore_stage_reporter", default=None)


def stage(name: str) -> None:
    """Report that the current long step has entered stage ``name``."""
    reporter = _REPORTER.get()
    if reporter is not None:
        reporter(name)


@contextlib.contextmanager
def reporting(reporter: StageFn | None) -> Iterator[None]:
    """Send :func:`stage` calls made inside the block to ``reporter``."""
    token = _REPORTER.set(reporter)
    try:
        yield
    finally:
        _REPORTER.reset(token)


def on_terminal() -> bool:
    """Whether progress bars should show: stderr is a terminal."""
    return sys.stderr.isatty()


class StageBar:
    """A terminal bar counting stages, the current one and the time spent.

    ``StageBar("ingest")`` used as a reporter shows ``ingest: 3stage [00:04,
    canonical edges]``; :meth:`close` (or leaving the ``with`` block) ends it.
    Hidden unless stderr is a terminal (``enabled`` overrides).
    """

    def __init__(self, desc: str, enabled: bool | None = None) -> None:
        self.enabled = on_terminal() if enabled is None else enabled
        self.bar: Any = None
        if self.enabled:  # tqdm (with asyncio, multiprocessing) only for a shown bar
            from tqdm.auto import tqdm

            self.bar = tqdm(desc=desc, unit="stage", leave=True)
        self.stages: list[str] = []

    def __call__(self, name: str) -> None:
        if self.bar is not None:
            if self.stages:
                self.bar.update(1)
            self.bar.set_postfix_str(name)
        self.stages.append(name)

    def close(self) -> None:
        if self.bar is None:
            return
        if self.stages:
            self.bar.update(1)
        self.bar.set_postfix_str("done")
        self.bar.close()
        self.bar = None

    def __enter__(self) -> StageBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LineFile:
    """A picklable progress callable that appends each line to a file.

    For progress made in other processes: give ``LineFile(path)`` as the
    ``progress`` of a call whose lines come from processes it starts (the ranks
    of :func:`~gnncore.distributed.training.train_distributed`), and read
    ``path`` from wherever they should be shown. Each line is written with
    one ``write`` to a file opened for appending.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)

    def __call__(self, line: str) -> None:
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(line.rstrip("\n") + "\n")
