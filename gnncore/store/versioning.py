"""Versioned stage outputs: a stage writes to a directory named by its settings and input.

A stage's *key* is a short hash of the stage's name, the settings that change
its output, and the hashes of its inputs (the sha256 of the input directory's
manifest). The stage writes to ``<readable prefix>-<key>`` and records the key
in its own manifest, so

* two runs with different settings (or of a changed input) never share a
  directory: ``partition_metis`` and ``graph_partition`` with other settings
  both keep their outputs;
* re-running a stage with the same settings on the same input finds its
  directory complete, with the same key, and reuses it instead of rewriting.

Settings that only change how fast or how visibly a stage runs (worker
counts, progress output) stay out of the key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

#: Bumped when what a key covers changes, so old directories are not reused.
STAGE_KEY_VERSION = 1

#: Hex digits of the key kept in directory names (48 bits).
KEY_LENGTH = 12


def stage_key(stage: str, settings: Mapping[str, Any], inputs: Mapping[str, str]) -> str:
    """The key of running ``stage`` with ``settings`` on ``inputs`` (name -> hash)."""
    canonical = json.dumps(
        {
            "stage": stage,
            "version": STAGE_KEY_VERSION,
            "settings": dict(settings),
            "inputs": dict(inputs),
        },
        sort_keys=True,
        default=str,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:KEY_LENGTH]


def versioned_name(prefix: str, key: str) -> str:
    """``<prefix>-<key>``: readable, and unique per settings and input."""
    return f"{prefix}-{key}"
