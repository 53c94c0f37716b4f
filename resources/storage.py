"""Where every stage writes its directories."""

import os
from pathlib import Path

import dagster as dg
from pydantic import Field

from gnncore.names import safe_name


def check_safe_name(name: str, what: str = "dataset name") -> str:
    """``name`` when it is a safe directory name, the library's rule
    (:func:`gnncore.names.safe_name`: one path component, no separator, ``..``,
    control character or leading ``.``/``-``, at most 128 characters, the whole
    string checked), else :class:`gnncore.errors.InputError` (a ``ValueError``)
    naming ``what``."""
    return safe_name(name, what=what)


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
        return self.resolved_root() / stage / check_safe_name(name, what=f"{stage} directory")

    def inbox_dir(self) -> Path:
        """The drop folder (``inbox``, else ``<root>/inbox``), created if missing."""
        folder = Path(self.inbox).expanduser().absolute() if self.inbox else None
        folder = folder or self.resolved_root() / "inbox"
        folder.mkdir(parents=True, exist_ok=True)
        return folder
