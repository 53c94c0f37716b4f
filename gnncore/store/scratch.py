"""Scratch directories that a killed process does not leave behind for good.

A stage removes its scratch directory when it ends, but a process killed by
a signal (SIGKILL, the OOM killer, a memory cgroup) cannot, and at scale its
scratch (sorted runs, an evaluation's adjacency) holds gigabytes of
``$TMPDIR``. :func:`scratch_dir` names each directory for the process that owns
it, ``<prefix><pid namespace>-<pid>-<random>``, and removes the directories of
the same prefix whose owner is gone before it makes a new one: the next run of
any stage that uses the prefix reclaims what a killed one left.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from gnncore.store.atomic import pid_alive


def _namespace() -> str | None:
    """This process's pid namespace (its inode), so that a directory is never
    judged by a pid of another namespace (containers sharing a ``/tmp``)."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return None


def _owner(name: str, prefix: str) -> tuple[str, int] | None:
    """``(namespace, pid)`` of a scratch directory's name, ``None`` when it is not
    one of :func:`scratch_dir`'s."""
    fields = name[len(prefix) :].split("-", 2)
    if len(fields) != 3 or not fields[0].isdigit() or not fields[1].isdigit():
        return None
    return fields[0], int(fields[1])


def sweep_orphans(prefix: str, parent: str | os.PathLike[str] | None = None) -> list[Path]:
    """Remove the directories of :func:`scratch_dir` under ``parent`` (default
    ``$TMPDIR``) named with ``prefix`` whose process, of this pid namespace and
    this user, is gone. Returns the directories removed."""
    namespace = _namespace()
    if namespace is None:
        return []
    folder = Path(parent if parent is not None else tempfile.gettempdir())
    removed = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        owner = _owner(entry.name, prefix)
        if owner is None or owner[0] != namespace or owner[1] == os.getpid():
            continue
        try:
            mine = entry.is_dir() and not entry.is_symlink() and entry.stat().st_uid == os.getuid()
        except OSError:
            continue
        if mine and not pid_alive(owner[1]):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def scratch_dir(prefix: str, parent: str | os.PathLike[str] | None = None) -> Path:
    """A new private directory (mode 0700) under ``parent`` (default
    ``$TMPDIR``) for this process's scratch files, named
    ``<prefix><pid namespace>-<pid>-<random>``; first the directories of the
    same prefix whose process is gone are removed (:func:`sweep_orphans`). The
    caller removes its own when done, as with :func:`tempfile.mkdtemp`."""
    sweep_orphans(prefix, parent)
    namespace = _namespace() or "0"
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{namespace}-{os.getpid()}-", dir=parent))


@contextlib.contextmanager
def scratch(prefix: str, parent: str | os.PathLike[str] | None = None) -> Iterator[Path]:
    """:func:`scratch_dir` as a context: the directory is removed on exit (what
    :class:`tempfile.TemporaryDirectory` does, with the orphans of killed
    processes reclaimed)."""
    path = scratch_dir(prefix, parent)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


__all__ = ["scratch", "scratch_dir", "sweep_orphans"]
