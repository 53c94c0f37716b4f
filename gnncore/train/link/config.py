"""Hyper-parameters of link prediction training, as one frozen dataclass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from gnncore.options import option
from gnncore.sampler.names import NegativeMode
from gnncore.sizes import parse_size
from gnncore.train.core.config import SharedTrainOptions, TrainMode
from gnncore.train.core.names import MODEL_NAMES, DecoderName, ModelName

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
class LinkTrainConfig(SharedTrainOptions):
    r"""Configuration of link prediction (:class:`~gnncore.train.LinkTask`).

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

    Each field is declared once, with its help, by
    :func:`~gnncore.options.option`; the ``gnncore train --task link``
    flags and the Dagster launchpad derive from it. The options both tasks
    share are in :class:`~gnncore.train.core.config.SharedTrainOptions`.
    """

    model: ModelName = option(
        "none",
        "Encoder: none (learned embeddings and the decoder alone), or a GNN (sage, "
        "gcn, gat, gin) over learned embeddings or the graph's features.",
    )
    decoder: DecoderName = option("distmult", "Link scoring: distmult or dot.")
    dim: int = option(200, "Width of embeddings and representations.")
    fanouts: tuple[int, ...] = option(
        help="Neighbours sampled per node and hop, one per GNN "
        "layer (none for the none encoder; else 10).",
        per_model=True,
    )
    batch_size: int = option(1000, "Training triples per mini-batch.")
    num_negatives: int = option(
        1000, "Negatives per mini-batch, shared by its positives.", aliases=("--negatives",)
    )
    negative_sampling: NegativeMode = option(
        "uniform", "Negative distribution: uniform, or degree (proportional to training degree)."
    )
    epochs: int = option(
        help="Most passes over the training triples.", per_model=True, resumable=True
    )
    lr: float = option(0.1, "Adagrad learning rate.")
    dropout: float = option(0.0, "Dropout between GNN layers.")
    heads: int = option(1, "GAT attention heads (must divide dim).")
    reciprocal: bool = option(
        True,
        "Learn a reciprocal relation per relation and train both "
        "directions of every triple (knowledge graphs).",
    )
    patience: int = option(
        5,
        "Early stopping after this many epochs without a higher validation MRR; 0 turns it off.",
        resumable=True,
    )
    eval_batch_size: int = option(512, "Queries ranked at once.", resumable=True)
    eval_negatives: int = option(
        0,
        "0 ranks every answer against all entities (standard); "
        "K > 0 against K sampled, filtered negatives.",
    )
    max_eval_triples: int = option(
        0,
        "Validate on at most this many validation triples per "
        "epoch (a fixed random subset; 0: all).",
    )

    mode: TrainMode = option(
        "auto",
        "Where data lives: auto (in_memory when the training data, the embedding table and "
        "its Adagrad sums included, and training's working set fit what the memory budget "
        "leaves after the process's own memory, else "
        "partition_buffer for encoder none and mmap otherwise; the choice and why are "
        "logged), mmap (features memory-mapped, embeddings in memory), in_memory "
        "(features read into RAM), partition_buffer (learned embeddings and their Adagrad "
        "sums on disk, a buffer of buffer_capacity of buffer_partitions node partitions in "
        "memory; encoder none).",
    )
    memory_budget: str = option(
        "",
        "Mode auto: bytes the whole training process may take (4GiB, 512MiB); it wins "
        "over the caller's budget, and the training data plus training's working set must "
        "fit what it leaves after the process's own memory. Empty: the caller's budget "
        "(Dagster's memory resource), else the memory this process may still take.",
        resumable=True,
    )
    buffer_partitions: int = option(
        16, "Partition buffer: node partitions p (random, equal sizes) of the embedding table."
    )
    buffer_capacity: int = option(
        4, "Partition buffer: partitions in memory at once (c, 2 <= c <= p)."
    )
    buffer_ordering: Literal["comet", "beta"] = option(
        "comet",
        "Partition buffer: the order of buffer states: comet (random logical partitions, "
        "each bucket at a random state holding it) or beta (fewest swaps).",
    )

    MODEL_DEFAULTS: ClassVar[dict[str, dict[str, Any]]] = ENCODER_DEFAULTS
    TASK: ClassVar[str] = "link"

    def validate(self) -> LinkTrainConfig:
        """Raise :class:`~gnncore.train.core.config.ConfigError` naming the first bad field;
        return ``self``."""
        bad = self.field_error
        if self.model != "none" and self.model not in MODEL_NAMES:
            raise bad("model", f"unknown encoder; choose 'none' or one of {sorted(MODEL_NAMES)}")
        for name in ("dim", "batch_size", "num_negatives", "epochs", "eval_batch_size", "heads"):
            if int(getattr(self, name)) < 1:
                raise bad(name, "must be at least 1")
        if self.model == "none" and self.fanouts:
            raise bad("fanouts", "the 'none' encoder samples no neighbours; leave it empty")
        if self.model != "none" and not self.fanouts:
            raise bad("fanouts", f"encoder {self.model!r} needs one fan-out per layer")
        for name in ("eval_negatives", "max_eval_triples"):
            if int(getattr(self, name)) < 0:
                raise bad(name, "must be >= 0")
        if self.mode in ("hierbatching", "sancus"):
            raise bad(
                "mode",
                f"{self.mode} trains node classifiers; link prediction takes "
                "mmap, in_memory or partition_buffer",
            )
        if self.mode == "partition_buffer":
            if self.model != "none":
                raise bad("mode", "partition_buffer keeps learned embeddings on disk: model 'none'")
            if self.negative_sampling != "uniform":
                raise bad("negative_sampling", "the buffer draws negatives uniformly from memory")
            if self.num_workers > 0:
                raise bad("num_workers", "must be 0 with a partition buffer")
        try:
            _ = self.memory_budget_bytes  # parses the size
        except ValueError as error:
            raise bad("memory_budget", str(error)) from None
        if not 2 <= int(self.buffer_capacity) <= int(self.buffer_partitions):
            raise bad(
                "buffer_capacity", f"needs 2 <= c <= buffer_partitions={self.buffer_partitions}"
            )
        self.check_common(width="dim")
        return self

    @property
    def memory_budget_bytes(self) -> int | None:
        """:attr:`memory_budget` in bytes (``None`` when empty); ``ValueError``
        for text that is not a size."""
        return parse_size(self.memory_budget) if self.memory_budget else None

    def to_params(self) -> dict[str, Any]:
        """Parameters for a run logger, with ``task="link"``."""
        params = super().to_params()
        params["task"] = "link"
        params["fanouts"] = params["fanouts"] or "none"
        if self.eval_fanouts is None:
            params["eval_fanouts"] = "all"
        return params
