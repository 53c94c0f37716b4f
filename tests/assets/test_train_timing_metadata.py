"""The trained_model asset's timing metadata: where the training epochs' time went."""

from __future__ import annotations

import pytest

from assets.train_metadata import timing_metadata


def _epoch(train: float, wait: float, sample: float, compute: float, **more: float) -> dict:
    return {
        "train_s": train,
        "wait_s": wait,
        "stall_fraction": wait / train,
        "sample_s": sample,
        "transfer_s": 0.0,
        "compute_s": compute,
        "batches": 4.0,
        **more,
    }


def test_stall_is_summed_over_the_epochs_with_one_table_row_per_epoch() -> None:
    epochs = [_epoch(2.0, 0.5, 0.6, 1.4), _epoch(3.0, 0.1, 0.9, 2.8)]
    out = timing_metadata(epochs)
    assert out["stall_s"] == {"raw_value": pytest.approx(0.6), "type": "float"}
    assert out["stall_fraction"]["raw_value"] == pytest.approx(0.6 / 5.0)
    table = out["epoch_timing"]
    assert table["type"] == "md"
    lines = table["raw_value"].splitlines()
    assert "exchange" not in lines[0] and "stall s" in lines[0]
    assert lines[2] == "| 1 | 2.00 | 0.50 | 25.0 | 0.60 | 1.40 |"
    assert lines[3] == "| 2 | 3.00 | 0.10 | 3.3 | 0.90 | 2.80 |"


def test_distributed_epochs_add_the_exchange_column() -> None:
    epochs = [_epoch(2.0, 1.0, 0.4, 0.9, dist_exchange_s=0.55)]
    out = timing_metadata(epochs)
    head, rule, row = out["epoch_timing"]["raw_value"].splitlines()
    assert "exchange s" in head and rule.count("---") == 7
    assert row == "| 1 | 2.00 | 1.00 | 50.0 | 0.40 | 0.55 | 0.90 |"


def test_epochs_recorded_before_stall_fraction_existed_still_report() -> None:
    old = {"train_s": 1.0, "wait_s": 0.25, "sample_s": 0.3, "compute_s": 0.7}
    out = timing_metadata([old])
    assert out["stall_fraction"]["raw_value"] == pytest.approx(0.25)
