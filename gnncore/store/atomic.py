"""Atomic directory outputs: write into a temporary sibling, then rename.

No stage ever leaves a half-written output: a crash or an error mid-write
removes the temporary directory, and the final path either holds the previous
complete output or the new complete one.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_directory(final: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a fresh temporary directory that replaces ``final`` on success.

    The temporary directory sits beside ``final`` (same filesystem, so the
    rename is atomic). On any exception it is deleted and ``final`` is left
    untouched. Re-running a stage replaces its previous output, which makes
    stages idempotent.

    Args:
        final (str or PathLike): The output directory to (re)create.
    """
    final = Path(final).absolute()
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / temporary_name(final, "tmp")
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    replace_directory(tmp, final)


def temporary_name(final: Path, kind: str) -> str:
    """``.NAME.KIND-PID-XXXXXXXX``: a hidden sibling's name that records its owner's
    pid, so that :func:`remove_stale_temporaries` can tell an abandoned one."""
    return f".{final.name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(
    final: str | os.PathLike[str], kinds: tuple[str, ...] = ("tmp",)
) -> list[Path]:
    """Delete the temporary siblings of ``final`` (``.NAME.KIND-PID-...``) whose
    process is gone: what a killed run left behind. Returns the paths removed.

    Only names that record a pid are touched, and only when no process of that
    pid exists on this machine (a directory shared between machines is not
    safe to clean this way).
    """
    final = Path(final).absolute()
    removed: list[Path] = []
    if not final.parent.is_dir():
        return removed
    for kind in kinds:
        prefix = f".{final.name}.{kind}-"
        for path in final.parent.glob(f"{prefix}*"):
            pid_text = path.name[len(prefix) :].split("-", 1)[0]
            if not pid_text.isdigit() or _pid_alive(int(pid_text)):
                continue
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def replace_directory(new: Path, final: Path) -> None:
    """Rename ``new`` onto ``final``, moving an existing ``final`` aside first."""
    old = None
    if final.exists():
        old = final.parent / f".{final.name}.old-{uuid.uuid4().hex[:8]}"
        os.replace(final, old)
    try:
        os.replace(new, final)
    except BaseException:
        if old is not None:
            os.replace(old, final)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def check_output_dir(
    out: str | os.PathLike[str], inputs: list[Path], format_name: str, what: str
) -> None:
    """Refuse an output directory whose replacement would destroy data: one of
    ``inputs`` or a directory holding one, a file, or an existing non-empty
    directory whose ``manifest.json`` is not of ``format_name`` (a ``what``).

    Raises:
        InputError: Naming ``out`` and the reason.
    """
    import json

    from gnncore.errors import InputError

    out = Path(out)
    target = out.resolve()
    for source in inputs:
        source = Path(source).resolve()
        if target == source or target in source.parents:
            raise InputError(f"is (or holds) the input {source}; choose another OUT_DIR", out)
    if not target.exists():
        return
    if not target.is_dir():
        raise InputError("exists and is not a directory", out)
    if any(target.iterdir()):
        try:
            found = json.loads((target / "manifest.json").read_text()).get("format")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            found = None
        if found != format_name:
            raise InputError(
                f"exists, is not empty and holds no {what}: refusing to replace it", out
            )
