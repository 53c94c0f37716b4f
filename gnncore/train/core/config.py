"""What every training configuration dataclass shares: serialisation and resume checks."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, ClassVar, Literal, TypeVar, get_args

from gnncore.errors import ConfigError as ConfigError  # raised by every config's checks
from gnncore.options import describe_options, option, resumable_options
from gnncore.sampler.names import SamplerMode

#: Mixed precision on CUDA: none (float32), bfloat16, or float16 with gradient scaling
#: ("none", not "off": YAML reads an unquoted off as false, which broke the launchpad).
AmpMode = Literal["none", "bf16", "fp16"]
#: Every :data:`AmpMode`.
AMP_MODES: tuple[str, ...] = get_args(AmpMode)


C = TypeVar("C", bound="ConfigMethods")


class ConfigMethods:
    """Mixin for frozen config dataclasses whose fields are declared with
    :func:`gnncore.options.option` (tuples stored, lists accepted).

    Options declared ``resumable=True`` may change when a run resumes without
    invalidating its checkpoint.
    """

    def to_params(self) -> dict[str, Any]:
        """Flat, string-friendly parameters for a run logger (tuples as ``"15,10"``,
        ``None`` as ``"none"``)."""
        out: dict[str, Any] = {}
        for key, value in asdict(self).items():  # type: ignore[call-overload]
            if isinstance(value, tuple):
                value = ",".join(str(v) for v in value)
            out[key] = "none" if value is None else value
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain ``str -> int/float/str/bool/list/None`` (tuples as lists), safe to
        store in a checkpoint loaded with ``weights_only=True``."""
        values = asdict(self)  # type: ignore[call-overload]
        return {
            key: list(value) if isinstance(value, tuple) else value for key, value in values.items()
        }

    @classmethod
    def from_dict(cls: type[C], values: dict[str, Any]) -> C:
        """Inverse of :meth:`to_dict`; unknown keys raise :class:`ConfigError`."""
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(values) - names)
        if unknown:
            raise ConfigError(f"unknown configuration fields {unknown}")
        return cls(**values)

    @property
    def num_layers(self) -> int:
        """Message-passing layers: one per training fan-out."""
        values: Any = self
        return len(values.fanouts)

    def field_error(self, name: str, problem: str) -> ConfigError:
        """The :class:`ConfigError` for field ``name``: ``"name=value: problem"``."""
        return ConfigError(f"{name}={getattr(self, name)!r}: {problem}")

    def check_common(self, width: str) -> None:
        """The checks every task's config shares: every choice option against its
        ``Literal`` choices, fan-out values and evaluation fan-outs, ``lr``,
        ``dropout``, attention heads (GAT splits the ``width`` field over them),
        ``patience``, the loader and prefetch workers, and ``device``. Raises
        the first :meth:`field_error`."""
        values: Any = self
        bad = self.field_error
        for spec in describe_options(type(self)):
            if spec.choices and getattr(self, spec.name) not in spec.choices:
                raise bad(spec.name, f"choose one of {spec.choices}")
        if any(f < 1 and f != -1 for f in values.fanouts):
            raise bad("fanouts", "each fan-out must be positive, or -1 for all neighbours")
        if values.eval_fanouts is not None and (
            len(values.eval_fanouts) != values.num_layers
            or any(f < 1 and f != -1 for f in values.eval_fanouts)
        ):
            raise bad("eval_fanouts", f"needs {values.num_layers} positive fan-outs or -1")
        if not values.lr > 0:
            raise bad("lr", "must be positive")
        if not 0 <= values.dropout < 1:
            raise bad("dropout", "must be in [0, 1)")
        if values.model == "gat" and getattr(values, width) % values.heads != 0:
            raise bad(
                "heads", f"must divide {width}={getattr(values, width)} (GAT splits it over heads)"
            )
        if values.model != "gat" and values.heads != 1:
            raise bad("heads", f"only GAT has attention heads; model {values.model!r} takes 1")
        if int(values.patience) < 0:
            raise bad("patience", "must be >= 0 (0 turns early stopping off)")
        if int(values.num_workers) < 0:
            raise bad("num_workers", "must be >= 0")
        if int(values.prefetch_workers) < 0:
            raise bad("prefetch_workers", "must be >= 0 (0 prepares batches synchronously)")
        if not (math.isfinite(values.max_grad_norm) and values.max_grad_norm >= 0):
            raise bad("max_grad_norm", "must be a finite number >= 0 (0 turns clipping off)")
        if int(values.prefetch_depth) < 1:
            raise bad("prefetch_depth", "must be at least 1")
        parse_device(values.device)

    def mismatches(self, other: dict[str, Any]) -> list[str]:
        """Options (other than the resumable ones) where ``other``, a :meth:`to_dict`
        of another config, differs: ``"lr: 0.01 (checkpoint) != 0.005 (this run)"``.

        An option missing from ``other`` (a checkpoint written before the option
        existed) counts as its declared default, which is what that run used."""
        resumable = resumable_options(type(self))
        defaults = {spec.name: spec.plain_default for spec in describe_options(type(self))}
        mine = self.to_dict()
        theirs = {key: other.get(key, defaults.get(key)) for key in mine}
        return [
            f"{key}: {theirs[key]!r} (checkpoint) != {mine[key]!r} (this run)"
            for key in mine
            if key not in resumable and theirs[key] != mine[key]
        ]


