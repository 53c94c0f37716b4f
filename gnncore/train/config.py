"""Hyper-parameters of node-classification training, as one frozen dataclass."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gnncore.errors import GnnCoreError


class ConfigError(GnnCoreError, ValueError):
    """A training configuration that cannot be run (names the field and the problem)."""


@dataclass(frozen=True)
class NodeTrainConfig:
    r"""Configuration of :func:`gnncore.train.train_node_classifier`.

    The defaults reach GraphSAGE's usual accuracy on Planetoid Cora (about
    0.80 test accuracy on the public split) in a few seconds on a CPU.

    Args:
        model (str): Architecture name, a key of :data:`gnncore.train.MODELS`.
            (default: :obj:`"sage"`)
        hidden (int): Hidden channels. (default: :obj:`256`)
        num_layers (int): Message-passing layers; equals ``len(fanouts)``.
            (default: :obj:`2`)
        fanouts (tuple[int, ...]): Neighbours sampled per node at each hop
            (``-1``: all) during training. (default: :obj:`(15, 10)`)
        batch_size (int): Seed nodes per training mini-batch. (default: :obj:`64`)
        epochs (int): Passes over the training nodes. (default: :obj:`20`)
        lr (float): Adam learning rate. (default: :obj:`0.005`)
        weight_decay (float): Adam weight decay (L2). (default: :obj:`5e-4`)
        dropout (float): Dropout between layers. (default: :obj:`0.5`)
        seed (int): Seeds parameter init, dropout, shuffling and sampling; on
            a CPU the same seed gives the same trained parameters.
            (default: :obj:`0`)
        device (str): ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"``
            or ``"cuda:N"``. (default: :obj:`"auto"`)
        eval_batch_size (int): Seed nodes per evaluation mini-batch.
            (default: :obj:`1024`)
        eval_fanouts (tuple[int, ...], optional): Fan-outs for validation and
            test; ``None`` takes every neighbour (exact, deterministic
            evaluation). Set it on graphs whose 2-hop neighbourhoods are huge.
            (default: :obj:`None`)
        num_workers (int): DataLoader worker processes. (default: :obj:`0`)
    """

    model: str = "sage"
    hidden: int = 256
    num_layers: int = 2
    fanouts: tuple[int, ...] = (15, 10)
    batch_size: int = 64
    epochs: int = 20
    lr: float = 0.005
    weight_decay: float = 5e-4
    dropout: float = 0.5
    seed: int = 0
    device: str = "auto"
    eval_batch_size: int = 1024
    eval_fanouts: tuple[int, ...] | None = field(default=None)
    num_workers: int = 0

    def __post_init__(self) -> None:
        # Accept lists (from JSON / argparse) but store hashable tuples.
        object.__setattr__(self, "fanouts", tuple(int(f) for f in self.fanouts))
        if self.eval_fanouts is not None:
            object.__setattr__(self, "eval_fanouts", tuple(int(f) for f in self.eval_fanouts))

    def validate(self) -> NodeTrainConfig:
        """Raise :class:`ConfigError` naming the first bad field; return ``self``."""
        from gnncore.train.models import MODELS

        def bad(name: str, problem: str) -> ConfigError:
            return ConfigError(f"{name}={getattr(self, name)!r}: {problem}")

        if self.model not in MODELS:
            raise bad("model", f"unknown model; choose one of {sorted(MODELS)}")
        for name in ("hidden", "num_layers", "batch_size", "epochs", "eval_batch_size"):
            if int(getattr(self, name)) < 1:
                raise bad(name, "must be at least 1")
        if len(self.fanouts) != self.num_layers:
            raise bad("fanouts", f"needs one fan-out per layer (num_layers={self.num_layers})")
        if any(f < 1 and f != -1 for f in self.fanouts):
            raise bad("fanouts", "each fan-out must be positive, or -1 for all neighbours")
        if self.eval_fanouts is not None and (
                len(self.eval_fanouts) != self.num_layers
                or any(f < 1 and f != -1 for f in self.eval_fanouts)):
            raise bad("eval_fanouts", f"needs {self.num_layers} positive fan-outs or -1")
        if not self.lr > 0:
            raise bad("lr", "must be positive")
        if not self.weight_decay >= 0:
            raise bad("weight_decay", "must be >= 0")
        if not 0 <= self.dropout < 1:
            raise bad("dropout", "must be in [0, 1)")
        if self.num_workers < 0:
            raise bad("num_workers", "must be >= 0")
        from gnncore.train.device import parse_device

        parse_device(self.device)
        return self

    def to_params(self) -> dict[str, Any]:
        """Flat, string-friendly parameters for a run logger (tuples as ``"15,10"``)."""
        out: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if isinstance(value, tuple):
                value = ",".join(str(v) for v in value)
            out[key] = "all" if value is None and key == "eval_fanouts" else value
        return out
