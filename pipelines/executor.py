"""The code location's executor: Dagster's default (``multi_or_in_process_executor``,
the same config: ``multiprocess`` or ``in_process``), with the multiprocess steps
started from a forkserver by default instead of a fresh interpreter each.

A step process spawned fresh imports Python, Dagster and this code location again
(seconds of CPU per step); forked from a server that imported them once, and torch,
PyG and MLflow with them (:data:`PRELOAD_MODULES`), it starts in a fraction of that.
The preloaded libraries are shared, not copied, but every step's RSS counts them,
so under a tight memory budget a step that needs none of them (ingestion,
partitioning, the store) sizes its buffers from about 430 MiB less; run config
can preload the code location alone (``forkserver: {preload_modules:
[pipelines.definitions]}``) or pick ``spawn`` or ``in_process``. On a machine
with an NVIDIA GPU the default is ``spawn``: a step forked from a server that
preloaded torch cannot use CUDA (:mod:`gnncore.forkserver`)::

    execution:
      config:
        multiprocess:
          start_method:
            spawn: {}
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from gnncore.forkserver import nvidia_gpu_present, short_socket_dir


def _create_executor(init_context: Any) -> Any:
    """Dagster's own executor, once the forkserver's socket has a short path."""
    short_socket_dir()
    create = dg.multi_or_in_process_executor.executor_creation_fn
    assert create is not None  # Dagster's default executor always has one
    return create(init_context)


#: What the forkserver imports once for every step it forks: the code location
#: (Dagster's own default preload) and the heavy libraries the training,
#: evaluation and tracking steps import (torch through PyG, MLflow), which the
#: code location leaves out so that the webserver and the daemon stay light. A
#: 14-step ``train_job`` on 1,200 nodes (2 epochs, load 5.6) took 109 s with the
#: code location alone preloaded and 61 s with these: each step process had
#: imported MLflow (2.6 s CPU) and PyG with torch (6.6 s CPU) again. Then what
#: every step still imported after its fork: Dagster's instance storage (every
#: step opens the instance: SQLAlchemy, 1.0 s CPU), MLflow's database store (the
#: tracked steps, 0.7 s) and Matplotlib's figures (the plotted ones, 0.9 s).
PRELOAD_MODULES: list[str] = [
    "pipelines.definitions",
    "torch_geometric",
    "mlflow",
    "dagster._core.storage.sqlite_storage",
    "mlflow.store.tracking.sqlalchemy_store",
    "matplotlib.figure",
    "matplotlib.backends.backend_agg",
]

#: The default run config of :data:`executor`: each step forked from a server
#: that preloads :data:`PRELOAD_MODULES`.
FORKSERVER_DEFAULT: dict[str, Any] = {
    "multiprocess": {"start_method": {"forkserver": {"preload_modules": PRELOAD_MODULES}}}
}

#: The default run config where an NVIDIA GPU is: fresh step processes.
SPAWN_DEFAULT: dict[str, Any] = {"multiprocess": {"start_method": {"spawn": {}}}}


def default_execution() -> dict[str, Any]:
    """:data:`SPAWN_DEFAULT` on a machine with an NVIDIA GPU, else
    :data:`FORKSERVER_DEFAULT`."""
    return SPAWN_DEFAULT if nvidia_gpu_present() else FORKSERVER_DEFAULT


executor = dg.ExecutorDefinition(
    name="multi_or_in_process_executor",
    config_schema=dg.Field(
        dg.multi_or_in_process_executor.config_schema.config_type,
        default_value=default_execution(),
    ),
    requirements=dg.multi_or_in_process_executor.get_requirements,
    executor_creation_fn=_create_executor,
    description=(
        "Dagster's default executor (multiprocess or in_process), its steps "
        "forked from a forkserver (spawned where an NVIDIA GPU is) unless run config "
        "picks another start method."
    ),
)
