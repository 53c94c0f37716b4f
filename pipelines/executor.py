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

from typing import Any

import dagster as dg

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
    executor_creation_fn=dg.multi_or_in_process_executor.executor_creation_fn,
    description=(
        "Dagster's default executor (multiprocess or in_process), its steps "
        "forked from a forkserver unless run config picks another start method."
    ),
)
