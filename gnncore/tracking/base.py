"""The run-logging protocol the training code depends on (no MLflow here).

A :class:`RunTracker` starts runs; a :class:`RunLogger` is one run. Used as a
context manager a run always ends: ``FINISHED`` when the block completes,
``KILLED`` on ``KeyboardInterrupt``, ``FAILED`` on any other exception (which
then propagates). A crashed run is never left ``RUNNING``. Only a process
killed outright (``SIGKILL``, power loss) cannot end its run; whoever resumes
its work closes it with :meth:`RunTracker.end_run` (as
:func:`gnncore.modes.train_graph_dir` does on ``resume``).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

RUNNING = "RUNNING"
FINISHED = "FINISHED"
FAILED = "FAILED"
KILLED = "KILLED"


@runtime_checkable
class RunLogger(Protocol):
    """One tracked run."""

    run_id: str

    def log_params(self, params: Mapping[str, Any]) -> None: ...

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None: ...

    def set_tags(self, tags: Mapping[str, Any]) -> None: ...

    def log_artifact(
        self, path: str | os.PathLike[str], artifact_path: str | None = None
    ) -> None: ...

    def log_figure(self, figure: Any, artifact_file: str) -> None: ...

    def log_model(
        self,
        module: Any,
        name: str = "model",
        input_example: Any | None = None,
        spec: Any | None = None,
    ) -> str: ...

    def end(self, status: str = FINISHED) -> None: ...

    def __enter__(self) -> RunLogger: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None: ...


class RunTracker(Protocol):
    """Starts runs in one experiment of one tracking backend."""

    def start_run(
        self, run_name: str | None = None, tags: Mapping[str, Any] | None = None
    ) -> RunLogger: ...

    def run_url(self, run_id: str) -> str: ...

    def run_status(self, run_id: str) -> str | None:
        """``RUNNING``, ``FINISHED``, ``FAILED``, ...; ``None`` for an unknown run."""
        ...

    def end_run(self, run_id: str, status: str, tags: Mapping[str, Any] | None = None) -> None:
        """Set tags on another run (one this process may not have started) and
        mark it terminated with ``status``."""
        ...


class BaseRunLogger(ABC):
    """Shared context-manager behaviour: end the run with the right status."""

    run_id: str

    @abstractmethod
    def log_params(self, params: Mapping[str, Any]) -> None:
        """Log string-convertible parameters (once per key)."""

    @abstractmethod
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Log numeric metrics at ``step``."""

    @abstractmethod
    def set_tags(self, tags: Mapping[str, Any]) -> None:
        """Set (or overwrite) run tags."""

    @abstractmethod
    def log_artifact(self, path: str | os.PathLike[str], artifact_path: str | None = None) -> None:
        """Copy a local file into the run's artifacts."""

    @abstractmethod
    def log_figure(self, figure: Any, artifact_file: str) -> None:
        """Save a matplotlib figure as ``artifact_file`` (e.g. ``curves.png``)."""

    @abstractmethod
    def log_model(
        self,
        module: Any,
        name: str = "model",
        input_example: Any | None = None,
        spec: Any | None = None,
    ) -> str:
        """Log a torch module (with ``spec``, what rebuilding it takes:
        :class:`gnncore.predict.ModelSpec`); return its URI."""

    @abstractmethod
    def end(self, status: str = FINISHED) -> None:
        """Mark the run terminated with ``status``; later calls do nothing."""

    def __enter__(self) -> BaseRunLogger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.end(FINISHED)
            return
        status = KILLED if isinstance(exc, KeyboardInterrupt) else FAILED
        try:
            self.set_tags({"error": f"{type(exc).__name__}: {exc}"[:5000]})
        finally:
            self.end(status)
