"""Options declared once: a dataclass field with its help and CLI spelling.

Every training option is one field of :class:`~gnncore.train.NodeTrainConfig`
or :class:`~gnncore.train.LinkTrainConfig`, and every planning setting one field
of :class:`~gnncore.plan.PlacementSettings` or
:class:`~gnncore.plan.ReplicationSettings`, declared with :func:`option`. The
command line (:mod:`gnncore.cli.train`, :mod:`gnncore.cli.plan`) and the Dagster
launchpad (``assets/options.py``) derive their arguments from
:func:`describe_options`, so an option's name, type, choices, default and help
are written in one place.

Choice options are ``Literal`` types: argparse gets ``choices=`` and Dagster
shows a drop-down. Options whose default depends on the architecture
(``per_model=True``) default to ``None`` in the derived interfaces, meaning
"the model's default" (:data:`gnncore.train.node.config.MODEL_DEFAULTS`).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Union

#: Key of an option's :class:`OptionInfo` in its dataclass field's metadata.
_META_KEY = "gnncore_option"

#: Placeholder default of per-model options, replaced in ``__post_init__``.
PER_MODEL: Any = None


@dataclass(frozen=True)
class OptionInfo:
    """What a field declares beyond its type and default.

    Args:
        help (str): One or two sentences for ``--help``, the launchpad and the docs.
        per_model (bool): The default depends on the model (``None`` until
            ``__post_init__`` fills it in).
        resumable (bool): A resumed run may change it without invalidating its
            checkpoint (it moves the end of training or only its timing).
        aliases (tuple[str, ...]): Extra command-line spellings (``--negatives``).
        bare (str, optional): The value of the flag given without a value
            (``--amp`` alone means ``bf16``).
    """

    help: str
    per_model: bool = False
    resumable: bool = False
    aliases: tuple[str, ...] = ()
    bare: str | None = None


def option(
    default: Any = dataclasses.MISSING,
    help: str = "",
    *,
    per_model: bool = False,
    resumable: bool = False,
    aliases: tuple[str, ...] = (),
    bare: str | None = None,
) -> Any:
    """A dataclass field carrying its :class:`OptionInfo` (use as a field default)."""
    info = OptionInfo(
        help=help, per_model=per_model, resumable=resumable, aliases=aliases, bare=bare
    )
    if per_model:
        default = PER_MODEL
    return dataclasses.field(default=default, metadata={_META_KEY: info})


@dataclass(frozen=True)
class OptionSpec:
    """One option of a config class, resolved for the derived interfaces.

    ``kind`` is ``"int"``, ``"float"``, ``"bool"``, ``"str"``, ``"choice"``
    (``choices`` set) or ``"ints"`` (a tuple of ints); ``optional`` says
    ``None`` is a valid value (besides a per-model ``None`` default).
    """

    name: str
    kind: str
    default: Any
    info: OptionInfo
    choices: tuple[str, ...] = ()
    optional: bool = False

    @property
    def flag(self) -> str:
        """The command-line flag: ``--batch-size`` for ``batch_size``."""
        return "--" + self.name.replace("_", "-")

    @property
    def python_type(self) -> Any:
        """The type of the option in a pydantic / Dagster model (lists for tuples,
        ``Literal`` for choices; optional when ``None`` is allowed or per model)."""
        base: Any = {"int": int, "float": float, "bool": bool, "str": str, "ints": list[int]}.get(
            self.kind
        )
        if self.kind == "choice":
            base = Literal.__getitem__(self.choices)
        if self.optional or self.info.per_model:
            return typing.Optional[base]  # noqa: UP045 (a runtime type object)
        return base

    @property
    def plain_default(self) -> Any:
        """The default as JSON-like data (tuples as lists)."""
        return list(self.default) if isinstance(self.default, tuple) else self.default


def _kind(hint: Any) -> tuple[str, tuple[str, ...], bool]:
    """``(kind, choices, optional)`` of a resolved type hint."""
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported option type {hint!r}")
        kind, choices, _ = _kind(args[0])
        return kind, choices, True
    if origin is Literal:
        return "choice", tuple(str(a) for a in typing.get_args(hint)), False
    if origin is tuple:
        return "ints", (), False
    for kind, cls in (("bool", bool), ("int", int), ("float", float), ("str", str)):
        if hint is cls:
            return kind, (), False
    raise TypeError(f"unsupported option type {hint!r}")


def describe_options(config_cls: type) -> list[OptionSpec]:
    """The options of a config dataclass declared with :func:`option`, in field order."""
    hints = typing.get_type_hints(config_cls)
    specs = []
    for f in dataclasses.fields(config_cls):
        info = f.metadata.get(_META_KEY)
        if info is None:
            continue
        kind, choices, optional = _kind(hints[f.name])
        specs.append(
            OptionSpec(
                name=f.name,
                kind=kind,
                default=f.default,
                info=info,
                choices=choices,
                optional=optional,
            )
        )
    return specs


def resumable_options(config_cls: type) -> frozenset[str]:
    """Names of the options declared ``resumable=True``."""
    return frozenset(spec.name for spec in describe_options(config_cls) if spec.info.resumable)
