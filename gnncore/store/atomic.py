"""Atomic outputs, and the one guard that keeps a command from deleting what it did not write.

No stage ever leaves a half-written output: :func:`atomic_directory` writes into a
hidden sibling (``.NAME.tmp-PID-XXXXXXXX``) and puts it in place when complete. The
swap is crash-safe: on Linux one ``renameat2(RENAME_EXCHANGE)`` exchanges the new
directory with the old one atomically, so ``NAME`` always holds a complete output,
the previous one or the new one; elsewhere (or on a filesystem that refuses the
exchange) the old directory is renamed aside as ``.NAME.old-PID-XXXXXXXX`` and removed
only after the new one is in place. Whatever a killed process leaves beside ``NAME``
(a ``tmp`` or ``old`` sibling whose pid is gone) is cleaned by the next run that writes
``NAME`` (:func:`recover_output`), which first puts a previous output back where a
kill between the two renames left ``NAME`` missing.

Every command checks its output with :func:`check_output_dir` (directories) or
:func:`check_output_file` (the single-file CSV of ``gnncore synth``) before any work
starts. It replaces an existing output only when it holds what the same kind of
command wrote (its manifest's ``format``), and refuses, naming the path, when the
output is an input, holds an input, is the current directory or one of its
ancestors, the home directory, a file where a directory is written, or a non-empty
directory of something else. ``overwrite=True`` (``--overwrite``) lifts only the last
refusal: an input, the working directory and the home directory are never deleted.
"""

from __future__ import annotations

import ctypes
import errno
import glob
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from gnncore.errors import InputError
from gnncore.heap import libc_function

#: The manifest every gnncore directory output carries (its ``format`` names the kind).
MANIFEST = "manifest.json"

_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100
_renameat2 = libc_function("renameat2")  # glibc >= 2.28 exports it
if _renameat2 is not None:
    _renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    _renameat2.argtypes += [ctypes.c_uint]
    _renameat2.restype = ctypes.c_int

_OVERWRITE: ContextVar[bool] = ContextVar("gnncore_overwrite", default=False)


@contextmanager
def overwrite_allowed(allowed: bool = True) -> Iterator[None]:
    """Within the block, the output guards replace a foreign output (``--overwrite``).

    Only the refusal of a non-empty directory (or file) that gnncore did not write
    is lifted: inputs, the working and home directories stay refused. The CLI's
    ``--overwrite`` sets it around the verb, so that every check the verb's library
    calls make (some check twice: before the work and again when writing) agrees.
    """
    token = _OVERWRITE.set(allowed)
    try:
        yield
    finally:
        _OVERWRITE.reset(token)


#: Whether :func:`replace_directory` tries the atomic exchange (tests turn it off to
#: exercise the two-rename path).
USE_EXCHANGE = _renameat2 is not None


