"""Byte sizes as people write them: ``4GiB``, ``512MiB``, ``1.5G``, ``300000``."""

from __future__ import annotations

import re

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1000,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1000**2,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1000**3,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tb": 1000**4,
    "tib": 1 << 40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | int) -> int:
    """Bytes in ``text``: a number with an optional unit (``B``; ``KiB``/``MiB``/
    ``GiB``/``TiB`` or ``K``/``M``/``G``/``T``, powers of 1024; ``KB``/``MB``/
    ``GB``/``TB``, powers of 1000), case-insensitive.

    Raises:
        ValueError: Not a size, or zero or negative.
    """
    if isinstance(text, int):
        value = text
    else:
        match = _SIZE.match(text)
        unit = match.group(2).lower() if match else ""
        if match is None or unit not in _UNITS:
            raise ValueError(f"{text!r} is not a size (e.g. 4GiB, 512MiB, 1000000)")
        value = int(float(match.group(1)) * _UNITS[unit])
    if value <= 0:
        raise ValueError(f"size {text!r} must be positive")
    return value


def format_size(nbytes: float) -> str:
    """``nbytes`` in the largest binary unit that keeps it >= 1 (``1.5 GiB``)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(nbytes) < 1024:
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} TiB"
