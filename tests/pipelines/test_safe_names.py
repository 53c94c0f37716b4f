"""Dagster names that become paths go through the library's one check
(:func:`gnncore.names.safe_name`): the data root's stage directories, the dataset
partition key, and the inbox sensor's run request. The old pattern ended in ``$``
and was used with ``match``, so it accepted ``'cora\\n'``."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from assets.partitions import dataset_name
from gnncore.errors import InputError
from gnncore.io.versioning.inbox import DroppedDataset
from pipelines.sensors import inbox_run_request
from resources import DataRootResource
from resources.storage import check_safe_name

BAD = ["cora\n", "../cora", "a/b", "..", ".hidden", "-x", "a\x00b", "x" * 200]


@pytest.mark.parametrize("name", BAD)
def test_check_safe_name_refuses(name: str) -> None:
    with pytest.raises(InputError, match="dataset name") as info:
        check_safe_name(name)
    assert isinstance(info.value, ValueError) and "\n" not in str(info.value)
    assert check_safe_name("cora") == "cora"


def test_stage_dir_refuses_a_trailing_newline(tmp_path: Path) -> None:
    storage = DataRootResource(root=str(tmp_path / "data"))
    assert storage.stage_dir("graphs", "cora") == tmp_path / "data" / "graphs" / "cora"
    with pytest.raises(InputError, match="graphs directory: 'cora\\\\n'"):
        storage.stage_dir("graphs", "cora\n")
    assert not (tmp_path / "data" / "graphs").exists()


def test_dataset_partition_key_with_a_newline_fails_the_run() -> None:
    context = dg.build_asset_context(partition_key="cora\n")
    with pytest.raises(dg.Failure, match="dataset partition: 'cora\\\\n' holds a control"):
        dataset_name(context)
    assert dataset_name(dg.build_asset_context(partition_key="cora")) == "cora"


def test_inbox_run_request_refuses_an_unsafe_dataset_name(tmp_path: Path) -> None:
    edges = tmp_path / "cora.csv"
    edges.write_text("src,dst\n1,2\n")
    good = inbox_run_request(DroppedDataset("cora", edges, None, "0" * 64))
    assert good.partition_key == "cora"
    with pytest.raises(InputError, match="dataset name: 'cora\\\\n'"):
        inbox_run_request(DroppedDataset("cora\n", edges, None, "0" * 64))
