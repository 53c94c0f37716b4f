"""fit drives any Task: a toy regression task trains, stops early, checkpoints and
resumes exactly through the same loop the node and link tasks use."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch

from gnncore.store.feature_store import TensorFeatureStore
from gnncore.train import ConfigError, NodeTrainConfig, RunHooks, Task, fit
from gnncore.train.core.session import EpochProgress, Outcome
from gnncore.train.fitting import Built, Measures

CONFIG = NodeTrainConfig(epochs=4, patience=0, lr=0.05, device="cpu", seed=3)


class ShuffledRows:
    """A BatchSource of ``(x, y)`` row batches, reshuffled every epoch."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, batch_size: int, seed: int) -> None:
        self.x, self.y, self.batch_size = x, y, batch_size
        self.generator = torch.Generator().manual_seed(seed)
        self.feature_store = TensorFeatureStore({"x": x})

    def __len__(self) -> int:
        return -(-len(self.x) // self.batch_size)

    def start_epoch(self, epoch: int) -> None:
        pass

    def end_epoch(self, epoch: int) -> None:
        pass

    @contextlib.contextmanager
    def batches(self) -> Iterator[Iterator[Any]]:
        order = torch.randperm(len(self.x), generator=self.generator)
        yield iter((self.x[i], self.y[i]) for i in order.split(self.batch_size))

    def random_state(self) -> tuple[torch.Generator, dict[str, Any]]:
        return self.generator, {}


@dataclass
class ToyProgress(EpochProgress):
    val_error: list[float] = field(default_factory=list)
    best_val_error: float = float("inf")

    def record(self, epoch: int, loss: float, metrics: Any, throughput: Any, model: Any) -> None:
        improved = metrics < self.best_val_error
        self.val_error.append(metrics)
        self.best_val_error = min(self.best_val_error, metrics)
        self.advance(epoch, loss, throughput, improved, model)

    def epoch_metrics(self, epoch: int) -> dict[str, float]:
        return {"train_loss": self.train_loss[epoch - 1], "val_error": self.val_error[epoch - 1]}


class ToyTask(Task[dict[str, Any]]):
    """Least squares on 4 features, validated and tested on held-out rows."""

    name: ClassVar[str] = "toy"
    progress_type = ToyProgress

    def __init__(self) -> None:
        rows = torch.Generator().manual_seed(0)
        self.x = torch.randn(96, 4, generator=rows)
        self.y = self.x @ torch.tensor([1.0, -2.0, 0.5, 3.0])
        self.feature_store = TensorFeatureStore({"x": self.x})

    def build(self, config: Any, device: torch.device, source: Any) -> Built:
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=config.lr)
        source = source or ShuffledRows(self.x[:64], self.y[:64], 16, config.seed)
        return Built(model, optimizer, source, {"rows": 96})

    def measures(self, config: Any, built: Built, optimize: Any, device: Any, amp: Any) -> Measures:
        model = built.model

        def step(batch: Any, timer: Any, total_loss: torch.Tensor) -> int:
            x, y = batch
            optimize.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x).squeeze(-1), y)
            optimize(loss)
            total_loss += loss.detach() * len(y)
            return len(y)

        def error(x: torch.Tensor, y: torch.Tensor) -> float:
            with torch.no_grad():
                return float(torch.nn.functional.mse_loss(model(x).squeeze(-1), y))

        return Measures(
            step,
            lambda: error(self.x[64:80], self.y[64:80]),
            lambda: error(self.x[80:], self.y[80:]),
        )

    def describe(self, loss: float, val: Any, state: Any) -> dict[str, str]:
        return {"loss": f"{loss:.4f}"}

    def final_metrics(self, test: Any, state: Any) -> dict[str, float]:
        return {"test_error": test}

    def result(self, fields: dict[str, Any], state: Any, outcome: Outcome[Any]) -> dict[str, Any]:
        return {**fields, "val_error": state.val_error, "test_error": outcome.test}


def test_a_toy_task_learns_through_fit() -> None:
    result = fit(ToyTask(), CONFIG, hooks=RunHooks(progress=False))
    assert result["stopped_epoch"] == 4
    assert result["val_error"][-1] < result["val_error"][0] / 4
    assert result["test_error"] < result["val_error"][0]


def test_a_toy_task_resumes_exactly(tmp_path: Path) -> None:
    whole = fit(ToyTask(), CONFIG, hooks=RunHooks(progress=False))
    first = dataclasses.replace(CONFIG, epochs=2)
    fit(ToyTask(), first, hooks=RunHooks(progress=False, checkpoints=tmp_path))
    resumed = fit(
        ToyTask(), CONFIG, hooks=RunHooks(progress=False, checkpoints=tmp_path, resume=True)
    )
    assert resumed["resumed_from_epoch"] == 2
    assert resumed["train_loss"] == whole["train_loss"]
    for a, b in zip(whole["model"].parameters(), resumed["model"].parameters(), strict=True):
        assert torch.equal(a, b)


def test_resume_without_checkpoints_is_refused() -> None:
    with pytest.raises(ConfigError, match="checkpoint directory"):
        fit(ToyTask(), CONFIG, hooks=RunHooks(progress=False, resume=True))
