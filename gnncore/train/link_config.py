"""Hyper-parameters of link prediction training, as one frozen dataclass."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from gnncore.sampler.negative import NEGATIVE_MODES
from gnncore.train.config_base import ConfigMethods
from gnncore.train.link_models import DECODERS

#: Placeholder of the per-encoder fields; replaced in ``__post_init__``.
ENCODER_DEFAULT: Any = None

#: Encoder -> defaults of the per-encoder fields, chosen on FB15k-237's
#: validation triples. ``none`` is plain DistMult (thesis: 0.2533 test MRR in
#: memory); a 1-layer GraphSAGE encoder over learned embeddings adds neighbour
#: information (thesis: 0.2825).
ENCODER_DEFAULTS: dict[str, dict[str, Any]] = {
    "none": {"fanouts": (), "epochs": 10},
    "sage": {"fanouts": (10,), "epochs": 10},
    "gcn": {"fanouts": (10,), "epochs": 10},
    "gat": {"fanouts": (10,), "epochs": 10},
    "gin": {"fanouts": (10,), "epochs": 10},
}


@dataclass(frozen=True)
class LinkTrainConfig(ConfigMethods):
    r"""Configuration of :func:`gnncore.train.train_link_predictor`.

    An epoch runs over the training triples and, when ``reciprocal``, their
    reciprocal forms ``(t, r + R, h)`` (shuffled together) in mini-batches of
    ``batch_size``; each batch draws ``num_negatives`` negative tails shared
    by all its positives and minimises the cross-entropy of every positive
    against them (the 1-vs-negatives softmax of Marius and PyTorch-BigGraph).
    The sampler draws negatives in whole multiples of the batch size (PyG's
    ``"triplet"`` mode), so ``num_negatives`` below ``batch_size`` samples
    neighbourhoods it does not use; keep it a multiple of ``batch_size`` for
    GNN encoders. Optimiser: Adagrad (sparse gradients for the embedding
    table).

    Args:
        model (str): Encoder: ``"none"`` (learned embeddings alone), or a GNN
            of :data:`gnncore.train.MODELS` over learned embeddings (or the
            graph's features). (default: :obj:`"none"`)
        decoder (str): ``"distmult"`` or ``"dot"``. (default: :obj:`"distmult"`)
        dim (int): Width of embeddings and representations. (default: :obj:`200`)
        fanouts (tuple[int, ...]): Neighbours sampled per node and hop (one
            per GNN layer; empty for ``"none"``). (default: per encoder)
        batch_size (int): Training triples per mini-batch. (default: :obj:`1000`)
        num_negatives (int): Negatives per mini-batch, shared by its
            positives. (default: :obj:`1000`)
        negative_sampling (str): ``"uniform"`` or ``"degree"`` (proportional
            to training degree). (default: :obj:`"uniform"`)
        epochs (int): Most passes over the training triples. (default: per encoder)
        lr (float): Adagrad learning rate. (default: :obj:`0.1`)
        dropout (float): Dropout between GNN layers. (default: :obj:`0.0`)
        heads (int): GAT attention heads (must divide ``dim``). (default: :obj:`1`)
        reciprocal (bool): Learn a reciprocal relation per relation and train
            both directions of every triple. (default: :obj:`True`)
        patience (int): Early stopping after this many epochs without a
            higher validation MRR; ``0`` turns it off. (default: :obj:`5`)
        amp (str): Mixed precision on CUDA (``"off"``, ``"bf16"``, ``"fp16"``).
        seed (int): Seeds initialisation, shuffling, negatives and sampling.
        device (str): ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
        eval_batch_size (int): Queries ranked at once. (default: :obj:`512`)
        eval_fanouts (tuple[int, ...], optional): Fan-outs when encoding all
            nodes for evaluation; ``None`` takes every neighbour.
        eval_negatives (int): ``0`` ranks every answer against all entities
            (the standard protocol); ``K > 0`` against ``K`` sampled negatives,
            filtered, for graphs too large for that, drawn like the training
            negatives (``negative_sampling``). (default: :obj:`0`)
        max_eval_triples (int): Validate on at most this many validation
            triples per epoch (a fixed random subset; ``0``: all). The test
            metrics always use every test triple. (default: :obj:`0`)
        num_workers (int): DataLoader worker processes. (default: :obj:`0`)
        prefetch_workers (int): Threads preparing batches ahead of compute
            (:mod:`gnncore.train.prefetch`); ``0`` prepares them in the loop.
            Results do not depend on it. (default: :obj:`1`)
        prefetch_depth (int): Most batches prepared ahead. (default: :obj:`4`)
        sampler (str): ``"dense"`` or ``"per-layer"`` neighbour sampling (GNN
            encoders). (default: :obj:`"dense"`)
    """

    RESUMABLE: ClassVar[frozenset[str]] = frozenset(
        {"epochs", "patience", "device", "num_workers", "eval_batch_size", "prefetch_workers",
         "prefetch_depth"})

    model: str = "none"
    decoder: str = "distmult"
    dim: int = 200
    fanouts: tuple[int, ...] = ENCODER_DEFAULT
    batch_size: int = 1000
    num_negatives: int = 1000
    negative_sampling: str = "uniform"
    epochs: int = ENCODER_DEFAULT
    lr: float = 0.1
    dropout: float = 0.0
    heads: int = 1
    reciprocal: bool = True
    patience: int = 5
    amp: str = "off"
    seed: int = 0
    device: str = "auto"
    eval_batch_size: int = 512
    eval_fanouts: tuple[int, ...] | None = field(default=None)
    eval_negatives: int = 0
    max_eval_triples: int = 0
    num_workers: int = 0
    prefetch_workers: int = 1
    prefetch_depth: int = 4
    sampler: str = "dense"

    def __post_init__(self) -> None:
        defaults = ENCODER_DEFAULTS.get(self.model, ENCODER_DEFAULTS["sage"])
        for name, value in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        object.__setattr__(self, "fanouts", tuple(int(f) for f in self.fanouts))
        if self.eval_fanouts is not None:
            object.__setattr__(self, "eval_fanouts", tuple(int(f) for f in self.eval_fanouts))
        object.__setattr__(self, "amp", str(self.amp).lower())

    @property
    def num_layers(self) -> int:
        """GNN layers: one per fan-out (0 for ``"none"``)."""
        return len(self.fanouts)

    @property
    def task(self) -> str:
        return "link"

    def validate(self) -> LinkTrainConfig:
        """Raise :class:`~gnncore.train.config_base.ConfigError` naming the first bad field;
        return ``self``."""
        from gnncore.train.models import MODELS

        bad = self.field_error
        if self.model != "none" and self.model not in MODELS:
            raise bad("model", f"unknown encoder; choose 'none' or one of {sorted(MODELS)}")
        if self.decoder not in DECODERS:
            raise bad("decoder", f"choose one of {DECODERS}")
        for name in ("dim", "batch_size", "num_negatives", "epochs", "eval_batch_size", "heads"):
            if int(getattr(self, name)) < 1:
                raise bad(name, "must be at least 1")
        if self.model == "none" and self.fanouts:
            raise bad("fanouts", "the 'none' encoder samples no neighbours; leave it empty")
        if self.model != "none" and not self.fanouts:
            raise bad("fanouts", f"encoder {self.model!r} needs one fan-out per layer")
        if self.negative_sampling not in NEGATIVE_MODES:
            raise bad("negative_sampling", f"choose one of {NEGATIVE_MODES}")
        for name in ("eval_negatives", "max_eval_triples"):
            if int(getattr(self, name)) < 0:
                raise bad(name, "must be >= 0")
        self.check_common(width="dim")
        return self

    def to_params(self) -> dict[str, Any]:
        """Parameters for a run logger, with ``task="link"``."""
        params = super().to_params()
        params["task"] = "link"
        params["fanouts"] = params["fanouts"] or "none"
        if self.eval_fanouts is None:
            params["eval_fanouts"] = "all"
        return params
