"""Where every stage writes its directories."""

import os
import re
from pathlib import Path

import dagster as dg
from pydantic import Field

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_safe_name(name: str) -> str:
    """``name`` when it is a plain, safe directory name (letters, digits, '.', '_',
    '-', starting with a letter or digit, at most 128 characters), else ``ValueError``."""
    if not _SAFE_NAME.match(name):
        raise ValueError(f"{name!r} is not a safe directory name (letters, digits, '.', '_', '-')")
    return name


class DataRootResource(dg.ConfigurableResource):
    """The data root: datasets, graphs, partitions, checkpoints, MLflow store.

    An empty ``root`` means ``$GNNCORE_DATA_ROOT`` (read when a run starts),
    else ``./data`` relative to the working directory.
    """

    root: str = Field(
        default="", description="Data root directory; empty: $GNNCORE_DATA_ROOT or ./data."
    )
    inbox: str = Field(
        default="",
        description="Drop folder the inbox sensor watches for new edge lists; "
        "empty: <data root>/inbox.",
    )

    def resolved_root(self) -> Path:
        """The absolute data root, created if missing."""
        root = Path(self.root or os.environ.get("GNNCORE_DATA_ROOT", "data")).absolute()
        root.mkdir(parents=True, exist_ok=True)
        return root

    def stage_root(self, stage: str) -> Path:
        """``<root>/<stage>``: where a versioned stage writes ``<name>-<stage key>``."""
        return self.resolved_root() / stage

    def stage_dir(self, stage: str, name: str) -> Path:
        """``<root>/<stage>/<name>``; ``name`` must be a plain, safe name."""
        return self.resolved_root() / stage / check_safe_name(name)

    def inbox_dir(self) -> Path:
        """The drop folder (``inbox``, else ``<root>/inbox``), created if missing."""
        folder = Path(self.inbox).expanduser().absolute() if self.inbox else None
        folder = folder or self.resolved_root() / "inbox"
        folder.mkdir(parents=True, exist_ok=True)
        return folder
