"""What every training configuration dataclass shares: serialisation and resume checks."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any, ClassVar, TypeVar

from gnncore.errors import GnnCoreError


class ConfigError(GnnCoreError, ValueError):
    """A training configuration that cannot be run (names the field and the problem)."""


#: Mixed-precision modes of every training config.
AMP_MODES = ("off", "bf16", "fp16")


C = TypeVar("C", bound="ConfigMethods")


class ConfigMethods:
    """Mixin for frozen config dataclasses (tuples stored, lists accepted).

    ``RESUMABLE`` names the fields a resumed run may change without
    invalidating its checkpoint.
    """

    RESUMABLE: ClassVar[frozenset[str]] = frozenset()

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
        return {key: list(value) if isinstance(value, tuple) else value
                for key, value in asdict(self).items()}  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: type[C], values: dict[str, Any]) -> C:
        """Inverse of :meth:`to_dict`; unknown keys raise :class:`ConfigError`."""
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(values) - names)
        if unknown:
            raise ConfigError(f"unknown configuration fields {unknown}")
        return cls(**values)

    def field_error(self, name: str, problem: str) -> ConfigError:
        """The :class:`ConfigError` for field ``name``: ``"name=value: problem"``."""
        return ConfigError(f"{name}={getattr(self, name)!r}: {problem}")

    def check_common(self, width: str) -> None:
        """The checks every task's config shares: fan-out values and evaluation
        fan-outs, ``lr``, ``dropout``, attention heads (GAT splits the ``width``
        field over them), ``patience``, ``amp``, ``sampler``, the loader and
        prefetch workers, and ``device``. Raises the first :meth:`field_error`."""
        from gnncore.sampler.factory import SAMPLER_MODES
        from gnncore.train.device import parse_device

        values: Any = self
        bad = self.field_error
        if any(f < 1 and f != -1 for f in values.fanouts):
            raise bad("fanouts", "each fan-out must be positive, or -1 for all neighbours")
        if values.eval_fanouts is not None and (
                len(values.eval_fanouts) != values.num_layers
                or any(f < 1 and f != -1 for f in values.eval_fanouts)):
            raise bad("eval_fanouts", f"needs {values.num_layers} positive fan-outs or -1")
        if not values.lr > 0:
            raise bad("lr", "must be positive")
        if not 0 <= values.dropout < 1:
            raise bad("dropout", "must be in [0, 1)")
        if values.model == "gat" and getattr(values, width) % values.heads != 0:
            raise bad("heads", f"must divide {width}={getattr(values, width)} "
                               "(GAT splits it over heads)")
        if values.model != "gat" and values.heads != 1:
            raise bad("heads", f"only GAT has attention heads; model {values.model!r} takes 1")
        if int(values.patience) < 0:
            raise bad("patience", "must be >= 0 (0 turns early stopping off)")
        if values.amp not in AMP_MODES:
            raise bad("amp", f"choose one of {AMP_MODES}")
        if values.sampler not in SAMPLER_MODES:
            raise bad("sampler", f"choose one of {SAMPLER_MODES}")
        if int(values.num_workers) < 0:
            raise bad("num_workers", "must be >= 0")
        if int(values.prefetch_workers) < 0:
            raise bad("prefetch_workers", "must be >= 0 (0 prepares batches synchronously)")
        if int(values.prefetch_depth) < 1:
            raise bad("prefetch_depth", "must be at least 1")
        parse_device(values.device)

    def mismatches(self, other: dict[str, Any]) -> list[str]:
        """Fields (outside ``RESUMABLE``) where ``other``, a :meth:`to_dict` of
        another config, differs: ``"lr: 0.01 (checkpoint) != 0.005 (this run)"``."""
        mine = self.to_dict()
        return [f"{key}: {other.get(key)!r} (checkpoint) != {mine[key]!r} (this run)"
                for key in mine
                if key not in self.RESUMABLE and other.get(key) != mine[key]]
