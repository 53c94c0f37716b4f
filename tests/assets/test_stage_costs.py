"""The ingestion and partition assets take a memory budget from config and
report what the stage cost (phases, peak RSS, bytes) as metadata and in MLflow."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import numpy as np

from tests.assets.helpers import Materializer
from tests.assets.helpers import metadata as _metadata


def test_ingestion_budget_and_costs_reach_dagster_and_mlflow(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    source = tmp_path / "edges.csv"
    pairs = rng.integers(0, 500, (4000, 2))
    source.write_text("src,dst\n" + "".join(f"{a},{b}\n" for a, b in pairs))
    chain = Materializer(tmp_path / "root", "costs")
    resources = chain.resources

    def materialize(budget: str) -> dg.ExecuteInProcessResult:
        return chain(
            *("raw_dataset", "graph", "graph_partition"),
            config={
                "raw_dataset": {"config": {"source": str(source)}},
                "graph": {"config": {"memory_budget": budget}},
                "graph_partition": {"config": {"memory_budget": "1MiB", "parts": 2}},
            },
        )

    first = materialize("64KiB")
    meta = _metadata(first, "graph")
    assert not meta["reused"] and meta["memory_budget_bytes"] == 64 << 10
    assert "| sort/dedup |" in meta["phases"] and meta["phase_seconds/checksums"] >= 0
    assert meta["input_bytes"] == source.stat().st_size
    sizes = {p.name: p.stat().st_size for p in Path(meta["path"]).iterdir()}
    # measured as ingestion wrote it, before the lineage record grew the manifest
    assert sum(sizes.values()) - sizes["manifest.json"] < meta["output_bytes"] < sum(sizes.values())
    assert meta["peak_rss_bytes"] > 0 and "mlflow_run" in meta

    tracker = resources["mlflow"].tracker()
    (run,) = tracker.client.search_runs([tracker.experiment_id], "tags.task = 'ingest'")
    assert run.info.status == "FINISHED"
    assert run.data.params["memory_budget"] == "64KiB"
    assert run.data.metrics["num_edges"] == meta["num_edges"]
    assert "phase_seconds/sort/dedup" in run.data.metrics
    assert run.data.metrics["input_bytes"] == source.stat().st_size

    part = _metadata(first, "graph_partition")
    assert "| post-processing |" in part["phases"] and part["phase_seconds/partition"] >= 0
    assert part["output_bytes"] == sum(p.stat().st_size for p in Path(part["path"]).rglob("*"))
    assert part["command_peak_rss_bytes"] > 0
    (prun,) = tracker.client.search_runs([tracker.experiment_id], "tags.task = 'partition'")
    assert "phase_seconds/post-processing" in prun.data.metrics
    assert prun.data.metrics["output_bytes"] == part["output_bytes"]

    # The budget is not in the stage key: in memory, the same graph is reused, no new run.
    again = _metadata(materialize("none"), "graph")
    assert again["reused"] and again["path"] == meta["path"]
    assert len(tracker.client.search_runs([tracker.experiment_id], "tags.task = 'ingest'")) == 1
