"""The compute device training runs on."""

import dagster as dg
from pydantic import Field


class ComputeResource(dg.ConfigurableResource):
    """Device selection: ``auto`` picks CUDA when present, else CPU."""

    device: str = Field(default="auto", description="auto, cpu, cuda or cuda:N")

    def resolve(self) -> str:
        """The concrete torch device string for this run."""
        from gnncore.train.core.device import resolve_device

        return str(resolve_device(self.device))
