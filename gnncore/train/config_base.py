"""What every training configuration dataclass shares: serialisation and resume checks."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any, ClassVar, TypeVar

from gnncore.errors import GnnCoreError


class ConfigError(GnnCoreError, ValueError):
    """A training configuration that cannot be run (names the field and the problem)."""



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

    def mismatches(self, other: dict[str, Any]) -> list[str]:
        """Fields (outside ``RESUMABLE``) where ``other``, a :meth:`to_dict` of
        another config, differs: ``"lr: 0.01 (checkpoint) != 0.005 (this run)"``."""
        mine = self.to_dict()
        return [f"{key}: {other.get(key)!r} (checkpoint) != {mine[key]!r} (this run)"
                for key in mine
                if key not in self.RESUMABLE and other.get(key) != mine[key]]
