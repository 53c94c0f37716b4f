"""Classification metrics from a confusion matrix, in torch (no scikit-learn).

The evaluation loop accumulates one ``[C, C]`` confusion matrix on the device
(rows: true class, columns: predicted class), so a whole split costs one
device-to-host copy; accuracy and macro-F1 are read from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def confusion_matrix(pred: torch.Tensor, target: torch.Tensor, num_classes: int) -> torch.Tensor:
    """``[num_classes, num_classes]`` int64 counts, ``[true, predicted]``.

    Raises:
        ValueError: When a label or prediction lies outside ``[0, num_classes)``
            (an unlabelled node, ``-1``, in an evaluation split, for instance).
    """
    pred, target = pred.reshape(-1).long(), target.reshape(-1).long()
    if pred.shape != target.shape:
        raise ValueError(f"pred has {pred.numel()} entries, target {target.numel()}")
    outside = (target < 0) | (target >= num_classes) | (pred < 0) | (pred >= num_classes)
    if bool(outside.any()):  # one host sync
        raise ValueError(
            f"labels and predictions must lie in [0, {num_classes}); an "
            "evaluation split holds an unlabelled or out-of-range node"
        )
    counts = torch.bincount(target * num_classes + pred, minlength=num_classes * num_classes)
    return counts.reshape(num_classes, num_classes)


def accuracy(confusion: torch.Tensor) -> float:
    """Correct predictions over all predictions (0 for an empty matrix)."""
    total = int(confusion.sum())
    return int(confusion.diagonal().sum()) / total if total else 0.0


def macro_f1(confusion: torch.Tensor) -> float:
    r"""Unweighted mean of the per-class F1 scores.

    As scikit-learn's ``f1_score(average="macro")``: the mean runs over the
    classes that occur as a label or a prediction, and a class with no true
    positives scores 0. :math:`F_1 = 2TP / (2TP + FP + FN)`.
    """
    confusion = confusion.double()
    tp = confusion.diagonal()
    fp = confusion.sum(dim=0) - tp
    fn = confusion.sum(dim=1) - tp
    denom = 2 * tp + fp + fn
    present = denom > 0
    if not bool(present.any()):
        return 0.0
    return float((2 * tp[present] / denom[present]).mean())


@dataclass(frozen=True)
class ClassificationMetrics:
    """Accuracy and macro-F1 of one split, with the number of nodes scored."""

    accuracy: float
    macro_f1: float
    count: int

    @classmethod
    def from_confusion(cls, confusion: torch.Tensor) -> ClassificationMetrics:
        confusion = confusion.cpu()
        return cls(accuracy(confusion), macro_f1(confusion), int(confusion.sum()))
