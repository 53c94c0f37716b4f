"""``gnncore bench chain``'s generator options: communities and the intra-community share."""

from __future__ import annotations

from pathlib import Path

import pytest

from gnncore.cli.main import main
from gnncore_bench.chain import bench_chain, run_config
from gnncore_bench.chain_report import to_markdown


def test_the_verb_passes_the_communities_to_the_generator_and_refuses_bad_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """8 classes x 50 communities on 100 nodes cannot be planted: the generator's
    own check refuses it, through the verb, before anything is written."""
    work = tmp_path / "work"
    args = ["bench", "chain", "--work", str(work), "--nodes", "100", "--limit", "none"]
    assert main(args + ["--communities-per-class", "50"]) != 0
    assert "num_nodes must be [400" in capsys.readouterr().err  # 8 classes x 50
    assert not work.exists()
    with pytest.raises(ValueError, match="intra_fraction"):
        bench_chain(tmp_path / "w2", 100, 4, 4, None, intra_fraction=1.5)
    assert not (tmp_path / "w2").exists()


def test_the_table_states_the_planted_communities() -> None:
    report = {
        "nodes": 1000,
        "avg_degree": 10,
        "features": 8,
        "feature_bytes": 32000,
        "communities_per_class": 64,
        "intra_fraction": 0.95,
        "limit_bytes": None,
        "disk_needed_estimate_bytes": 1 << 20,
        "machine": {"cpus": 2, "memory_bytes": 1 << 34},
        "load_average_before": [0.5, 0.5, 0.5],
        "stages": [],
    }
    assert "64 communities per class, 95% of edges inside one" in to_markdown(report)


def test_the_run_config_is_valid_for_the_train_job_and_carries_the_hidden_width() -> None:
    """The config the harness hands Dagster passes the real job's schema, with the
    hidden width set only when given."""
    import dagster as dg

    from pipelines.definitions import defs

    job = defs.resolve_job_def("train_job")
    for hidden in (None, 64):
        config = run_config("grem", 8, 512, hidden)
        config["ops"]["raw_dataset"]["config"].update(source="edges.csv", nodes="nodes.parquet")
        assert dg.validate_run_config(job, config)
        node = config["ops"]["trained_model"]["config"]["node"]
        assert node.get("hidden") == hidden and node["batch_size"] == 512
