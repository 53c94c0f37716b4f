"""Planetoid citation graphs (Cora, CiteSeer, PubMed) through PyG.

``source`` is a dataset folder holding ``raw/ind.<name>.{x,tx,allx,y,ty,ally,
graph,test.index}`` (e.g. ``../shared/datasets/planetoid/Cora``; the name is
the folder name). The raw files are copied into a temporary directory and read
with ``torch_geometric.datasets.Planetoid(tmp, name)`` -- PyG writes its
``processed/`` folder there, never next to the source, and never downloads:
a missing raw file is an :class:`InputError` naming it.

PyG's ``edge_index`` lists each undirected edge in both directions, so the
report counts those columns as input edges and every reverse copy as a
duplicate (Cora: 10,556 input, 5,278 duplicates, 5,278 canonical edges).
Features (float32), labels (int64) and the Planetoid split masks (as node-id
arrays) are written too. ``directed=True`` keeps PyG's arcs as directed edges.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from gnncore.errors import InputError
from gnncore.io.canonical import canonicalize, write_graph
from gnncore.io.report import IngestReport
from gnncore.store.writer import GraphDirWriter

NAMES = ("cora", "citeseer", "pubmed")
RAW_SUFFIXES = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")


def planetoid_root(source: str | os.PathLike[str]) -> Path:
    """The dataset folder of ``source`` (the folder itself or its ``raw/``)."""
    path = Path(source)
    if path.name == "raw" and any(path.glob("ind.*.x")):
        return path.parent
    return path


def load_planetoid(root: Path):
    """Load the PyG ``Data`` of a Planetoid folder without touching ``root``."""
    name = root.name
    if name.lower() not in NAMES:
        raise InputError(
            f"unknown Planetoid dataset {name!r} (the folder name must be one of "
            "Cora, CiteSeer, PubMed)",
            root,
        )
    raw = root / "raw"
    for suffix in RAW_SUFFIXES:
        file = raw / f"ind.{name.lower()}.{suffix}"
        if not file.is_file():
            raise InputError("missing Planetoid raw file (nothing is downloaded)", file)
    # lazy: torch_geometric is heavy and needed by this format only
    from torch_geometric.datasets import Planetoid

    with tempfile.TemporaryDirectory(prefix="gnncore-planetoid-") as tmp:
        target = Path(tmp) / name / "raw"
        target.mkdir(parents=True)
        for suffix in RAW_SUFFIXES:  # copyfile: the copies stay writable (and removable)
            file_name = f"ind.{name.lower()}.{suffix}"
            shutil.copyfile(raw / file_name, target / file_name)
        quiet = io.StringIO()
        try:
            with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
                dataset = Planetoid(tmp, name)
                data = dataset[0]
        except (ValueError, IndexError, EOFError, OSError, RuntimeError) as exc:
            raise InputError(f"PyG could not read the Planetoid raw files ({exc})", raw) from exc
    return data


def ingest_planetoid(
    source: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    directed: bool = False,
    name: str | None = None,
    seed: int = 0,
) -> IngestReport:
    """Ingest a Planetoid dataset folder into ``out_dir``."""
    started = time.perf_counter()
    root = planetoid_root(source)
    data = load_planetoid(root)
    num_nodes = int(data.num_nodes)
    edge_index = data.edge_index.numpy()
    edges = canonicalize(edge_index[0], edge_index[1], num_nodes, directed=directed)
    x = data.x.numpy().astype(np.float32, copy=False)
    finite = np.isfinite(x).all(axis=1)
    if not finite.all():
        raise InputError(
            "feature row holds NaN or inf", root / "raw", row=int(np.flatnonzero(~finite)[0])
        )
    y = data.y.numpy().astype(np.int64, copy=False)
    splits = [np.flatnonzero(data[m].numpy()) for m in ("train_mask", "val_mask", "test_mask")]

    def before(writer: GraphDirWriter) -> None:
        writer.save_array("features", x)
        writer.save_array("labels", y)
        writer.num_features = int(x.shape[1])
        writer.num_classes = int(y.max()) + 1 if len(y) else 0
        writer.save_splits(*splits)

    details = {"num_train": len(splits[0]), "num_val": len(splits[1]), "num_test": len(splits[2])}
    return write_graph(
        out_dir,
        fmt="planetoid",
        source=source,
        name=name or root.name,
        num_nodes=num_nodes,
        edges=edges,
        directed=directed,
        seed=seed,
        before=before,
        details=details,
        started=started,
    )
