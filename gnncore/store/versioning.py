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

The stages and what they record:

* generated dataset (``gnncore.synth.write_ogb_raw_versioned``): key over the
  generator's spec, recorded in ``stage.json`` (:data:`STAGE_FILE`);
* ingestion (``gnncore.io.ingest_versioned``): key over the ingest settings
  and :func:`input_digest` of the raw source, recorded as ``lineage`` in the
  graph manifest;
* partitioning (``gnncore.partition.run.partition_stage_key``): key over the
  label-changing settings and the sha256 of the graph's ``manifest.json``,
  recorded as ``stage_key`` in the partition manifest.

Because the graph manifest records its lineage, a graph ingested from other
input has another manifest sha256, so its partitions get other keys too.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gnncore.names import safe_name
from gnncore.store.manifest import sha256_of

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
    """``<prefix>-<key>``: readable, and unique per settings and input.

    Raises:
        InputError: When ``prefix`` (a dataset name, mostly) is not a safe name
            (:func:`gnncore.names.safe_name`): the result names a directory.
    """
    safe_name(prefix, what="directory name")
    return f"{prefix}-{key}"


#: The record a stage without a manifest of its own (a generated raw dataset)
#: keeps in its output directory: ``{"stage", "stage_key", "settings", ...}``.
STAGE_FILE = "stage.json"


def input_digest(path: str | os.PathLike[str]) -> str:
    """The sha256 of a raw input: a file's bytes, or a directory's files.

    For a directory, every regular file below it (names starting with ``.``
    skipped, symlinks followed) contributes its path relative to ``path`` and
    the sha256 of its bytes, in sorted order; so renaming, adding, removing or
    editing a file changes the digest, and copying the input elsewhere does
    not. It reads every byte of the input (as ingesting it does).
    """
    root = Path(path)
    if root.is_file():
        return sha256_of(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such file or directory")
    digest = hashlib.sha256()
    files = []
    for directory, subdirs, names in os.walk(root, followlinks=True):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        files += [Path(directory) / n for n in names if not n.startswith(".")]
    for file in sorted(files, key=lambda f: f.relative_to(root).as_posix()):
        if file.is_file():
            digest.update(f"{file.relative_to(root).as_posix()}\0{sha256_of(file)}\n".encode())
    return digest.hexdigest()


def read_stage_record(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The :data:`STAGE_FILE` record of ``directory``; ``None`` if absent or unreadable."""
    path = Path(directory) / STAGE_FILE
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) else None


def write_stage_record(directory: str | os.PathLike[str], record: Mapping[str, Any]) -> None:
    """Write ``record`` as ``directory``/:data:`STAGE_FILE` (before the directory
    is renamed into place, so a complete output always has its record)."""
    text = json.dumps(dict(record), indent=2, sort_keys=True, default=str)
    (Path(directory) / STAGE_FILE).write_text(text + "\n")
