"""Hyper-parameters of node-classification training, as one frozen dataclass.

Fields marked "per model" default to the architecture's entry in
:data:`MODEL_DEFAULTS` (settings chosen on the Planetoid Cora *validation*
split); any value given explicitly wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from gnncore.options import option
from gnncore.sizes import parse_size
from gnncore.train.core.config import AMP_MODES, ConfigError, SharedTrainOptions, TrainMode
from gnncore.train.core.names import MODEL_NAMES, ModelName
from gnncore.train.node.staleness import Staleness, StalenessPolicy

__all__ = ["AMP_MODES", "MODEL_DEFAULTS", "ConfigError", "NodeTrainConfig", "TrainMode"]

#: The node modes that read a partitioned store (out of core).
OUT_OF_CORE_MODES = ("hierbatching", "partition_buffer")

#: Architecture -> defaults of the per-model fields. Chosen on Cora's validation
#: split (mean of seeds 0-4, public split).
MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "sage": {
        "hidden": 256,
        "lr": 0.005,
        "weight_decay": 5e-4,
        "dropout": 0.5,
        "heads": 1,
        "epochs": 20,
    },
    "gcn": {
        "hidden": 128,
        "lr": 0.01,
        "weight_decay": 5e-4,
        "dropout": 0.7,
        "heads": 1,
        "epochs": 50,
    },
    "gat": {
        "hidden": 64,
        "lr": 0.005,
        "weight_decay": 5e-4,
        "dropout": 0.6,
        "heads": 8,
        "epochs": 50,
    },
    "gin": {
        "hidden": 64,
        "lr": 0.01,
        "weight_decay": 5e-3,
        "dropout": 0.5,
        "heads": 1,
        "epochs": 50,
    },
    "none": {
        "hidden": 256,
        "lr": 0.01,
        "weight_decay": 5e-4,
        "dropout": 0.5,
        "heads": 1,
        "epochs": 50,
    },
}


@dataclass(frozen=True)
class NodeTrainConfig(SharedTrainOptions):
    r"""Configuration of node classification (:class:`~gnncore.train.NodeTask`).

    With the defaults, every architecture clears its usual accuracy on
    Planetoid Cora (public split) in seconds on a CPU: GraphSAGE and GAT
    about 0.81, GCN about 0.81 test accuracy (mean of five seeds). Each field
    is declared once, with its help, by :func:`~gnncore.options.option`;
    the ``gnncore train`` flags and the Dagster launchpad derive from it.
    The options both tasks share are in
    :class:`~gnncore.train.core.config.SharedTrainOptions`. Message-passing
    layers: one per fan-out (:attr:`num_layers`).
    """

    model: ModelName = option(
        "sage", "Architecture: sage, gcn, gat, gin, or none (an MLP on the features alone)."
    )
    hidden: int = option(help="Hidden channels (GAT: all heads together).", per_model=True)
    fanouts: tuple[int, ...] = option(
        (15, 10),
        "Neighbours sampled per node at each hop while training, -1 for all; one per layer.",
    )
    batch_size: int = option(64, "Seed nodes per training mini-batch.")
    epochs: int = option(
        help="Most passes over the training nodes.", per_model=True, resumable=True
    )
    lr: float = option(help="Adam learning rate.", per_model=True)
    weight_decay: float = option(help="Adam weight decay (L2).", per_model=True)
    dropout: float = option(help="Dropout between layers (GAT: also on attention).", per_model=True)
    heads: int = option(
        help="GAT attention heads, must divide hidden; other models take 1.", per_model=True
    )
    patience: int = option(
        20,
        "Early stopping: epochs without a higher validation accuracy "
        "before training ends; 0 turns it off.",
        resumable=True,
    )
    normalize_features: bool = option(
        False, "Divide each feature row by its sum (bag-of-words features), per mini-batch."
    )
    eval_batch_size: int = option(1024, "Seed nodes per evaluation mini-batch.", resumable=True)
    locality_aware: bool = option(
        False,
        "Locality-aware sampling (Song & Jiang): with a placement plan, sample the nodes "
        "the device can read from GPU caches s times likelier, s adapted per epoch from the "
        "data-loading share (Algorithm 2), edges weighted so the mean aggregation stays "
        "unbiased. Needs a placement, the dense sampler, model sage and num_workers 0.",
    )
    las_max_scale: float = option(8.0, "Locality-aware sampling: the largest scale s (MAXS).")
    las_fixed_scale: float = option(
        0.0,
        "Locality-aware sampling: 0 adapts s per epoch (Algorithm 2); a value >= 1 samples "
        "with that s throughout.",
    )
    hdr_part: int = option(
        -1,
        "HDR pruning (HyDRA): with a replication plan, sample as partition P of it: lists "
        "of nodes P neither owns nor replicates are read through a window of θ ids; the "
        "remote reads are logged per epoch. Every training node is still a seed (one "
        "process plays partition P). -1: off. Needs the dense sampler and num_workers 0.",
    )
    las_set_size: int = option(
        0,
        "Locality-aware sampling: nodes boosted at each inner hop (|Q'_l|); 0 takes the "
        "number of cached nodes the device reads.",
    )

    mode: TrainMode = option(
        "auto",
        "Where batches come from: auto (in_memory when the graph's training data and "
        "training's working set fit what the memory budget leaves after the process's "
        "own memory, else hierbatching; mmap with placement or "
        "replication plans; the choice and why are logged), mmap (features and graph "
        "memory-mapped, the page cache decides what stays in memory), in_memory (read "
        "into RAM first), hierbatching (out of core: mega-batches of partitions of a "
        "partitioned store, read sequentially while the previous one trains; needs a "
        "store), partition_buffer (out of core: a buffer of partitions that swaps one in "
        "at a time, MariusGNN's Alg. 7; needs a store), sancus (distributed full-graph GCN "
        "whose ranks skip sending embedding rows that are not too stale; needs --nproc and "
        "--partition, model gcn).",
    )
    staleness: StalenessPolicy = option(
        "always",
        "Mode sancus: when a rank sends its embedding rows again: always, epoch-fixed "
        "(every staleness_bound + 1 epochs), epoch-adaptive (when a receiver's copy is older "
        "than staleness_bound epochs) or variation (when they changed by more than "
        "staleness_bound, relative).",
    )
    staleness_bound: float = option(
        0.0,
        "Mode sancus: the staleness bound, epochs for epoch-fixed and epoch-adaptive, the "
        "relative change for variation; 0 takes 1 epoch, or 0.05 for variation.",
    )
    memory_budget: str = option(
        "",
        "Bytes the whole training process may take (4GiB, 512MiB); it wins over the "
        "caller's budget. What the process holds when training starts and a 64 MiB margin "
        "come off it; mode auto compares the in-memory training data plus training's "
        "working set with the rest, out-of-core modes size their two mega-batches or "
        "buffer states from it (mega_batch_parts), exact evaluation spills its hidden "
        "layers to disk when they do not fit. Empty: the caller's budget (Dagster's "
        "memory resource), else see mega_batch_parts.",
    )
    mega_batch_parts: int = option(
        0,
        "Out-of-core modes: partitions in memory at once, N_d of a mega-batch or c of the "
        "buffer; 0 takes them from memory_budget, or an eighth of the partitions without a "
        "budget.",
    )
    mega_batch_passes: int = option(
        2,
        "Out-of-core modes: passes over the training nodes of each mega-batch or buffer state (p).",
    )

    MODEL_DEFAULTS: ClassVar[dict[str, dict[str, Any]]] = MODEL_DEFAULTS
    TASK: ClassVar[str] = "node"

    def validate(self) -> NodeTrainConfig:
        """Raise :class:`ConfigError` naming the first bad field; return ``self``."""
        bad = self.field_error
        if self.model not in MODEL_NAMES:
            raise bad("model", f"unknown model; choose one of {sorted(MODEL_NAMES)}")
        for name in ("hidden", "batch_size", "epochs", "eval_batch_size", "heads"):
            if int(getattr(self, name)) < 1:
                raise bad(name, "must be at least 1")
        if not self.fanouts:
            raise bad("fanouts", "needs one fan-out per layer (at least one)")
        if not self.weight_decay >= 0:
            raise bad("weight_decay", "must be >= 0")
        if not self.las_max_scale >= 1:
            raise bad("las_max_scale", "must be >= 1")
        if not (self.las_fixed_scale == 0 or self.las_fixed_scale >= 1):
            raise bad("las_fixed_scale", "must be 0 (adapt) or >= 1")
        if int(self.las_set_size) < 0:
            raise bad("las_set_size", "must be >= 0")
        if int(self.hdr_part) < -1:
            raise bad("hdr_part", "must be a partition id >= 0, or -1 (off)")
        if self.hdr_part >= 0 and self.sampler != "dense":
            raise bad("hdr_part", "needs sampler 'dense'")
        if (self.hdr_part >= 0 or self.locality_aware) and self.num_workers > 0:
            # Loader worker processes would keep their own sampler copies: the
            # counters and the adapted scale would never reach them.
            name = "hdr_part" if self.hdr_part >= 0 else "locality_aware"
            raise bad(name, "needs num_workers 0 (prefetch threads still overlap batches)")
        if self.hdr_part >= 0 and self.locality_aware:
            raise bad("hdr_part", "and locality_aware cannot be combined yet")
        if self.locality_aware:
            if self.sampler != "dense":
                raise bad("locality_aware", "needs sampler 'dense'")
            if self.model != "sage":
                # GCN would also feed the weights into its degree normalisation.
                raise bad("locality_aware", "needs model 'sage' (mean of weighted messages)")
        try:
            _ = self.memory_budget_bytes  # parses the size
        except ValueError as error:
            raise bad("memory_budget", str(error)) from None
        if int(self.mega_batch_parts) < 0:
            raise bad("mega_batch_parts", "must be >= 0 (0: from the memory budget)")
        if int(self.mega_batch_passes) < 1:
            raise bad("mega_batch_passes", "must be at least 1")
        if self.mode == "sancus" or self.staleness != "always" or self.staleness_bound:
            if self.mode != "sancus":
                raise bad("staleness", "is read by mode 'sancus' only (so is staleness_bound)")
            if self.model != "gcn":
                raise bad("mode", "sancus trains model 'gcn' (full-graph)")
            try:
                Staleness.of(self.staleness, self.staleness_bound)
            except ValueError as error:
                raise bad("staleness_bound", str(error)) from None
        if self.mode in OUT_OF_CORE_MODES:
            for name, on in (
                ("locality_aware", self.locality_aware),
                ("hdr_part", self.hdr_part >= 0),
                ("num_workers", self.num_workers > 0),
            ):
                if on:
                    raise bad(name, f"is not available with mode {self.mode!r}")
        self.check_common(width="hidden")
        return self

    @property
    def memory_budget_bytes(self) -> int | None:
        """:attr:`memory_budget` in bytes (``None`` when empty); ``ValueError``
        for text that is not a size."""
        return parse_size(self.memory_budget) if self.memory_budget else None

    def to_params(self) -> dict[str, Any]:
        """Flat, string-friendly parameters for a run logger (tuples as ``"15,10"``;
        ``eval_fanouts=None`` as ``"all"``), with ``num_layers``."""
        params = super().to_params()
        params["num_layers"] = self.num_layers
        if self.eval_fanouts is None:
            params["eval_fanouts"] = "all"
        return params
