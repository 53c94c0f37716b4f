"""OGB node-property-prediction datasets in their raw CSV layout.

``DIR`` is the dataset root (or its ``raw/`` directory)::

    DIR/raw/edge.csv.gz           "src,dst" per line, no header (required)
    DIR/raw/num-node-list.csv.gz  the node count (optional)
    DIR/raw/node-feat.csv.gz      one row of floats per node (optional)
    DIR/raw/node-label.csv.gz     one integer label per node (optional)
    DIR/split/<name>/{train,valid,test}.csv.gz   one node id per line (optional;
                                  the only split directory, or the first sorted)

Plain ``.csv`` files are accepted too. Node ids are used as they are (no
remapping, isolated nodes kept). The node count is ``num-node-list`` when
present, else the feature row count, else the label row count, else the
largest edge id + 1. Features are streamed in row batches into
``features.npy`` (float32); labels go to ``labels.npy`` (int64, ``num_classes``
= largest label + 1) and splits to ``train_idx``/``val_idx``/``test_idx``.

Errors name the file and 1-based line: non-numeric values, negative or
out-of-range ids and labels, NaN/inf features, row counts that differ from the
node count, split ids out of range or repeated, splits that overlap (naming
both split files and the node), truncated or corrupt gzip data.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gnncore.errors import InputError
from gnncore.io.canonical import canonicalize, write_graph
from gnncore.io.compression import check_gzip_name, gzip_error, is_gzip
from gnncore.io.readers.edge_layout import Layout, iter_lines
from gnncore.io.readers.edge_problems import (
    find_bad_line,
    int_token_problem,
    line_regex,
    locate_problem,
)
from gnncore.io.readers.edgelist import read_edges
from gnncore.io.report import IngestReport
from gnncore.lazy import lazy_module
from gnncore.store.writer import GraphDirWriter

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")

SPLIT_FILES = (("train", "train_idx"), ("valid", "val_idx"), ("test", "test_idx"))
FEATURE_BATCH_ROWS = 1 << 16


def find_file(directory: Path, stem: str) -> Path | None:
    """``stem.csv.gz`` or ``stem.csv`` in ``directory``, if present."""
    for suffix in (".csv.gz", ".csv"):
        path = directory / f"{stem}{suffix}"
        if path.is_file():
            check_gzip_name(path)  # a .gz that is plain text would be read as text
            return path
    return None


def dataset_root(source: str | os.PathLike[str]) -> Path:
    """The dataset root of ``source`` (the root itself or its ``raw/`` dir)."""
    path = Path(source)
    if path.name == "raw" and find_file(path, "edge") is not None:
        return path.parent
    return path


# Numeric CSV files ---------------------------------------------------------------------


def locate_numeric(
    path: Path, ncols: int, *, integer: bool, what: str, max_value: int | None = None
) -> None:
    """Raise for the first bad line of a comma-separated numeric file, if any."""
    plural = "s" if ncols > 1 else ""

    def check(text: str) -> str | None:
        if not text.strip():
            return f"blank line (expected {ncols} comma-separated value{plural})"
        tokens = [t.strip() for t in text.split(",")]
        if len(tokens) != ncols:
            return f"expected {ncols} value{plural}, found {len(tokens)}"
        for token in tokens:
            if integer:
                problem = int_token_problem(token, what, max_value)
                if problem:
                    return problem
                continue
            try:
                value = float(token)
            except ValueError:
                return f"{what} {token!r} is not a number"
            if not math.isfinite(value):
                return f"{what} is {token} (NaN or inf)"
        return None

    if integer:
        valid = line_regex(",", [True] * ncols)
    else:
        number = r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*"
        valid = f"^{number}(?:,{number}){{{ncols - 1}}}$"

    def suspect(line: pl.Expr) -> pl.Expr:
        bad = ~line.str.contains(valid)
        if integer and max_value is not None:
            value = line.str.strip_chars().str.to_integer(strict=False)
            bad = bad | (value > max_value).fill_null(False)
        return bad

    find_bad_line(path, check, suspect, skip_comments=False, skip_blank=False)


def read_int_column(path: Path, what: str, *, max_value: int | None = None) -> np.ndarray:
    """One non-negative integer per line (labels, split ids, node counts)."""
    lf = pl.scan_csv(path, has_header=False, quote_char=None, schema={"v": pl.Int64})
    try:
        df = lf.collect(engine="streaming")
    except pl.exceptions.PolarsError:
        locate_numeric(path, 1, integer=True, what=what, max_value=max_value)
        raise InputError(f"could not be parsed as one {what} per line", path) from None
    except OSError as exc:
        if is_gzip(path):
            raise gzip_error(path, exc) from exc
        raise
    values = df["v"]
    if values.null_count():
        locate_numeric(path, 1, integer=True, what=what, max_value=max_value)
        row = int(values.is_null().arg_true()[0])
        raise InputError(f"a line lacks a {what}", path, line=row + 1)
    arr = values.to_numpy()
    bad = arr < 0 if max_value is None else (arr < 0) | (arr > max_value)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        value = int(arr[row])
        problem = (
            f"negative {what} {value}"
            if value < 0
            else f"{what} {value} is out of range (at most {max_value})"
        )
        raise InputError(problem, path, line=row + 1)
    return arr


def count_lines(path: Path) -> int:
    """Data rows of a headerless CSV file (for the node count from features)."""
    lf = pl.scan_csv(
        path, has_header=False, quote_char=None, separator="\x1f", schema={"line": pl.String}
    )
    try:
        return int(lf.select(pl.len()).collect(engine="streaming").item())
    except OSError as exc:
        if is_gzip(path):
            raise gzip_error(path, exc) from exc
        raise


def write_features(writer: GraphDirWriter, path: Path, num_nodes: int) -> int:
    """Stream ``path`` into ``features.npy`` in row batches; return the column count."""
    first = next((text for _, text in iter_lines(path)), "")
    if not first.strip():
        raise InputError("empty feature file" if not first else "blank line", path, line=1)
    ncols = len(first.split(","))
    schema = {f"x{i}": pl.Float32 for i in range(ncols)}
    lf = pl.scan_csv(path, has_header=False, quote_char=None, schema=schema)
    out = writer.open_array("features", np.float32, (num_nodes, ncols))
    row = 0
    try:
        for batch in lf.collect_batches(chunk_size=FEATURE_BATCH_ROWS, engine="streaming"):
            n = batch.height
            if row + n > num_nodes:
                raise InputError(
                    f"more feature rows than the {num_nodes} nodes", path, line=num_nodes + 1
                )
            if sum(batch.null_count().row(0)):
                locate_numeric(path, ncols, integer=False, what="feature value")
                raise InputError("a feature row lacks values", path)
            block = batch.to_numpy().astype(np.float32, copy=False)
            finite = np.isfinite(block).all(axis=1)
            if not finite.all():
                bad = int(np.flatnonzero(~finite)[0])
                raise InputError("feature row holds NaN or inf", path, line=row + bad + 1)
            out[row : row + n] = block
            row += n
    except pl.exceptions.PolarsError:
        locate_numeric(path, ncols, integer=False, what="feature value")
        raise InputError("could not be parsed as comma-separated floats", path) from None
    except OSError as exc:
        if is_gzip(path):
            raise gzip_error(path, exc) from exc
        raise
    if row != num_nodes:
        raise InputError(
            f"file ends after {row} feature rows; expected {num_nodes} (one per node)",
            path,
            line=row + 1,
        )
    out.flush()
    del out
    writer.num_features = ncols
    return ncols


def read_splits(root: Path, num_nodes: int) -> tuple[str | None, dict[str, np.ndarray]]:
    """The node ids of the split directory (``None`` and ``{}`` when absent)."""
    split_root = root / "split"
    if not split_root.is_dir():
        return None, {}
    names = sorted(d.name for d in split_root.iterdir() if d.is_dir())
    if not names:
        return None, {}
    name = names[0]
    directory = split_root / name
    owner = np.zeros(num_nodes, dtype=np.int8)  # 1 + index of the split holding the node
    files: list[Path] = []
    splits: dict[str, np.ndarray] = {}
    for stem, key in SPLIT_FILES:
        path = find_file(directory, stem)
        if path is None:
            raise InputError(f"missing {stem}.csv.gz in the split directory", directory)
        ids = read_int_column(path, "node id", max_value=num_nodes - 1)
        order = np.argsort(ids, kind="stable")
        repeat = np.flatnonzero(ids[order][1:] == ids[order][:-1])
        if len(repeat):
            row = int(order[repeat + 1].min())
            raise InputError(
                f"node id {int(ids[row])} is repeated in this split", path, line=row + 1
            )
        clash = np.flatnonzero(owner[ids])
        if len(clash):
            row = int(clash[0])
            other = files[owner[ids[row]] - 1]
            raise InputError(
                f"node id {int(ids[row])} is also in {other} (splits overlap)", path, line=row + 1
            )
        files.append(path)
        owner[ids] = len(files)
        splits[key] = ids
    return name, splits


# Ingestion -----------------------------------------------------------------------------


def ingest_ogb(
    source: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    directed: bool = False,
    name: str | None = None,
    seed: int = 0,
) -> IngestReport:
    """Ingest an OGB node-property dataset directory into ``out_dir``."""
    started = time.perf_counter()
    root = dataset_root(source)
    raw = root / "raw"
    edge_file = find_file(raw, "edge")
    if edge_file is None:
        raise InputError("missing raw/edge.csv.gz (not an OGB dataset directory)", root)
    feat_file = find_file(raw, "node-feat")
    label_file = find_file(raw, "node-label")
    count_file = find_file(raw, "num-node-list")

    declared = None
    if count_file is not None:
        counts = read_int_column(count_file, "node count")
        if len(counts) != 1:
            raise InputError(
                f"lists {len(counts)} graphs; only single-graph "
                "(node-property) datasets are supported",
                count_file,
            )
        declared = int(counts[0])

    parsed = read_edges(edge_file, id_type="int", layout=Layout(",", False, 2, 0))
    src, dst = parsed.src, parsed.dst
    assert isinstance(src, np.ndarray) and isinstance(dst, np.ndarray)  # integer ids: numpy
    labels = None if label_file is None else read_int_column(label_file, "label")

    if declared is not None:
        num_nodes = declared
    elif feat_file is not None:
        num_nodes = count_lines(feat_file)
    elif labels is not None:
        num_nodes = len(labels)
    else:
        num_nodes = int(max(src.max(), dst.max())) + 1
    if max(int(src.max()), int(dst.max())) >= num_nodes:
        locate_problem(edge_file, parsed.layout, as_int=True, max_id=num_nodes - 1)
        raise InputError(f"node id out of range (the graph has {num_nodes} nodes)", edge_file)
    if labels is not None and len(labels) != num_nodes:
        raise InputError(
            f"has {len(labels)} labels; expected {num_nodes} (one per node)",
            label_file,
            line=min(len(labels), num_nodes) + 1,
        )
    split_name, splits = read_splits(root, num_nodes)

    edges = canonicalize(src, dst, num_nodes, directed=directed)
    del src, dst, parsed

    details: dict = {
        "split": split_name,
        **{f"num_{k.removesuffix('_idx')}": len(v) for k, v in splits.items()},
    }

    def before(writer: GraphDirWriter) -> None:
        if feat_file is not None:
            write_features(writer, feat_file, num_nodes)
        if labels is not None:
            writer.save_array("labels", labels.astype(np.int64, copy=False))
            writer.num_classes = int(labels.max()) + 1 if len(labels) else 0
        if splits:
            writer.save_splits(splits["train_idx"], splits["val_idx"], splits["test_idx"])

    return write_graph(
        out_dir,
        fmt="ogb",
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
