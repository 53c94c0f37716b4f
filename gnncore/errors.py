"""Errors that name the file, the line or row, and the problem."""

from __future__ import annotations

from pathlib import Path


class GnnCoreError(Exception):
    """Base class of every error gnncore raises on purpose."""


class InputError(GnnCoreError, ValueError):
    """Bad input data.

    Args:
        path (str or Path, optional): The offending file or directory.
        problem (str): What is wrong, in words a user can act on.
        line (int, optional): 1-based line number in a text file.
        row (int, optional): 0-based row of a table or array.
    """

    def __init__(
        self,
        problem: str,
        path: str | Path | None = None,
        line: int | None = None,
        row: int | None = None,
    ) -> None:
        self.path = None if path is None else Path(path)
        self.line = line
        self.row = row
        self.problem = problem
        super().__init__(self._format())

    def _format(self) -> str:
        where = str(self.path) if self.path is not None else "<input>"
        if self.line is not None:
            where += f":{self.line}"
        elif self.row is not None:
            where += f": row {self.row}"
        return f"{where}: {self.problem}"


class ConfigError(GnnCoreError, ValueError):
    """A training configuration that cannot be run (names the field and the problem)."""
