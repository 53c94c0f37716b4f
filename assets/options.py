"""Dagster config classes derived from the library's option dataclasses.

A library settings class declares each option once with
:func:`gnncore.options.option` (type, default, help); :func:`options_config`
turns it into a ``dg.Config`` with the same fields, defaults, choices (``Literal``
fields show as drop-downs in the launchpad) and descriptions.
"""

from collections.abc import Mapping
from typing import Any

import dagster as dg
from pydantic import Field, create_model

from gnncore.options import describe_options


def options_config(
    config_cls: type, name: str, skip: Mapping[str, str] | None = None
) -> type[dg.Config]:
    """A ``dg.Config`` class with one field per option of ``config_cls``, except
    those in ``skip`` (name -> where the value comes from instead)."""
    fields: dict[str, Any] = {}
    for spec in describe_options(config_cls):
        if spec.name in (skip or {}):
            continue
        note = " None: the model's default." if spec.info.per_model else ""
        fields[spec.name] = (
            spec.python_type,
            Field(default=spec.plain_default, description=spec.info.help + note),
        )
    return create_model(
        name, __base__=dg.Config, __doc__=f"Options of {config_cls.__name__}.", **fields
    )