#: Where training data comes from (``mode``): ``auto`` (the default: chosen per
#: graph from the memory budget by :func:`gnncore.modes.choose.resolve_mode`,
#: before anything is built); ``mmap`` and ``in_memory`` for both tasks;
#: ``hierbatching`` and ``partition_buffer`` (a partitioned store) for node
#: classification; ``partition_buffer`` (embeddings on disk) for link prediction;
#: ``sancus`` (distributed full-graph GCN, :mod:`gnncore.distributed.sancus`) for
#: node classification across ranks. See :mod:`gnncore.modes.node_data`.
TrainMode = Literal["auto", "mmap", "in_memory", "hierbatching", "partition_buffer", "sancus"]

#: What mode ``auto`` is on a distributed rank: every rank reads its own rank data,
#: memory-mapped (the modes that read the whole graph or a partitioned store do not
#: apply to ranks).
RANK_MODE = "mmap"


def rank_mode(config: Any) -> Any:
    """``config`` with mode ``auto`` resolved to :data:`RANK_MODE` (validated); an
    explicit mode stays. The distributed entry applies it, so checkpoints record
    the mode the ranks ran whichever entry (library, CLI or asset) started them."""
    if config.mode != "auto":
        return config
    return replace(config, mode=RANK_MODE).validate()


_DEVICE = re.compile(r"^(auto|cpu|cuda)(?::(\d+))?$")


def parse_device(spec: str) -> tuple[str, int | None]:
    """Check the syntax of ``spec`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``);
    :func:`gnncore.train.core.device.resolve_device` picks the device."""
    match = _DEVICE.match(str(spec).strip().lower())
    if match is None or (match.group(2) is not None and match.group(1) != "cuda"):
        raise ConfigError(f"device={spec!r}: expected 'auto', 'cpu', 'cuda' or 'cuda:N'")
    index = match.group(2)
    return match.group(1), None if index is None else int(index)


@dataclass(frozen=True)
class SharedTrainOptions(ConfigMethods):
    """The options node classification and link prediction share, declared once
    (same meaning and default for both tasks); each task's config adds its own."""

    amp: AmpMode = option(
        "none",
        "Mixed precision on CUDA: none, bf16, or fp16 with gradient "
        "scaling; ignored with a warning on a CPU.",
        bare="bf16",
    )
    seed: int = option(
        0,
        "Seeds initialisation, dropout, shuffling, negatives and sampling; "
        "on a CPU the same seed gives the same trained parameters.",
    )
    device: str = option("auto", "auto (CUDA when available), cpu, cuda or cuda:N.", resumable=True)
    eval_fanouts: tuple[int, ...] | None = option(
        None,
        "Fan-outs of validation and test (one per layer); none takes every neighbour "
        "(exact, deterministic). Set it where 2-hop neighbourhoods are huge.",
    )
    num_workers: int = option(
        0,
        "DataLoader worker processes; a resumed run continues bit-identically only with 0.",
        resumable=True,
    )
    prefetch_workers: int = option(
        1,
        "Threads preparing batches ahead of compute (0: in the loop); results do not depend on it.",
        resumable=True,
    )
    prefetch_depth: int = option(4, "Most batches prepared ahead.", resumable=True)
    sampler: SamplerMode = option(
        "dense",
        "Neighbour sampling: dense (each node's neighbours "
        "once per batch) or per-layer (every layer re-samples).",
    )
    max_grad_norm: float = option(
        0.0,
        "Clip the joint L2 norm of the gradients to this "
        "value before each optimiser step; 0 turns clipping off.",
    )

    #: Model name -> defaults of the ``per_model`` options (each task sets its own).
    MODEL_DEFAULTS: ClassVar[dict[str, dict[str, Any]]] = {}
    #: The task's name (``"node"``, ``"link"``).
    TASK: ClassVar[str] = ""

    @property
    def task(self) -> str:
        return self.TASK

    def __post_init__(self) -> None:
        # Per-model options left unset take the model's defaults (any model the
        # table lacks takes sage's; validate() then names the bad model).
        values: Any = self
        defaults = self.MODEL_DEFAULTS.get(values.model, self.MODEL_DEFAULTS.get("sage", {}))
        for name, value in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        # Accept lists (from JSON / argparse) but store hashable tuples.
        fanouts = getattr(self, "fanouts", None)
        if fanouts is not None:
            object.__setattr__(self, "fanouts", tuple(int(f) for f in fanouts))
        if self.eval_fanouts is not None:
            object.__setattr__(self, "eval_fanouts", tuple(int(f) for f in self.eval_fanouts))
        object.__setattr__(self, "amp", str(self.amp).lower())
