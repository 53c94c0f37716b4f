"""What a partitioning reports: :class:`PartitionReport` (the CLI's JSON, the
Dagster metadata, the MLflow run) and its part-size chart."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gnncore.partition.methods import registered_settings
from gnncore.partition.metrics import PartitionMetrics
from gnncore.partition.store import PartitionDir
from gnncore.plots import bar_chart_png
from gnncore.usage import budget_figures


@dataclass
class PartitionReport:
    """What ``gnncore partition`` reports (the CLI contract's JSON keys)."""

    method: str
    parts: int
    seed: int
    out_dir: str
    seconds: float
    peak_rss_bytes: int
    metrics: PartitionMetrics
    params: dict[str, Any]
    halo_sizes: list[int] = field(default_factory=list)
    balancing: dict[str, Any] | None = None
    run_id: str | None = None
    stage_key: str = ""
    reused: bool = False
    command_peak_rss_bytes: int | None = None
    postprocess_seconds: float | None = None
    #: seconds of ``partition`` (the method), ``split balancing`` and
    #: ``post-processing`` (metrics, relabelling, halos, writing)
    phases: dict[str, float] = field(default_factory=dict)
    #: bytes the command read from and wrote to storage (``/proc/self/io``)
    storage_read_bytes: int | None = None
    storage_written_bytes: int | None = None
    #: size of the partition directory written
    output_bytes: int | None = None
    #: the memory budget it ran under: the setting (``auto``, ``none`` or a
    #: size) and its bytes (``None``: not recorded, e.g. a reused partition)
    memory_budget: str | None = None
    memory_budget_bytes: int | None = None

    @property
    def peak_rss_of_budget(self) -> float | None:
        """The command's peak RSS (the method's when that is all that is known)
        as a fraction of :attr:`memory_budget_bytes`; above 1 the process went
        past it (:func:`gnncore.usage.budget_figures`). ``None`` without a budget."""
        peak = self.command_peak_rss_bytes or self.peak_rss_bytes
        return budget_figures(peak, self.memory_budget_bytes).get("peak_rss_of_budget")

    def budget_figures(self) -> dict[str, Any]:
        """``memory_budget`` (the setting), ``memory_budget_bytes`` and
        ``peak_rss_of_budget``, the names the training run and the plans use;
        the last two only with a budget in bytes; empty when none was recorded."""
        out: dict[str, Any] = {}
        if self.memory_budget is not None:
            out["memory_budget"] = self.memory_budget
        if self.memory_budget_bytes is not None:
            out["memory_budget_bytes"] = self.memory_budget_bytes
            out["peak_rss_of_budget"] = self.peak_rss_of_budget
        return out

    @classmethod
    def from_dir(cls, partition: PartitionDir) -> PartitionReport:
        """The report a partition directory records (``reused=True``)."""
        info = partition.info
        names = registered_settings(partition.method)
        return cls(
            partition.method,
            partition.parts,
            int(info["seed"]),
            str(partition.path),
            float(info["seconds"]),
            int(info["peak_rss_bytes"]),
            PartitionMetrics(**info["metrics"]),
            {name: info[name] for name in names if name in info},
            halo_sizes=list(info.get("halo_sizes", [])),
            balancing=info.get("split_balancing"),
            run_id=info.get("mlflow_run_id"),
            stage_key=str(info.get("stage_key", "")),
            reused=True,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "parts": self.parts,
            "seed": self.seed,
            **self.params,
            "out_dir": self.out_dir,
            "edge_cut_fraction": self.metrics.edge_cut_fraction,
            "max_part_ratio": self.metrics.max_part_ratio,
            "split_balance": self.metrics.split_balance,
            "seconds": self.seconds,
            "peak_rss_bytes": self.peak_rss_bytes,
            "command_peak_rss_bytes": self.command_peak_rss_bytes,
            "postprocess_seconds": self.postprocess_seconds,
            "phases": self.phases,
            "storage_read_bytes": self.storage_read_bytes,
            "storage_written_bytes": self.storage_written_bytes,
            "output_bytes": self.output_bytes,
            "halo_sizes": self.halo_sizes,
            "split_balancing": self.balancing,
            "stage_key": self.stage_key,
            "reused": self.reused,
            **self.budget_figures(),
            **({"mlflow_run_id": self.run_id} if self.run_id else {}),
        }


def part_size_chart(report: PartitionReport) -> bytes:
    """PNG bar chart of the part sizes against the balanced size N/p."""
    m = report.metrics
    return bar_chart_png(
        m.part_sizes,
        f"{report.method} p={report.parts}: nodes per part",
        "part",
        "nodes",
        reference=m.num_nodes / report.parts,
    )


__all__ = ["PartitionReport", "part_size_chart"]
