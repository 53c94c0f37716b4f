"""gnncore.train.node.metrics: confusion matrix, accuracy and macro-F1 in torch."""

from __future__ import annotations

import pytest
import torch

from gnncore.train.node.metrics import ClassificationMetrics, accuracy, confusion_matrix, macro_f1


def test_confusion_matrix_counts_true_against_predicted() -> None:
    target = torch.tensor([0, 0, 1, 1, 2])
    pred = torch.tensor([0, 1, 1, 1, 0])
    expected = torch.tensor([[1, 1, 0], [0, 2, 0], [1, 0, 0]])
    assert torch.equal(confusion_matrix(pred, target, 3), expected)
    assert confusion_matrix(pred, target, 3).dtype == torch.int64


def test_accuracy_and_macro_f1_match_hand_computed_values() -> None:
    # class 0: tp 1, fp 1, fn 1 -> 2/4; class 1: tp 2, fp 1, fn 0 -> 4/5; class 2: tp 0 -> 0
    confusion = confusion_matrix(torch.tensor([0, 1, 1, 1, 0]), torch.tensor([0, 0, 1, 1, 2]), 3)
    assert accuracy(confusion) == pytest.approx(3 / 5)
    assert macro_f1(confusion) == pytest.approx((0.5 + 0.8 + 0.0) / 3)


def test_macro_f1_averages_only_classes_that_occur() -> None:
    # Class 3 is neither a label nor a prediction: left out, as scikit-learn does.
    confusion = confusion_matrix(torch.tensor([0, 1, 1]), torch.tensor([0, 1, 0]), 4)
    assert macro_f1(confusion) == pytest.approx((2 / 3 + 2 / 3) / 2)
    perfect = confusion_matrix(torch.tensor([2, 0, 1]), torch.tensor([2, 0, 1]), 5)
    assert accuracy(perfect) == macro_f1(perfect) == 1.0


def test_empty_and_out_of_range_inputs() -> None:
    empty = confusion_matrix(
        torch.tensor([], dtype=torch.long), torch.tensor([], dtype=torch.long), 3
    )
    assert accuracy(empty) == macro_f1(empty) == 0.0
    with pytest.raises(ValueError, match="unlabelled"):
        confusion_matrix(torch.tensor([0, 1]), torch.tensor([0, -1]), 2)


def test_metrics_from_confusion() -> None:
    metrics = ClassificationMetrics.from_confusion(torch.tensor([[3, 1], [0, 4]]))
    assert metrics.count == 8 and metrics.accuracy == pytest.approx(7 / 8)
    assert metrics.macro_f1 == pytest.approx((6 / 7 + 8 / 9) / 2)
