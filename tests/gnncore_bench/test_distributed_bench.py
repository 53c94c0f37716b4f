"""``gnncore bench distributed`` on a tiny graph: 1 process and 2 gloo ranks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import planted_graph
from gnncore_bench.distributed import Setting, bench_distributed


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("bench")
    graph = planted_graph(root / "g", num_nodes=600, degree=8)
    out = root / "out"
    result = bench_distributed(
        graph,
        out,
        nproc=(1, 2),
        partitioners=("random", "metis"),
        settings=[Setting("2-layer", (5, 5), 64, "train")],
        epochs=1,
        work_dir=root / "work",
        timeout=300,
    )
    return out, result


def test_json_and_markdown(bench: tuple[Path, dict]) -> None:
    out, result = bench
    saved = json.loads((out / "distributed.json").read_text())
    assert "markdown" not in saved and saved["configs"] == json.loads(json.dumps(result["configs"]))
    configs = {(c["partitioner"], c["nproc"]): c for c in saved["configs"]}
    assert set(configs) == {("single", 1), ("random", 2), ("metis", 2)}
    for (_method, n), c in configs.items():
        assert c["status"] == "ok", c.get("error")
        assert c["epochs_run"] == 1 and c["epoch_s"] > 0
        assert len(c["peak_rss_mb"]) == n and all(100 < mb < 8000 for mb in c["peak_rss_mb"])
        assert all(r["rank_data_bytes"] > 0 for r in c["per_rank"])
        assert 0.5 < c["test_accuracy"] <= 1.0
        assert c["remote_bytes_per_epoch"] >= c["remote_rows_per_epoch"] * 16 * 4
        assert c["local_rows_per_epoch"] > 0
    # One process fetches nothing; two ranks do, and METIS less than random.
    assert configs["single", 1]["remote_rows_per_epoch"] == 0
    assert configs["single", 1]["remote_share"] == 0
    random_rows = configs["random", 2]["remote_rows_per_epoch"]
    metis_rows = configs["metis", 2]["remote_rows_per_epoch"]
    assert random_rows > 0 and metis_rows > 0
    assert 0 < configs["metis", 2]["remote_share"] < configs["random", 2]["remote_share"] < 1
    assert configs["metis", 2]["remote_rows_vs_random"] == pytest.approx(metis_rows / random_rows)
    assert saved["remote_rows_vs_random"]["2-layer"]["metis_p2"] == pytest.approx(
        metis_rows / random_rows
    )
    markdown = (out / "distributed.md").read_text()
    assert "| metis | 2 |" in markdown and "| single | 1 |" in markdown


@pytest.fixture(scope="module")
def sampled(bench: tuple[Path, dict], tmp_path_factory: pytest.TempPathFactory) -> dict:
    """``sample`` mode on the same graph and partitions: METIS at 2 ranks, without
    and with an HDR plan of 10% (``metis`` and ``metis+hdr``)."""
    out, result = bench
    return bench_distributed(
        result["graph_dir"],
        tmp_path_factory.mktemp("sampled"),
        nproc=(2,),
        partitioners=("metis",),
        settings=[Setting("2-layer", (5, 5), 64, "sample")],
        epochs=1,
        work_dir=out.parent / "work",
        timeout=300,
        replication_rate=0.1,
    )


def test_sample_mode_draws_the_training_batches(bench: tuple[Path, dict], sampled: dict) -> None:
    """``sample`` gathers exactly the rows that epoch 1 of training gathered."""
    _, result = bench
    trained = next(c for c in result["configs"] if c["partitioner"] == "metis" and c["nproc"] == 2)
    (c,) = [c for c in sampled["configs"] if c["partitioner"] == "metis"]
    assert c["status"] == "ok", c.get("error")
    assert c["test_accuracy"] is None and c["compute_s"] is None
    assert c["remote_rows_per_epoch"] == trained["remote_rows_epoch1"]
    assert c["remote_bytes_per_epoch"] == trained["per_epoch"][0]["remote_bytes"]
    assert "sampling and feature gathering only" in sampled["markdown"]


def test_bad_arguments(tmp_path: Path) -> None:
    graph = planted_graph(tmp_path / "g", num_nodes=100)
    with pytest.raises(ValueError, match="unknown partitioners"):
        bench_distributed(graph, tmp_path / "out", partitioners=("nope",))
    with pytest.raises(ValueError, match="mode"):
        Setting("x", (5,), 10, "fly")


def test_hdr_replicas_turn_remote_rows_local(sampled: dict) -> None:
    """With an HDR plan the same batches gather the same rows, fewer of them remote."""
    configs = {c["partitioner"]: c for c in sampled["configs"]}
    assert set(configs) == {"metis", "metis+hdr"}
    plain, hdr = configs["metis"], configs["metis+hdr"]
    assert plain["status"] == hdr["status"] == "ok", hdr.get("error")
    rows = plain["remote_rows_per_epoch"] + plain["local_rows_per_epoch"]
    assert hdr["remote_rows_per_epoch"] + hdr["local_rows_per_epoch"] == rows
    assert 0 < hdr["remote_rows_per_epoch"] < plain["remote_rows_per_epoch"]
    assert "| metis+hdr | 2 |" in sampled["markdown"]
