"""Fixtures of the store's tests."""

from __future__ import annotations

import errno
import os

import pytest


@pytest.fixture
def refuse_direct_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.open`` refuses ``O_DIRECT`` with EINVAL, as tmpfs and some overlays answer."""
    real_open = os.open

    def no_direct(path, flags, *args):
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", no_direct)
