"""Type aliases and capability flags, worked out once at import."""

from __future__ import annotations

import os
from typing import Union

import numpy as np

PathLike = Union[str, "os.PathLike[str]"]
IndexArray = np.ndarray

try:  # The compiled core is part of every install; the flag keeps errors readable.
    from gnncore import _C  # noqa: F401

    WITH_CSRC = True
except ImportError:  # pragma: no cover - only on a broken install
    WITH_CSRC = False


def require_csrc() -> None:
    """Raise an ImportError telling the user how to build the C++ core."""
    if not WITH_CSRC:
        raise ImportError(
            "gnncore's C++ extension (gnncore._C) is not built; reinstall with "
            "`pip install -e .` (needs a C++17 compiler and CMake)"
        )