@contextmanager
def atomic_directory(final: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a fresh temporary directory that replaces ``final`` on success.

    The temporary directory sits beside ``final`` (same filesystem, so the swap
    is atomic). On any exception it is deleted and ``final`` is left untouched.
    Re-running a stage replaces its previous output, which makes stages
    idempotent. Leftovers of a killed earlier run are cleaned first
    (:func:`recover_output`). Callers check ``final`` with
    :func:`check_output_dir` before their work starts; this function still
    refuses the targets that no command may replace (:func:`refuse_unsafe_target`).

    Args:
        final (str or PathLike): The output directory to (re)create.
    """
    final = Path(final).absolute()
    refuse_unsafe_target(final, [])
    final.parent.mkdir(parents=True, exist_ok=True)
    recover_output(final)
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


def pid_alive(pid: int) -> bool:
    """Whether a process of ``pid`` exists on this machine (another user's too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stale_siblings(final: Path, kind: str | None) -> list[Path]:
    """The ``.NAME.KIND-PID-XXXXXXXX`` siblings of ``final`` whose process is gone, of
    one ``kind`` or (``None``) of any (``tmp``, ``old``, the scratch of ingestion and
    generation); for ``old``, also the pid-less ``.NAME.old-XXXXXXXX`` of earlier
    versions."""
    pattern = re.compile(
        rf"\.{re.escape(final.name)}\.({re.escape(kind) if kind else '[a-z]+'})-"
        r"(?:(\d+)-)?([0-9a-f]{8})"
    )
    stale = []
    for path in final.parent.glob(f".{glob.escape(final.name)}.*-*"):
        match = pattern.fullmatch(path.name)
        if match is None:
            continue
        pid_text = match.group(2)
        if pid_text is not None:
            if not pid_alive(int(pid_text)):
                stale.append(path)
        elif match.group(1) == "old":
            stale.append(path)  # written by a version whose names held no pid
    return stale


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def remove_stale_temporaries(
    final: str | os.PathLike[str], kinds: tuple[str | None, ...] = ("tmp",)
) -> list[Path]:
    """Delete the temporary siblings of ``final`` (``.NAME.KIND-PID-...``) whose
    process is gone: what a killed run left behind. Returns the paths removed.

    ``kinds`` ``(None,)`` means every kind. Only names that record a pid are
    touched, and only when no process of that pid exists on this machine (a
    directory shared between machines is not safe to clean this way).
    """
    final = Path(final).absolute()
    removed: list[Path] = []
    if not final.parent.is_dir():
        return removed
    for kind in kinds:
        for path in _stale_siblings(final, kind):
            _remove(path)
            removed.append(path)
    return removed


def recover_output(final: str | os.PathLike[str]) -> list[Path]:
    """Clean what killed writers of ``final`` left beside it; return what was removed.

    When ``final`` is missing and a dead process's ``.NAME.old-*`` sibling exists
    (a kill between the two renames of :func:`replace_directory`'s fallback), the
    newest such sibling is renamed back to ``final`` first: the previous complete
    output is never lost. Then every stale sibling is removed: ``tmp``, ``old``
    and the scratch directories of killed ingestions and generations.
    """
    final = Path(final).absolute()
    if not final.parent.is_dir():
        return []
    if not final.exists() and not final.is_symlink():
        old = _stale_siblings(final, "old")
        if old:
            newest = max(old, key=lambda p: p.lstat().st_mtime_ns)
            os.replace(newest, final)
    return remove_stale_temporaries(final, (None,))


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange the paths ``a`` and ``b``; False where not supported."""
    if not USE_EXCHANGE or _renameat2 is None:
        return False
    result = _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if result == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(err, os.strerror(err), str(a))


def replace_directory(new: Path, final: Path) -> None:
    """Put ``new`` in place of ``final``, crash-safely.

    Where the kernel and filesystem allow, one atomic exchange swaps them and the
    old output (now at ``new``'s hidden name) is removed. Otherwise the old output is
    renamed aside to ``.NAME.old-PID-...``, ``new`` renamed onto ``final``, and the
    old one removed only then; a kill between the two renames is undone by the next
    writer (:func:`recover_output`).
    """
    new, final = Path(new), Path(final)
    if not (final.exists() or final.is_symlink()):
        os.replace(new, final)
        return
    if _exchange(new, final):
        _remove(new)  # the old output, under the temporary name (a tmp of this pid)
        return
    old = final.parent / temporary_name(final, "old")
    os.replace(final, old)
    try:
        os.replace(new, final)
    except BaseException:
        os.replace(old, final)
        raise
    _remove(old)


def _protected() -> list[tuple[Path, str]]:
    """Directories no command may replace: the working and home directories."""
    protected = [(Path.cwd().resolve(), "the current directory")]
    try:
        protected.append((Path.home().resolve(), "the home directory"))
    except RuntimeError:  # no home in this environment
        pass
    return protected


def refuse_unsafe_target(out: str | os.PathLike[str], inputs: list[Path]) -> None:
    """Refuse an output that no flag may replace: an input, a directory holding an
    input, the current or home directory or one of their ancestors.

    Raises:
        InputError: Naming ``out`` and the reason.
    """
    out = Path(out)
    target = out.resolve()
    for source in inputs:
        source = Path(source).resolve()
        if target == source or target in source.parents:
            raise InputError(f"is (or holds) the input {source}; choose another output", out)
    for directory, what in _protected():
        if target == directory or target in directory.parents:
            raise InputError(
                f"is (or holds) {what} ({directory}): refusing to replace it; "
                "choose a new directory",
                out,
            )


def manifest_format(directory: Path, marker: str = MANIFEST) -> str | None:
    """The ``format`` of ``directory/marker`` when it is a gnncore manifest, else None."""
    try:
        found = json.loads((directory / marker).read_text()).get("format")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return None
    return found if isinstance(found, str) else None


def check_output_dir(
    out: str | os.PathLike[str],
    inputs: list[Path],
    format_name: str,
    what: str,
    *,
    overwrite: bool | None = None,
    marker: str = MANIFEST,
) -> None:
    """The output guard of every command that writes a directory.

    Cleans what a killed earlier writer of ``out`` left (:func:`recover_output`),
    then refuses ``out`` when replacing it could destroy data: one of ``inputs``
    or a directory holding one, the current or home directory (or an ancestor),
    an existing file, or a non-empty directory whose ``marker`` (the manifest) is
    not of ``format_name`` (a ``what``). ``overwrite`` (default: what
    :func:`overwrite_allowed` set) lifts only the last refusal.

    Raises:
        InputError: Naming ``out`` and the reason, in one line.
    """
    out = Path(out)
    refuse_unsafe_target(out, inputs)
    target = out.resolve()
    recover_output(target)
    if not target.exists():
        return
    if not target.is_dir():
        raise InputError(
            f"exists and is not a directory: refusing to replace it with a {what}", out
        )
    if overwrite is None:
        overwrite = _OVERWRITE.get()
    if overwrite or not any(target.iterdir()):
        return
    if manifest_format(target, marker) != format_name:
        raise InputError(
            f"exists, is not empty and holds no {what}: refusing to replace it "
            "(choose another directory, or pass --overwrite to replace it)",
            out,
        )


def output_record(path: Path) -> Path:
    """The hidden record beside a single-file output that says gnncore wrote it."""
    return path.parent / f".{path.name}.gnncore.json"


def write_output_record(path: Path, format_name: str) -> None:
    """Record that ``path`` (just written) is a ``format_name`` output: its size and
    modification time, so that a later run can tell the file was not changed since."""
    stat = path.stat()
    record = {"format": format_name, "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    tmp = output_record(path).with_name(temporary_name(output_record(path), "tmp"))
    tmp.write_text(json.dumps(record) + "\n")
    os.replace(tmp, output_record(path))


def check_output_file(
    out: str | os.PathLike[str],
    inputs: list[Path],
    format_name: str,
    what: str,
    *,
    overwrite: bool | None = None,
) -> None:
    """The output guard of a command that writes one file (``gnncore synth --layout csv``).

    Refuses what :func:`refuse_unsafe_target` refuses, an existing directory, and an
    existing file unless its record (:func:`write_output_record`) shows this kind of
    command wrote it and it has not changed since; ``overwrite`` lifts the last one.

    Raises:
        InputError: Naming ``out`` and the reason, in one line.
    """
    out = Path(out)
    refuse_unsafe_target(out, inputs)
    target = out.resolve()
    if not (target.exists() or target.is_symlink()):
        return
    if target.is_dir():
        raise InputError(f"is a directory; a {what} is one file", out)
    if overwrite is None:
        overwrite = _OVERWRITE.get()
    if overwrite:
        return
    try:
        record = json.loads(output_record(target).read_text())
        stat = target.stat()
        ours = (
            record.get("format") == format_name
            and record.get("bytes") == stat.st_size
            and record.get("mtime_ns") == stat.st_mtime_ns
        )
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        ours = False
    if not ours:
        raise InputError(
            f"exists and was not written as a {what} by gnncore (or changed since): "
            "refusing to replace it (choose another path, or pass --overwrite)",
            out,
        )
