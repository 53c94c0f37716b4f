"""The deployment's memory budget: one figure every stage sizes itself from."""

import os

import dagster as dg
from pydantic import Field

from gnncore.usage import resolve_memory_budget

#: The environment variable an empty ``budget`` reads (then ``auto``).
BUDGET_ENV = "GNNCORE_MEMORY_BUDGET"


class MemoryBudgetResource(dg.ConfigurableResource):
    """The memory a stage's process may take, for every stage of a deployment.

    ``budget`` is ``auto`` (sized from the memory the process may take when the
    stage starts: :func:`gnncore.usage.resolve_memory_budget`), ``none`` (no
    bound: stages hold what they need in memory) or a size (``3GiB``,
    ``512MiB``). Empty means ``$GNNCORE_MEMORY_BUDGET``, else ``auto``. An
    asset's own ``memory_budget`` config, where it has one and it is set, wins
    for that materialization.
    """

    budget: str = Field(
        default="",
        description="auto, none or a size such as 3GiB: the memory each stage's process "
        "may take; empty: $GNNCORE_MEMORY_BUDGET, else auto.",
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
            return resolve_memory_budget(setting)
        except ValueError as error:
            raise ValueError(f"memory budget {setting!r}: {error}") from None
