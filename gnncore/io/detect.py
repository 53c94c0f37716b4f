"""Guess the input format of a path (``format="auto"``).

* a directory holding ``raw/edge.csv.gz`` (or being such a ``raw/``) -> ``ogb``
* a directory holding ``raw/ind.<name>.x`` (or being such a ``raw/``) -> ``planetoid``
* a directory holding ``train.txt`` or ``raw/train.txt`` -> ``kg``
* a file named ``*.parquet`` / ``*.pq`` -> ``parquet``
* any other file -> ``edgelist``
"""

from __future__ import annotations

import os
from pathlib import Path

from gnncore.errors import InputError

FORMATS = ("edgelist", "parquet", "ogb", "planetoid", "kg")
OGB_EDGE_FILES = ("edge.csv.gz", "edge.csv")


def _raw_dirs(path: Path) -> list[Path]:
    dirs = [path / "raw"]
    if path.name == "raw":
        dirs.append(path)
    return [d for d in dirs if d.is_dir()]


def detect_format(source: str | os.PathLike[str]) -> str:
    """Return one of :data:`FORMATS` for ``source`` (see the module docstring)."""
    path = Path(source)
    if not path.exists():
        raise InputError("no such file or directory", path)
    if path.is_dir():
        raws = _raw_dirs(path)
        if any((raw / f).is_file() for raw in raws for f in OGB_EDGE_FILES):
            return "ogb"
        if any(any(raw.glob("ind.*.x")) for raw in raws):
            return "planetoid"
        if (path / "train.txt").is_file() or (path / "raw" / "train.txt").is_file():
            return "kg"
        raise InputError(
            "cannot tell the dataset format of this directory (expected an OGB "
            "raw/edge.csv.gz, Planetoid raw/ind.*.x files or a KG train.txt); "
            "pass --format",
            path,
        )
    if path.suffix.lower() in (".parquet", ".pq"):
        return "parquet"
    return "edgelist"
