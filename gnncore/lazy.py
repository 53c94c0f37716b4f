"""Package attributes loaded on first use (PEP 562).

A package that re-exports names from heavy modules (torch, PyG, MLflow: seconds
to import) lists them here instead of importing them, so that importing a light
sibling (a config, a format constant) does not load them. Dagster's code
location imports every asset module in every step process, and the CLI's
torch-free verbs (``validate``, ``ingest``) stay fast.

A module that uses a heavy library on some paths only takes it as
:func:`lazy_module` (Polars: 0.13 s of every ingestion's start-up, which
integer ids, parsed in C++, do not need)::

    if TYPE_CHECKING:
        import polars as pl
    else:
        pl = lazy_module("polars")
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``where[name]`` on first access.

    Args:
        package: The package's ``__name__`` (named in the ``AttributeError``).
        where: Attribute name -> the module that defines it.

    Returns:
        The function to assign to the package's ``__getattr__``. The value is
        cached in the package's namespace, so later lookups skip the hook.
    """

    def __getattr__(name: str) -> Any:
        module_name = where.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module_name), name)
        vars(importlib.import_module(package))[name] = value
        return value

    return __getattr__


class _LazyModule(types.ModuleType):
    """Stands for the module ``name``, imported at the first attribute looked up."""

    def __init__(self, name: str) -> None:
        super().__init__(name)

    def __getattr__(self, attribute: str) -> Any:
        # only names missing here come this way: every one from the real module
        # (importlib's lock makes a first use from two threads import it once)
        return getattr(importlib.import_module(self.__name__), attribute)


def lazy_module(name: str) -> types.ModuleType:
    """A stand-in for the module ``name`` that imports it on first use (an
    attribute looked up), not before. Not registered in ``sys.modules``: an
    ``import name`` elsewhere imports the real one."""
    return _LazyModule(name)
