"""Ranks forked from :mod:`multiprocessing`'s fork server, for both launchers.

The fork server imports what every rank imports (:data:`RANK_PRELOAD`: torch
and PyG) once, when this process starts its first ranks; a spawned interpreter
would import them again in every rank (about 8 CPU seconds each). The fork
server runs nothing but imports (no thread pool, no CUDA), so forking from it
is safe. It is started once per process, with that moment's environment and
output, so a forked rank first takes the launching process's own
(:func:`take_launcher`): its environment, its thread count and its standard
output and error as they are now, as a spawned rank would have them.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import sys
from dataclasses import dataclass
from multiprocessing import forkserver, reduction
from typing import Any

from gnncore.forkserver import nvidia_gpu_present, short_socket_dir
from gnncore.heap import libc_function

#: Imported once by the fork server the ranks fork from: the heavy packages every
#: rank imports, and the rank's own code. Not MLflow: only rank 0 of a tracked run
#: imports it (3-4 CPU s once a launch), and every rank would hold its 119 MiB.
RANK_PRELOAD = ("torch.distributed", "torch_geometric", "gnncore.distributed.rank")

#: The process name a rank shows in ``ps``, ``top`` and ``/proc/<pid>/comm``.
RANK_NAME = "gnncore-rank{rank}"

_PR_SET_NAME = 15


def rank_start_method(cuda: bool) -> str:
    """How ranks start: forked from the fork server, or as fresh interpreters
    (``spawn``) when they use CUDA or the machine has a GPU. A process forked
    from one that has touched the CUDA driver cannot use it ("CUDA error:
    initialization error"), and on an H200 with its image's torch (2.11) and
    PyG both failed that way: CUDA ranks at their first device call, and CPU
    ranks too, since Adam's step asks CUDA whether a graph is being captured
    whenever a GPU is present. Ranks on such a machine pay their own imports."""
    return "spawn" if cuda or nvidia_gpu_present() else "forkserver"


def rank_context(cuda: bool = False) -> Any:
    """The ranks' :mod:`multiprocessing` context (:func:`rank_start_method`):
    the fork server's, with its preload set (it takes effect when this process
    starts its fork server, at its first ranks), or ``spawn``'s where a GPU is."""
    if rank_start_method(cuda) == "spawn":
        return mp.get_context("spawn")
    short_socket_dir()
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(RANK_PRELOAD))
    return ctx


def start_rank_server() -> None:
    """Start the fork server that the ranks of both launchers fork from now,
    rather than at the first launch."""
    rank_context()
    forkserver.ensure_running()


@dataclass
class Launcher:
    """What a forked rank takes from the process that launched it: made there
    (:meth:`here`) and pickled to each rank with its arguments. Its output
    descriptors (1 and 2) are taken when it is pickled for a rank, so they travel
    through the fork server's socket to that rank alone; ``None`` until then."""

    environ: dict[str, str]
    stdout: Any = None
    stderr: Any = None

    @classmethod
    def here(cls) -> Launcher:
        return cls(dict(os.environ))

    def __reduce__(self) -> tuple[Any, ...]:
        return (Launcher, (self.environ, reduction.DupFd(1), reduction.DupFd(2)))


def take_launcher(launcher: Launcher, keep: dict[str, str] | None = None) -> None:
    """Run with the launching process's environment (plus ``keep``: what the
    launcher set for this rank alone), its thread count (which the OpenMP
    runtime read when the fork server loaded torch), and its standard output and
    error, line-buffered: each line one write, whole even when several ranks
    share the launcher's terminal or file."""
    os.environ.clear()
    os.environ.update(launcher.environ)
    os.environ.update(keep or {})
    sys.stdout.flush()
    sys.stderr.flush()
    for target, given in ((1, launcher.stdout), (2, launcher.stderr)):
        if given is None:  # not pickled: the launching process itself
            continue
        fd = given.detach()
        os.dup2(fd, target)
        os.close(fd)
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True, write_through=False)
    threads = launcher.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        import torch  # lazy: torch loads in seconds; only the rank processes need it

        torch.set_num_threads(int(threads))


def name_rank(rank: int) -> None:
    """Name this process for ``ps`` and ``top`` (:data:`RANK_NAME`); forked
    ranks would all show the fork server's ``python`` otherwise."""
    prctl = libc_function("prctl") if sys.platform.startswith("linux") else None
    if prctl is None:
        return
    name = RANK_NAME.format(rank=rank).encode()[:15]
    prctl(_PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)


__all__ = [
    "RANK_NAME",
    "RANK_PRELOAD",
    "Launcher",
    "name_rank",
    "rank_context",
    "start_rank_server",
    "take_launcher",
]
