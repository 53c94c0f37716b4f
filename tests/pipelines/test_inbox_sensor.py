"""The inbox sensor evaluated with build_sensor_context: one run per new or
changed dataset, of the dataset's partition (added in the same tick), none for
unchanged bytes, the task picked from the data."""

from __future__ import annotations

import os
import time
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from pipelines.definitions import defs
from pipelines.sensors import inbox_sensor
from resources import DataRootResource

SENSOR = inbox_sensor(
    settle_seconds=0, run_config={"ops": {"graph_partition": {"config": {"parts": 2}}}}
)


def tick(tmp_path: Path, cursor: str | None) -> dg.SensorResult:
    storage = DataRootResource(root=str(tmp_path / "data"), inbox=str(tmp_path / "inbox"))
    context = dg.build_sensor_context(cursor=cursor, resources={"storage": storage})
    result = SENSOR(context)
    assert isinstance(result, dg.SensorResult)
    return result


def drop(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(text)
    then = time.time() - 5
    os.utime(path, (then, then))
    return path


def test_new_changed_and_unchanged_files(tmp_path):
    inbox = tmp_path / "inbox"
    first = tick(tmp_path, None)
    assert not first.run_requests and "no new or changed dataset" in str(first.skip_reason)

    drop(inbox, "karate.csv", "src,dst\na,b\nb,c\n")
    pl.DataFrame(
        {"node_id": ["a", "b", "c"], "label": ["x", "y", "x"], "f": [1.0, 2.0, 3.0]}
    ).write_parquet(inbox / "karate.nodes.parquet")
    os.utime(inbox / "karate.nodes.parquet", (time.time() - 5, time.time() - 5))
    drop(inbox, "roads.tsv", "1\t2\n2\t3\n")
    second = tick(tmp_path, first.cursor)
    requests = {r.tags["gnncore/dataset"]: r for r in second.run_requests or []}
    assert set(requests) == {"karate", "roads"}
    # One dataset partition per file, keyed by the dataset name, added by the same tick.
    assert {name: r.partition_key for name, r in requests.items()} == {
        "karate": "karate",
        "roads": "roads",
    }
    (added,) = second.dynamic_partitions_requests or []
    assert isinstance(added, dg.AddDynamicPartitionsRequest)
    assert added.partitions_def_name == "dataset"
    assert sorted(added.partition_keys) == ["karate", "roads"]
    karate = requests["karate"].run_config["ops"]
    assert karate["raw_dataset"]["config"] == {
        "source": str(inbox / "karate.csv"),
        "nodes": str(inbox / "karate.nodes.parquet"),
        "standardize_features": True,  # a feature column 'f' beside the label
    }
    assert karate["trained_model"]["config"]["task"] == "node"  # labelled node table
    roads = requests["roads"].run_config["ops"]["raw_dataset"]["config"]
    assert roads["standardize_features"] is False  # no node table
    assert karate["graph_partition"]["config"]["parts"] == 2  # the base config stays
    assert requests["roads"].run_config["ops"]["trained_model"]["config"]["task"] == "link"
    job = defs.resolve_job_def("train_job")
    for request in requests.values():
        assert dg.validate_run_config(job, request.run_config)

    # The same bytes again (a copy over the file) start nothing ...
    drop(inbox, "roads.tsv", "1\t2\n2\t3\n")
    third = tick(tmp_path, second.cursor)
    assert not third.run_requests
    # ... changed bytes start a new run with a new run key.
    drop(inbox, "roads.tsv", "1\t2\n2\t3\n3\t4\n")
    fourth = tick(tmp_path, third.cursor)
    (request,) = fourth.run_requests or []
    assert request.tags["gnncore/dataset"] == "roads" and request.partition_key == "roads"
    assert request.run_key != requests["roads"].run_key
    assert [r.partition_keys for r in fourth.dynamic_partitions_requests or []] == [["roads"]]


def test_problems_do_not_stop_the_sensor(tmp_path):
    inbox = tmp_path / "inbox"
    drop(inbox, "a.csv", "x,y\n")
    drop(inbox, "a.tsv", "x\ty\n")  # two files, one dataset name
    drop(inbox, "b.csv", "x,y\n")
    drop(inbox, "b.nodes.csv", "node_id,label\n")  # header only: readable, labelled
    result = tick(tmp_path, None)
    assert [r.tags["gnncore/dataset"] for r in result.run_requests or []] == ["b"]
    assert [r.partition_keys for r in result.dynamic_partitions_requests or []] == [["b"]]


def test_nothing_new_adds_no_partition(tmp_path):
    result = tick(tmp_path, None)
    assert not result.run_requests and not result.dynamic_partitions_requests


def test_the_code_location_runs_the_sensor_by_default():
    sensor = defs.resolve_sensor_def("inbox_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert sensor.job_name == "train_job"


def test_the_code_locations_timing_comes_from_the_environment():
    from pipelines.sensors import INTERVAL_ENV, SETTLE_ENV, inbox_timing

    assert inbox_timing({}) == {}
    assert inbox_timing({INTERVAL_ENV: " 5 ", SETTLE_ENV: "1.5"}) == {
        "minimum_interval_seconds": 5,
        "settle_seconds": 1.5,
    }
    assert inbox_timing({SETTLE_ENV: "0"}) == {"settle_seconds": 0.0}
    for bad in ({INTERVAL_ENV: "0"}, {INTERVAL_ENV: "2.5"}, {SETTLE_ENV: "-1"},
                {SETTLE_ENV: "soon"}, {SETTLE_ENV: "nan"}):  # fmt: skip
        with pytest.raises(ValueError) as refused:
            inbox_timing(bad)
        (name,) = bad
        assert str(refused.value).startswith(f"{name}=")
    assert defs.resolve_sensor_def("inbox_sensor").minimum_interval_seconds == 30
