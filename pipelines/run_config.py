"""Run configs built in layers (defaults, the deployment's config, a run's own)."""

from collections.abc import Mapping
from typing import Any


def merged_run_config(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` laid over it, nested mappings merged key by key
    (``extra`` wins where both set a value)."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged_run_config(out[key], value)
        else:
            out[key] = value
    return out
