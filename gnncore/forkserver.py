"""Starting :mod:`multiprocessing`'s fork server where its socket fits.

The fork server listens on a Unix socket in multiprocessing's temporary
directory (``<TMPDIR>/pymp-XXXXXXXX/listener-XXXXXXXX``); under a long
``TMPDIR`` its path passes ``AF_UNIX``'s 107 bytes, the bind fails ("AF_UNIX
path too long") and no process starts. Both users of the fork server, the
code location's step executor and the rank launchers
(:func:`~gnncore.distributed.launch.forked.rank_context`), call
:func:`short_socket_dir` first.
"""

from __future__ import annotations

import multiprocessing.util
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


__all__ = ["LONGEST_SOCKET_DIR", "short_socket_dir"]
