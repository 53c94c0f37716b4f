"""Hyper-parameters of node-classification training, as one frozen dataclass.

Fields marked "per model" default to the architecture's entry in
:data:`MODEL_DEFAULTS` (settings chosen on the Planetoid Cora *validation*
split); any value given explicitly wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from gnncore.train.config_base import AMP_MODES, ConfigError, ConfigMethods

__all__ = ["AMP_MODES", "MODEL_DEFAULTS", "RESUMABLE_FIELDS", "ConfigError", "NodeTrainConfig"]


#: Placeholder default of the per-model fields; replaced in ``__post_init__``.
MODEL_DEFAULT: Any = None

#: Architecture -> defaults of the per-model fields. Chosen on Cora's validation
#: split (mean of seeds 0-4, public split).
MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "sage": {"hidden": 256, "lr": 0.005, "weight_decay": 5e-4, "dropout": 0.5, "heads": 1,
             "epochs": 20},
    "gcn": {"hidden": 128, "lr": 0.01, "weight_decay": 5e-4, "dropout": 0.7, "heads": 1,
            "epochs": 50},
    "gat": {"hidden": 64, "lr": 0.005, "weight_decay": 5e-4, "dropout": 0.6, "heads": 8,
            "epochs": 50},
    "gin": {"hidden": 64, "lr": 0.01, "weight_decay": 5e-3, "dropout": 0.5, "heads": 1,
            "epochs": 50},
    "none": {"hidden": 256, "lr": 0.01, "weight_decay": 5e-4, "dropout": 0.5, "heads": 1,
             "epochs": 50},
}


#: Fields a resumed run may change without invalidating its checkpoint: they do
#: not alter what an epoch computes (``epochs`` and ``patience`` only move the end).
#: The prefetch settings change timing only (batches are identical for any of them).
RESUMABLE_FIELDS = frozenset({"epochs", "patience", "device", "num_workers", "eval_batch_size",
                              "prefetch_workers", "prefetch_depth"})


@dataclass(frozen=True)
class NodeTrainConfig(ConfigMethods):
    r"""Configuration of :func:`gnncore.train.train_node_classifier`.

    With the defaults, every architecture clears its usual accuracy on
    Planetoid Cora (public split) in seconds on a CPU: GraphSAGE and GAT
    about 0.81, GCN about 0.81 test accuracy (mean of five seeds).

    Args:
        model (str): Architecture name, a key of :data:`gnncore.train.MODELS`:
            ``"sage"``, ``"gcn"``, ``"gat"``, ``"gin"`` or ``"none"`` (an MLP
            that ignores the edges). (default: :obj:`"sage"`)
        hidden (int): Hidden channels (for GAT: all heads together, so each
            head has ``hidden // heads``). (default: per model, see
            :data:`MODEL_DEFAULTS`)
        num_layers (int): Message-passing layers; equals ``len(fanouts)``.
            (default: :obj:`2`)
        fanouts (tuple[int, ...]): Neighbours sampled per node at each hop
            (``-1``: all) during training. (default: :obj:`(15, 10)`)
        batch_size (int): Seed nodes per training mini-batch. (default: :obj:`64`)
        epochs (int): Most passes over the training nodes. (default: per model)
        lr (float): Adam learning rate. (default: per model)
        weight_decay (float): Adam weight decay (L2). (default: per model)
        dropout (float): Dropout between layers (GAT: also on the attention
            coefficients). (default: per model)
        heads (int): Attention heads of GAT; must divide ``hidden``. Other
            models take ``1``. (default: per model; GAT ``8``)
        patience (int): Early stopping: end training after this many epochs
            without a higher validation accuracy; ``0`` turns it off.
            (default: :obj:`20`)
        normalize_features (bool): Divide each feature row by its sum (PyG's
            ``NormalizeFeatures`` for non-negative bag-of-words features),
            applied per mini-batch. (default: :obj:`False`)
        amp (str): Mixed precision on CUDA: ``"off"``, ``"bf16"`` or
            ``"fp16"`` (with gradient scaling). Ignored, with a warning, on a
            CPU. (default: :obj:`"off"`)
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
        num_workers (int): DataLoader worker processes. A resumed run
            continues bit-identically only with ``0``. (default: :obj:`0`)
        prefetch_workers (int): Threads preparing batches (sampling, feature
            join; on CUDA also pinning and the copy on a separate stream)
            while the model computes (:mod:`gnncore.train.prefetch`); ``0``
            prepares each batch when the loop asks for it. Results do not
            depend on it. Not used with ``num_workers > 0``.
            (default: :obj:`1`)
        prefetch_depth (int): Most batches the prefetch threads prepare ahead.
            (default: :obj:`4`)
        sampler (str): Neighbour sampling mode of training and evaluation:
            ``"dense"`` (each node's neighbours once per batch, thesis §3.3)
            or ``"per-layer"`` (every layer samples its whole frontier again,
            DGL / classic PyG). (default: :obj:`"dense"`)
    """

    model: str = "sage"
    hidden: int = MODEL_DEFAULT
    num_layers: int = 2
    fanouts: tuple[int, ...] = (15, 10)
    batch_size: int = 64
    epochs: int = MODEL_DEFAULT
    lr: float = MODEL_DEFAULT
    weight_decay: float = MODEL_DEFAULT
    dropout: float = MODEL_DEFAULT
    heads: int = MODEL_DEFAULT
    patience: int = 20
    normalize_features: bool = False
    amp: str = "off"
    seed: int = 0
    device: str = "auto"
    eval_batch_size: int = 1024
    eval_fanouts: tuple[int, ...] | None = field(default=None)
    num_workers: int = 0
    prefetch_workers: int = 1
    prefetch_depth: int = 4
    sampler: str = "dense"

    def __post_init__(self) -> None:
        # Accept lists (from JSON / argparse) but store hashable tuples.
        object.__setattr__(self, "fanouts", tuple(int(f) for f in self.fanouts))
        if self.eval_fanouts is not None:
            object.__setattr__(self, "eval_fanouts", tuple(int(f) for f in self.eval_fanouts))
        defaults = MODEL_DEFAULTS.get(self.model, MODEL_DEFAULTS["sage"])
        for name, value in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        object.__setattr__(self, "amp", str(self.amp).lower())

    def validate(self) -> NodeTrainConfig:
        """Raise :class:`ConfigError` naming the first bad field; return ``self``."""
        from gnncore.train.models import MODELS

        bad = self.field_error
        if self.model not in MODELS:
            raise bad("model", f"unknown model; choose one of {sorted(MODELS)}")
        for name in ("hidden", "num_layers", "batch_size", "epochs", "eval_batch_size",
                     "heads"):
            if int(getattr(self, name)) < 1:
                raise bad(name, "must be at least 1")
        if len(self.fanouts) != self.num_layers:
            raise bad("fanouts", f"needs one fan-out per layer (num_layers={self.num_layers})")
        if not self.weight_decay >= 0:
            raise bad("weight_decay", "must be >= 0")
        self.check_common(width="hidden")
        return self

    RESUMABLE: ClassVar[frozenset[str]] = RESUMABLE_FIELDS

    def to_params(self) -> dict[str, Any]:
        """Flat, string-friendly parameters for a run logger (tuples as ``"15,10"``;
        ``eval_fanouts=None`` as ``"all"``)."""
        params = super().to_params()
        if self.eval_fanouts is None:
            params["eval_fanouts"] = "all"
        return params
