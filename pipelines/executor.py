"""The code location's executor: Dagster's default (``multi_or_in_process_executor``,
the same config: ``multiprocess`` or ``in_process``), with the multiprocess steps
started from a forkserver by default instead of a fresh interpreter each.

A step process spawned fresh imports Python, Dagster and this code location again
(seconds of CPU per step); forked from a server that imported them once, it starts
in a fraction of that. Run config can still pick ``spawn`` or ``in_process``::

    execution:
      config:
        multiprocess:
          start_method:
            spawn: {}
"""

from __future__ import annotations

import multiprocessing.util
import tempfile
from typing import Any

import dagster as dg

#: The longest temporary directory whose forkserver socket path
#: (``<dir>/pymp-XXXXXXXX/listener-XXXXXXXX``) fits ``AF_UNIX``'s 107 bytes.
LONGEST_SOCKET_DIR = 70


def short_socket_dir() -> None:
    """Make multiprocessing's temporary directory (where the forkserver binds its
    Unix socket) a short one: under a long ``TMPDIR`` the bind fails with "AF_UNIX
    path too long" and no step starts; ``/tmp`` is used then. The steps' own files
    still go to ``TMPDIR`` (only multiprocessing's directory moves)."""
    if len(tempfile.gettempdir()) <= LONGEST_SOCKET_DIR:
        return
    saved = tempfile.tempdir
    tempfile.tempdir = "/tmp"
    try:
        multiprocessing.util.get_temp_dir()  # cached for this process from now on
    finally:
        tempfile.tempdir = saved


def _create_executor(init_context: Any) -> Any:
    """Dagster's own executor, once the forkserver's socket has a short path."""
    short_socket_dir()
    create = dg.multi_or_in_process_executor.executor_creation_fn
    assert create is not None  # Dagster's default executor always has one
    return create(init_context)


#: The default run config of :data:`executor`: each step forked from a server
#: that preloads the code location's module (Dagster's default preload).
FORKSERVER_DEFAULT: dict[str, Any] = {"multiprocess": {"start_method": {"forkserver": {}}}}

executor = dg.ExecutorDefinition(
    name="multi_or_in_process_executor",
    config_schema=dg.Field(
        dg.multi_or_in_process_executor.config_schema.config_type,
        default_value=FORKSERVER_DEFAULT,
    ),
    requirements=dg.multi_or_in_process_executor.get_requirements,
    executor_creation_fn=_create_executor,
    description=(
        "Dagster's default executor (multiprocess or in_process), its steps "
        "forked from a forkserver unless run config picks another start method."
    ),
)
