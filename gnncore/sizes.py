"""Byte sizes as people write them: ``4GiB``, ``512MiB``, ``64K``, ``1.5 GiB``, ``4096``."""

from __future__ import annotations

import re

_UNITS = {
    "": 1,
    "b": 1,
    "k": 2**10,
    "kib": 2**10,
    "m": 2**20,
    "mib": 2**20,
    "g": 2**30,
    "gib": 2**30,
    "t": 2**40,
    "tib": 2**40,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*")


def parse_size(text: str) -> int:
    """Bytes in a size such as ``8GiB``, ``512M``, ``1.5 GiB`` or ``4096``.

    Units are binary: ``K``/``KiB`` = 2**10, ``M``/``MiB``, ``G``/``GiB``,
    ``T``/``TiB``; ``B`` or no unit means bytes; case does not matter.
    ``MB``/``GB`` are refused as ambiguous (10**9 or 2**30?). Raises
    ``ValueError`` (so it works as an argparse ``type=``), also for zero.
    """
    match = _SIZE.fullmatch(text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise ValueError(
            f"not a size: {text!r}; write e.g. 8GiB, 512MiB, 64K or a number of bytes "
            "(units are binary: K, M, G, T or KiB, MiB, GiB, TiB)"
        )
    value = int(float(match.group(1)) * _UNITS[unit])
    if value <= 0:
        raise ValueError(f"not a size: {text!r} is zero bytes")
    return value


def format_size(nbytes: float) -> str:
    """``nbytes`` in the largest binary unit that keeps it at least 1 (``1.5 GiB``)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(nbytes) < 1024:
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} TiB"
