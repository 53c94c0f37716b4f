"""What both simulators share: argument checks, the training ids and the
read-only count arrays they return."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def frozen(array: np.ndarray) -> np.ndarray:
    """``array`` as a read-only int64 array (the results are immutable)."""
    out = np.array(array, dtype=np.int64)
    out.flags.writeable = False
    return out


def check_batch_args(batch_size: int, epochs: int, seed: int) -> None:
    """Raise ``ValueError`` for a batch size or epoch count below 1 or a negative seed."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")


def train_ids(train_nodes: np.ndarray, num_nodes: int) -> np.ndarray:
    """The training nodes, de-duplicated and sorted; raises for ids out of range."""
    train = np.unique(np.asarray(train_nodes, dtype=np.int64))
    if len(train) and (train[0] < 0 or train[-1] >= num_nodes):
        raise ValueError(f"train_nodes must be node ids in [0, {num_nodes})")
    return train


def padded(counts: Sequence[int], length: int) -> np.ndarray:
    """``counts`` as int64, cut or padded with zeros to ``length``."""
    out = np.zeros(length, dtype=np.int64)
    values = np.asarray(counts, dtype=np.int64)[:length]
    out[: len(values)] = values
    return out


def owner_labels(owner: np.ndarray, num_nodes: int, parts: int | None) -> tuple[np.ndarray, int]:
    """``owner`` as int64 labels and the part count (``parts``, else the largest
    label plus one); raises ``ValueError`` for a wrong shape or labels."""
    labels = np.asarray(owner)
    if labels.shape != (num_nodes,):
        raise ValueError(f"owner must have shape [{num_nodes}], got {list(labels.shape)}")
    labels = labels.astype(np.int64, copy=False)
    found = int(labels.max()) + 1 if num_nodes else 0
    if num_nodes and labels.min() < 0:
        raise ValueError("owner labels must be >= 0")
    count = found if parts is None else int(parts)
    if count < 1 or found > count:
        raise ValueError(f"parts must be >= 1 and above every owner label, got {parts}")
    return labels, count
