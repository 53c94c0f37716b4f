"""Parquet edge tables.

The edge columns are ``src`` and ``dst`` when the table has both, else its
first two columns (any further columns, e.g. weights, are ignored). Integer
columns are integer ids (they must be non-negative); string columns are string
ids. ``id_type="int"`` converts string columns that hold integers (and fails
on the first one that does not); ``id_type="string"`` converts integer columns
to strings. Ids are remapped to ``0..N-1`` like text edge lists. Errors name
the 0-based row.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from gnncore.errors import InputError
from gnncore.io.readers.edgelist import ID_TYPES, default_name, write_remapped
from gnncore.io.readers.node_table import NodeTable
from gnncore.io.report import IngestReport
from gnncore.lazy import lazy_module
from gnncore.progress import stage

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")


def _first_row(mask: pl.Series) -> int:
    return int(mask.arg_true()[0])


def read_parquet_edges(
    path: str | os.PathLike[str], *, id_type: str = "auto"
) -> tuple[np.ndarray | pl.Series, np.ndarray | pl.Series, str, list[str]]:
    """Read the edge columns; returns ``(src, dst, id_type, column_names)``."""
    path = Path(path)
    if id_type not in ID_TYPES:
        raise ValueError(f"id_type must be one of {ID_TYPES}, not {id_type!r}")
    try:
        schema = pl.read_parquet_schema(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputError(f"not a readable Parquet file ({exc})", path) from exc
    names = list(schema)
    stage("reading edges")
    if "src" in names and "dst" in names:
        columns = ["src", "dst"]
    elif len(names) >= 2:
        columns = names[:2]
    else:
        raise InputError(f"an edge table needs 2 columns (src, dst), found {len(names)}", path)
    try:
        df = (
            pl.scan_parquet(path)
            .select(src=pl.col(columns[0]), dst=pl.col(columns[1]))
            .collect(engine="streaming")
        )
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputError(f"not a readable Parquet file ({exc})", path) from exc
    if df.height == 0:
        raise InputError("empty table: no edges", path)
    kinds = []
    for key, column in zip(("src", "dst"), columns):
        dtype = df[key].dtype
        if dtype.is_integer():
            kinds.append("int")
        elif dtype in (pl.String, pl.Categorical) or isinstance(dtype, pl.Enum):
            kinds.append("string")
        else:
            raise InputError(
                f"column {column!r} has type {dtype}; node ids must be integers or strings", path
            )
        nulls = df[key].is_null()
        if nulls.any():
            raise InputError(f"missing node id in column {column!r}", path, row=_first_row(nulls))
    if id_type == "string" or (id_type == "auto" and "string" in kinds):
        src = df["src"].cast(pl.String)
        dst = df["dst"].cast(pl.String)
        return src, dst, "string", columns
    out = []
    for key, column in zip(("src", "dst"), columns):
        series = df[key]
        if series.dtype == pl.String or series.dtype == pl.Categorical:
            series = series.cast(pl.String)
            as_int = series.str.strip_chars().str.to_integer(strict=False)
            bad = as_int.is_null()
            if bad.any():
                row = _first_row(bad)
                raise InputError(
                    f"node id {series[row]!r} in column {column!r} is not an "
                    "integer (ids are declared integers)",
                    path,
                    row=row,
                )
            series = as_int
        # max() of a non-empty UInt64 column without nulls is an int
        if series.dtype == pl.UInt64 and cast(int, series.max()) > np.iinfo(np.int64).max:
            row = _first_row(series > np.iinfo(np.int64).max)
            raise InputError(
                f"node id {series[row]} in column {column!r} does not fit in 64 bits", path, row=row
            )
        series = series.cast(pl.Int64)
        negative = series < 0
        if negative.any():
            row = _first_row(negative)
            raise InputError(f"negative node id {series[row]} in column {column!r}", path, row=row)
        out.append(series.to_numpy())
    return out[0], out[1], "int", columns


def ingest_parquet(
    source: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    directed: bool = False,
    name: str | None = None,
    id_type: str = "auto",
    seed: int = 0,
    nodes: NodeTable | None = None,
) -> IngestReport:
    """Ingest a Parquet edge table (and its node table) into the graph directory ``out_dir``."""
    started = time.perf_counter()
    source = Path(source)
    if not source.is_file():
        raise InputError("no such file", source)
    src, dst, kind, columns = read_parquet_edges(source, id_type=id_type)
    return write_remapped(
        src,
        dst,
        kind,
        source,
        out_dir,
        directed=directed,
        fmt="parquet",
        name=name or default_name(source),
        seed=seed,
        started=started,
        details={"columns": columns},
        nodes=nodes,
    )
