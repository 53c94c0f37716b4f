"""Starting :mod:`multiprocessing`'s fork server where its socket fits.

The fork server listens on a Unix socket in multiprocessing's temporary
directory (``<TMPDIR>/pymp-XXXXXXXX/listener-XXXXXXXX``); under a long
``TMPDIR`` its path passes ``AF_UNIX``'s 107 bytes, the bind fails ("AF_UNIX
path too long") and no process starts. Both users of the fork server, the
code location's step executor and the rank launchers
(:func:`~gnncore.distributed.launch.forked.rank_context`), call
:func:`short_socket_dir` first.

Where an NVIDIA GPU is (:func:`nvidia_gpu_present`), neither forks: a server
that preloads torch and PyG may touch the CUDA driver (on an H200 with torch
2.11 it did), and every process forked from it then fails at its first CUDA
call with "CUDA error: initialization error".
"""

from __future__ import annotations

import multiprocessing.util
import os
import tempfile

#: The longest temporary directory whose fork server socket path
#: (``<dir>/pymp-XXXXXXXX/listener-XXXXXXXX``) fits ``AF_UNIX``'s 107 bytes.
LONGEST_SOCKET_DIR = 70


def short_socket_dir() -> None:
    """Make multiprocessing's temporary directory (where the fork server binds its
    Unix socket) a short one, ``/tmp``, when ``TMPDIR`` is too long for the
    socket. Everything else still goes to ``TMPDIR`` (only multiprocessing's own
    directory moves, for this process)."""
    if len(tempfile.gettempdir()) <= LONGEST_SOCKET_DIR:
        return
    saved = tempfile.tempdir
    tempfile.tempdir = "/tmp"
    try:
        multiprocessing.util.get_temp_dir()  # cached for this process from now on
    finally:
        tempfile.tempdir = saved


#: Device files that exist where the NVIDIA driver runs a GPU.
NVIDIA_DEVICE_FILES = ("/dev/nvidiactl", "/dev/nvidia0")


def nvidia_gpu_present() -> bool:
    """Whether this machine has an NVIDIA GPU with its driver loaded: one of
    :data:`NVIDIA_DEVICE_FILES` exists (no torch import, no CUDA call: safe in
    the webserver and before any fork)."""
    return any(os.path.exists(path) for path in NVIDIA_DEVICE_FILES)


__all__ = ["LONGEST_SOCKET_DIR", "NVIDIA_DEVICE_FILES", "nvidia_gpu_present", "short_socket_dir"]
