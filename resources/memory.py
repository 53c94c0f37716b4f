"""The deployment's memory budget: one figure every stage sizes itself from."""

import os

import dagster as dg
from pydantic import Field

from gnncore.usage import resolve_process_budget, start_held_sampler, stop_held_sampler

#: The environment variable an empty ``budget`` reads (then ``auto``).
BUDGET_ENV = "GNNCORE_MEMORY_BUDGET"


class MemoryBudgetResource(dg.ConfigurableResource):
    """The memory a stage's process may take, for every stage of a deployment.

    ``budget`` is ``auto`` (the memory the stage's whole process may take when
    it starts: the lower of its cgroup v1 limit and the available memory plus
    what the process holds, :func:`gnncore.usage.process_budget`), ``none`` (no
    bound: stages hold what they need in memory) or a size (``3GiB``,
    ``512MiB``). It bounds the whole process, torch and MLflow included: each
    stage takes off what the process holds at its start
    (:class:`gnncore.usage.StageBudget`) and sizes its data from the rest.
    Empty means ``$GNNCORE_MEMORY_BUDGET``, else ``auto``. An asset's own
    ``memory_budget`` config, where it has one and it is set, wins for that
    materialization.
    """

    budget: str = Field(
        default="",
        description="auto, none or a size such as 3GiB: the memory each stage's whole "
        "process may take (auto: the lower of the cgroup limit and the available memory); "
        "empty: $GNNCORE_MEMORY_BUDGET, else auto.",
    )

    def setting(self, override: str = "") -> str:
        """The budget setting in force: ``override`` when set, else this resource's."""
        chosen = override or self.budget or os.environ.get(BUDGET_ENV, "") or "auto"
        return chosen.strip()

    def budget_bytes(self, override: str = "") -> int | None:
        """The budget in bytes (``None`` for ``none``); ``ValueError`` naming the
        setting when it is not ``auto``, ``none`` or a positive size."""
        setting = self.setting(override)
        if setting.lower() == "none":
            return None
        try:
            return resolve_process_budget(setting)
        except ValueError as error:
            raise ValueError(f"memory budget {setting!r}: {error}") from None

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Start sampling what the step's process holds
        (:func:`gnncore.usage.start_held_sampler`), so that each stage's
        metadata and MLflow run report its ``peak_held_bytes`` beside its peak RSS."""
        start_held_sampler()

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        """Stop the sampling (the step's figures are reported by now)."""
        stop_held_sampler()
