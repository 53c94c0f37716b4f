"""The scratch directory of a bounded-memory run: a sibling of the output,
removed on success and on error (a killed run's is removed by the next run)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gnncore.store.atomic import remove_stale_temporaries, temporary_name

SCRATCH_KINDS = ("tmp", "ingest", "synth")
"""The temporary siblings of an output that the next run removes when their process is gone."""


@contextmanager
def scratch_directory(out: Path, kind: str) -> Iterator[Path]:
    """A scratch directory ``.NAME.KIND-PID-XXXXXXXX`` beside ``out``, removed on
    success and on error; first the scratch and temporary siblings of ``out``
    that killed runs left behind (:data:`SCRATCH_KINDS`) are removed."""
    out = Path(out).absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(out, SCRATCH_KINDS)
    scratch = out.parent / temporary_name(out, kind)
    scratch.mkdir()
    try:
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def clear_scratch(scratch: Path) -> None:
    """Remove what a parse pass left in the scratch directory (runs, raw id files)."""
    for pattern in ("*.run", "*.i64"):
        for path in scratch.glob(pattern):
            path.unlink()
