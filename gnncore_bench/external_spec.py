"""``--external NAME=CMD`` of ``gnncore bench partition``: the template checked
as the command line is parsed, before any work (:mod:`gnncore_bench.external`
runs it). Only the standard library and the built-in method names are needed
here, so building the parser loads nothing more.

The placeholders, filled in each argument after :func:`shlex.split`:
``{metis_graph}`` (required), ``{parts}``, ``{output}``, ``{seed}``,
``{threads}`` and ``{imbalance}``; ``{{`` and ``}}`` are literal braces.
"""

from __future__ import annotations

import argparse
import re
import shlex
import string
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The placeholders a command template may use.
PLACEHOLDERS = ("metis_graph", "parts", "output", "seed", "threads", "imbalance")
#: Default seconds an external command may run.
DEFAULT_TIMEOUT = 3600.0

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


@dataclass(frozen=True)
class ExternalPartitioner:
    """A validated ``--external NAME=CMD``.

    Attributes:
        name: The row's method name (also its run directory's stem).
        template: ``CMD`` as given.
        argv: ``CMD`` split into arguments, placeholders unfilled.
        fields: The placeholders ``CMD`` uses.
    """

    name: str
    template: str
    argv: tuple[str, ...]
    fields: frozenset[str]

    @property
    def writes_output(self) -> bool:
        """Whether the command is told where to write (``{output}``)."""
        return "output" in self.fields

    def command(self, **values: Any) -> list[str]:
        """The argv with every placeholder filled from ``values``."""
        return [arg.format(**values) for arg in self.argv]

    def output_path(self, metis_graph: Path, parts: int, output: Path) -> Path:
        """Where the partition file is read from: ``output`` when the command
        gets ``{output}``, else ``<metis_graph>.part.<parts>``."""
        return output if self.writes_output else Path(f"{metis_graph}.part.{parts}")


def parse_external(spec: str, reserved: Collection[str] = ()) -> ExternalPartitioner:
    """``NAME=CMD`` as an :class:`ExternalPartitioner`, checked before any work.

    Args:
        spec: The ``--external`` argument.
        reserved: Names taken already (the built-in methods).

    Raises:
        ValueError: No ``=``, an empty or unusable name, a name in
            ``reserved``, an empty or unparsable command, an unknown or
            malformed placeholder, or no ``{metis_graph}``; the message names
            ``--external`` and the partitioner.
    """
    name, eq, template = spec.partition("=")
    name = name.strip()
    if not eq:
        raise ValueError(f"--external expects NAME=CMD, got {spec!r}")
    if not name:
        raise ValueError(f"--external {spec!r}: the name before '=' is empty")
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"--external {name}: a name is letters, digits and _.+- (it names a directory)"
        )
    if name in reserved:
        raise ValueError(f"--external {name}: the name is a built-in method's; choose another name")
    try:
        argv = tuple(shlex.split(template))
    except ValueError as exc:
        raise ValueError(f"--external {name}: cannot split {template!r}: {exc}") from None
    if not argv:
        raise ValueError(f"--external {name}: the command after '=' is empty")
    fields = _placeholders(name, template, argv)
    if "metis_graph" not in fields:
        raise ValueError(
            f"--external {name}: {template!r} has no {{metis_graph}} (the graph file it reads)"
        )
    external = ExternalPartitioner(name, template, argv, frozenset(fields))
    try:  # a format spec that cannot take the value fails here, not mid-bench
        external.command(**{key: 1 if key == "parts" else "x" for key in PLACEHOLDERS})
    except (ValueError, TypeError) as exc:
        raise ValueError(f"--external {name}: bad placeholder in {template!r}: {exc}") from None
    return external


def _placeholders(name: str, template: str, argv: tuple[str, ...]) -> set[str]:
    fields: set[str] = set()
    allowed = ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
    for arg in argv:
        try:
            parsed = list(string.Formatter().parse(arg))
        except ValueError as exc:
            raise ValueError(
                f"--external {name}: bad braces in {template!r} ({exc}; "
                "write {{ and }} for literal braces)"
            ) from None
        for _, field, _, _ in parsed:
            if field is None:
                continue
            if field not in PLACEHOLDERS:
                raise ValueError(
                    f"--external {name}: unknown placeholder {{{field}}} in {template!r}; "
                    f"use {allowed}"
                )
            fields.add(field)
    return fields


def check_names(externals: Collection[ExternalPartitioner], methods: Collection[str]) -> None:
    """Refuse two externals of one name, or one named as a method of the run.

    Raises:
        ValueError: Naming the repeated ``--external`` name.
    """
    seen: set[str] = set(methods)
    for external in externals:
        if external.name in seen:
            raise ValueError(f"--external {external.name}: the name is given twice")
        seen.add(external.name)


def external_argument(spec: str) -> ExternalPartitioner:
    """argparse's ``type`` for ``--external``: :func:`parse_external` with the
    built-in methods reserved; its ``ValueError`` as an ``ArgumentTypeError``."""
    from gnncore.partition.methods import METHODS

    try:
        return parse_external(spec, reserved=METHODS)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_external_arguments(parser: argparse.ArgumentParser) -> None:
    """``--external NAME=CMD`` (repeatable) and ``--external-timeout SECONDS``."""
    parser.add_argument(
        "--external",
        type=external_argument,
        action="append",
        default=[],
        metavar="NAME=CMD",
        help="an outside partitioner beside the methods (repeatable): CMD is split like a "
        "shell line (no shell) with {metis_graph} (required: OUT/graph.metis, written "
        "once), {parts}, {output} (the partition file it must write; without it "
        "{metis_graph}.part.{parts} is read), {seed}, {threads}, {imbalance}; e.g. "
        "heistream='heistream {metis_graph} --k={parts} --output_filename={output}'",
    )
    parser.add_argument(
        "--external-timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help="seconds an --external command may run before it is killed (its row fails)",
    )
