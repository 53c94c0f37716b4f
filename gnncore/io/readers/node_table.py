"""Node tables: features, labels and splits of an edge list's nodes.

An edge list (text or Parquet) carries only topology. Its nodes' data comes in a
*node table* beside it, a Parquet, CSV or TSV file with a header:

* ``node_id`` (required): the node's id as the edge list spells it (integer or
  string; integer edge-list ids accept integer-valued strings here);
* ``label`` (optional): an integer class (``>= 0``) or a class name (strings are
  numbered in sorted order and the names kept as the ``classes`` table); empty
  or null means unlabelled;
* ``split`` (optional): ``train``, ``val`` (or ``valid`` / ``validation``) or
  ``test``; empty, null or ``none`` means in no split. A node in a split must be
  labelled. Without the column, the labelled nodes are split at random
  (:data:`DEFAULT_SPLIT`, seeded by the ingestion seed);
* features: a list column ``features`` (every row of one length), or else every
  other column, each numeric. With ``standardize=True`` each feature column is
  standardised to mean 0 and standard deviation 1 over the training nodes (all
  nodes when there is no training split; a constant column is only centred),
  and the mean and deviation are kept as ``feature_mean.npy`` /
  ``feature_std.npy``, so new nodes can be scaled the same way.

Every node of the edge list needs a row; a row whose id the edge list lacks adds
an isolated node. Errors name the table, the row (0-based for Parquet; the
1-based line for text, header included) and the problem.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gnncore.errors import InputError
from gnncore.io.compression import check_gzip_name
from gnncore.lazy import lazy_module
from gnncore.store.writer import GraphDirWriter

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")

ID_COLUMN = "node_id"
LABEL_COLUMN = "label"
SPLIT_COLUMN = "split"
FEATURES_COLUMN = "features"
#: Split name (lower case) -> 0 train, 1 val, 2 test.
SPLIT_NAMES = {"train": 0, "val": 1, "valid": 1, "validation": 1, "test": 2}
NO_SPLIT = ("", "none")
#: Train / val / test fractions of the labelled nodes when the table has no split column.
DEFAULT_SPLIT = (0.6, 0.2, 0.2)
TEXT_SEPARATORS = {".csv": ",", ".tsv": "\t", ".tab": "\t", ".txt": "\t"}


@dataclass(frozen=True)
class NodeTable:
    """A node table as read, one entry per row.

    Attributes:
        path (Path): The file.
        ids (pl.Series): ``node_id`` (Int64 or String), no nulls, no repeats.
        features (np.ndarray | None): float32 ``[rows, F]``, finite.
        labels (np.ndarray | None): int64 ``[rows]``, -1 = unlabelled.
        classes (list[str] | None): Class names when labels were strings.
        split (np.ndarray | None): int8 ``[rows]``: 0 train, 1 val, 2 test, -1 none.
        feature_columns (list[str]): The columns the features came from.
        text (bool): Read from a text file (errors then name 1-based lines).
        standardize (bool): Standardise the features when laid out
            (:func:`align_node_table`).
    """

    path: Path
    ids: pl.Series
    features: np.ndarray | None
    labels: np.ndarray | None
    classes: list[str] | None
    split: np.ndarray | None
    feature_columns: list[str]
    text: bool
    standardize: bool = False

    def error(self, problem: str, row: int) -> InputError:
        """An error naming row ``row`` of the table as a user sees it."""
        return _error(self.path, problem, row, self.text)

    def __len__(self) -> int:
        return len(self.ids)


def _error(path: Path, problem: str, row: int, text: bool) -> InputError:
    return InputError(problem, path, line=row + 2) if text else InputError(problem, path, row=row)


def _first(mask: pl.Series | np.ndarray) -> int:
    values = mask.to_numpy() if isinstance(mask, pl.Series) else mask
    return int(np.flatnonzero(values)[0])


def _read_frame(path: Path) -> tuple[pl.DataFrame, bool]:
    check_gzip_name(path)
    name = path.name.lower().removesuffix(".gz")
    suffix = Path(name).suffix
    try:
        if suffix in (".parquet", ".pq"):
            return pl.read_parquet(path), False
        separator = TEXT_SEPARATORS.get(suffix)
        if separator is None:
            raise InputError(
                "a node table must be .parquet, .csv or .tsv (optionally gzipped)", path
            )
        return pl.read_csv(path, separator=separator, infer_schema_length=10_000), True
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputError(f"cannot be read as a node table ({exc})", path) from exc


def node_table_columns(path: str | os.PathLike[str]) -> list[str]:
    """The column names of a node table, read from its schema or header line only."""
    path = Path(path)
    check_gzip_name(path)
    name = path.name.lower().removesuffix(".gz")
    try:
        if Path(name).suffix in (".parquet", ".pq"):
            return list(pl.read_parquet_schema(path))
        separator = TEXT_SEPARATORS.get(Path(name).suffix, ",")
        return pl.read_csv(path, separator=separator, n_rows=0).columns
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputError(f"cannot be read as a node table ({exc})", path) from exc


def read_node_table(path: str | os.PathLike[str], standardize: bool = False) -> NodeTable:
    """Read and check a node table (see the module docstring); ``standardize``
    marks its features to be standardised when laid out."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such node table", path)
    df, text = _read_frame(path)
    check_id_column(df.columns, path)
    ids, labels, classes, split = node_columns(df, path, text)
    features, columns = _features(df, path, text)
    if standardize and features is None:
        raise InputError("has no feature columns to standardise", path)
    return NodeTable(path, ids, features, labels, classes, split, columns, text, standardize)


def check_id_column(columns: list[str], path: Path) -> None:
    """Refuse a table without the ``node_id`` column (naming the ``columns`` it has)."""
    if ID_COLUMN not in columns:
        raise InputError(
            f"a node table needs a '{ID_COLUMN}' column; it has {', '.join(columns)}", path
        )


def node_columns(
    df: pl.DataFrame, path: Path, text: bool
) -> tuple[pl.Series, np.ndarray | None, list[str] | None, np.ndarray | None]:
    """The checked ``node_id``, ``label`` and ``split`` columns of a whole table
    (``df`` may hold only those): ``(ids, labels, classes, split)`` as in
    :class:`NodeTable`."""
    ids = node_id_column(df[ID_COLUMN], path, text)
    first_repeat(ids, path, text)
    labels, classes, split = label_and_split(df, path, text)
    return ids, labels, classes, split


def node_id_column(ids: pl.Series, path: Path, text: bool) -> pl.Series:
    """The ``node_id`` column checked for nulls and type, as Int64 or String."""
    if ids.null_count():
        raise _error(path, f"'{ID_COLUMN}' is empty", _first(ids.is_null()), text)
    if ids.dtype.is_integer():
        return ids.cast(pl.Int64)
    if ids.dtype == pl.String:
        return ids
    raise InputError(f"'{ID_COLUMN}' must hold integers or strings, not {ids.dtype}", path)


def first_repeat(ids: pl.Series, path: Path, text: bool) -> None:
    """Refuse an id that appears twice, naming the first row that repeats one."""
    repeated = ~ids.is_first_distinct()
    if repeated.any():
        row = _first(repeated)
        raise _error(path, f"node id {ids[row]!r} appears twice", row, text)


def label_and_split(
    df: pl.DataFrame, path: Path, text: bool
) -> tuple[np.ndarray | None, list[str] | None, np.ndarray | None]:
    """The checked ``label`` and ``split`` columns: ``(labels, classes, split)``."""
    labels, classes = _labels(df, path, text)
    return labels, classes, _split(df, path, text, labels)


def _labels(df: pl.DataFrame, path: Path, text: bool) -> tuple[np.ndarray | None, list[str] | None]:
    if LABEL_COLUMN not in df.columns:
        return None, None
    column = df[LABEL_COLUMN]
    if column.dtype.is_integer():
        values = column.cast(pl.Int64)
        negative = values.fill_null(0) < 0
        if negative.any():
            row = _first(negative)
            raise _error(path, f"label {values[row]} is negative", row, text)
        return values.fill_null(-1).to_numpy().astype(np.int64, copy=False), None
    if column.dtype == pl.String:
        stripped = column.str.strip_chars()
        named = pl.select(pl.when(stripped == "").then(None).otherwise(stripped)).to_series()
        classes = sorted(named.drop_nulls().unique().to_list())
        codes = named.replace_strict(
            classes, list(range(len(classes))), default=-1, return_dtype=pl.Int64
        )
        return codes.to_numpy().astype(np.int64, copy=False), classes
    raise InputError(
        f"'{LABEL_COLUMN}' must hold integer classes or class names, not {column.dtype}", path
    )


def _split(
    df: pl.DataFrame, path: Path, text: bool, labels: np.ndarray | None
) -> np.ndarray | None:
    if SPLIT_COLUMN not in df.columns:
        return None
    column = df[SPLIT_COLUMN]
    if column.dtype != pl.String:
        raise InputError(f"'{SPLIT_COLUMN}' must hold train, val or test, not {column.dtype}", path)
    # the distinct spellings are few: normalise those, not every row
    values = column.drop_nulls().unique()
    names = _split_names(values)
    known = names.is_in(list(SPLIT_NAMES) + list(NO_SPLIT))
    if not known.all():
        row = _first(column.is_in(values.filter(~known)).fill_null(False))
        raise _error(
            path, f"split {column[row]!r} is not one of train, val, valid, test or empty", row, text
        )
    codes = names.replace_strict(SPLIT_NAMES, default=-1, return_dtype=pl.Int8)
    split = np.full(len(column), -1, dtype=np.int8)
    if len(values) > 64:  # many spellings: one pass (replace_strict: 150 MiB for 4M rows)
        split = column.replace_strict(values, codes, return_dtype=pl.Int8).fill_null(-1).to_numpy()
    else:  # a comparison per spelling, a bit mask each
        for value, code in zip(values, codes):
            if code >= 0:
                split[(column == value).fill_null(False).to_numpy()] = code
    in_split = split >= 0
    if in_split.any():
        unlabelled = in_split if labels is None else in_split & (labels < 0)
        if unlabelled.any():
            row = _first(unlabelled)
            name = _split_names(column[row : row + 1])[0]
            raise _error(path, f"node is in the {name} split but has no label", row, text)
    return split


def _split_names(values: pl.Series) -> pl.Series:
    return values.fill_null("").str.strip_chars().str.to_lowercase()


def feature_columns(columns: list[str]) -> list[str]:
    """The columns a table with these ``columns`` takes its features from: the
    list column ``features``, else every column but ``node_id``, ``label`` and
    ``split`` (none: no features)."""
    if FEATURES_COLUMN in columns:
        return [FEATURES_COLUMN]
    return [c for c in columns if c not in (ID_COLUMN, LABEL_COLUMN, SPLIT_COLUMN)]


def check_feature_schema(schema: Mapping[str, Any], path: Path) -> None:
    """Refuse feature columns of the wrong type, from the table's schema alone
    (what :func:`feature_rows` checks of each column's type, before any value)."""
    for name in feature_columns(list(schema)):
        _check_feature_dtype(name, schema[name], path)


def _check_feature_dtype(name: str, dtype: Any, path: Path) -> None:
    if name == FEATURES_COLUMN:
        if not isinstance(dtype, (pl.List, pl.Array)):
            raise InputError(
                f"'{FEATURES_COLUMN}' must be a list of numbers per node, not {dtype}", path
            )
        if not dtype.inner.is_numeric():
            raise InputError(f"'{FEATURES_COLUMN}' must hold numbers, not {dtype.inner}", path)
    elif not (dtype.is_numeric() or dtype == pl.Boolean):
        raise InputError(
            f"column '{name}' is {dtype}: feature columns must be numeric "
            f"(or name the columns {ID_COLUMN}, {LABEL_COLUMN}, {SPLIT_COLUMN})",
            path,
        )


def _features(df: pl.DataFrame, path: Path, text: bool) -> tuple[np.ndarray | None, list[str]]:
    columns = feature_columns(df.columns)
    if not columns:
        return None, []
    return feature_rows(df, path, text), columns


def feature_rows(
    df: pl.DataFrame, path: Path, text: bool, offset: int = 0, first_length: int | None = None
) -> np.ndarray:
    """The checked features of ``df`` (rows ``offset..`` of the table; errors
    name rows counting from there) as float32 ``[rows, F]``, C-ordered.
    ``first_length``: the length of the table's first feature list when ``df``
    does not start the table."""
    if FEATURES_COLUMN in df.columns:
        column = df[FEATURES_COLUMN]
        if not isinstance(column.dtype, (pl.List, pl.Array)):
            _check_feature_dtype(FEATURES_COLUMN, column.dtype, path)
        lengths = column.list.len() if isinstance(column.dtype, pl.List) else None
        if column.null_count():
            raise _error(path, "features are empty", offset + _first(column.is_null()), text)
        if lengths is not None and len(lengths):
            first = lengths[0] if first_length is None else first_length
            if (lengths != first).any():
                row = _first(lengths != first)
                raise _error(
                    path, f"has {lengths[row]} features; the first row has {first}",
                    offset + row, text,
                )  # fmt: skip
        rows = column if lengths is not None else column.arr.to_list()
        if rows.list.eval(pl.element().is_null()).list.any().any():
            row = _first(rows.list.eval(pl.element().is_null()).list.any())
            raise _error(path, "a feature value is empty", offset + row, text)
        flat = rows.explode()
        if not flat.dtype.is_numeric():
            raise InputError(f"'{FEATURES_COLUMN}' must hold numbers, not {flat.dtype}", path)
        x = flat.cast(pl.Float32).to_numpy().reshape(df.height, -1)
        return _finite(x, path, text, [FEATURES_COLUMN], offset)
    columns = feature_columns(df.columns)
    for name in columns:
        column = df[name]
        _check_feature_dtype(name, column.dtype, path)
        if column.null_count():
            raise _error(path, f"'{name}' is empty", offset + _first(column.is_null()), text)
    x = df.select(pl.col(columns).cast(pl.Float32)).to_numpy().astype(np.float32, copy=False)
    return _finite(np.ascontiguousarray(x), path, text, columns, offset)


def _finite(
    x: np.ndarray, path: Path, text: bool, columns: list[str], offset: int = 0
) -> np.ndarray:
    finite = np.isfinite(x)
    if not finite.all():
        row, col = (int(v[0]) for v in np.nonzero(~finite))
        name = columns[col] if len(columns) == x.shape[1] else f"{columns[0]}[{col}]"
        raise _error(path, f"'{name}' is NaN or infinite", offset + row, text)
    return x


def table_ids_as(table: NodeTable, id_type: str) -> np.ndarray | pl.Series:
    """The table's ids in the edge list's id type: int64 numpy for ``int``
    (integer-valued strings are converted), a String Series for ``string``."""
    ids = table.ids
    if id_type == "int":
        if ids.dtype == pl.String:
            converted = ids.str.strip_chars().cast(pl.Int64, strict=False)
            if converted.null_count():
                row = _first(converted.is_null())
                raise table.error(
                    f"node id {ids[row]!r} is not an integer, but the edge list's ids are", row
                )
            ids = converted
        negative = ids < 0
        if negative.any():
            row = _first(negative)
            raise table.error(f"node id {ids[row]} is negative", row)
        return ids.to_numpy().astype(np.int64, copy=False)
    return ids.cast(pl.String)


@dataclass(frozen=True)
class FeatureScaling:
    """How features were standardised: ``(x - mean) / std`` per column, the
    statistics taken over ``over`` (``"training nodes"`` or ``"all nodes"``)."""

    mean: np.ndarray
    std: np.ndarray
    over: str


def standardize(features: np.ndarray, rows: np.ndarray | None) -> tuple[np.ndarray, FeatureScaling]:
    """``features`` with every column at mean 0 and deviation 1 over ``rows``
    (all rows when ``None`` or empty); columns constant over those rows are
    only centred. Statistics in float64, result float32."""
    over = "training nodes" if rows is not None and len(rows) else "all nodes"
    sample = features[rows] if over == "training nodes" else features
    mean = sample.mean(axis=0, dtype=np.float64)
    std = sample.std(axis=0, dtype=np.float64)
    std[std == 0] = 1.0
    scaled = ((features - mean) / std).astype(np.float32)
    return scaled, FeatureScaling(mean, std, over)


@dataclass(frozen=True)
class NodeData:
    """A node table laid out by graph node id, ready to write."""

    features: np.ndarray | None
    labels: np.ndarray | None
    classes: list[str] | None
    splits: dict[str, np.ndarray] | None
    split_source: str
    scaling: FeatureScaling | None = None


def align_node_table(
    table: NodeTable, node_of_row: np.ndarray, raw_ids: np.ndarray | pl.Series, seed: int
) -> NodeData:
    """Scatter the table's rows onto graph node ids (``node_of_row[row]``; the
    graph's ``raw_ids`` name missing nodes); every node must have a row. Without
    a split column the labelled nodes are split at random (:data:`DEFAULT_SPLIT`,
    ``seed``)."""
    num_nodes = len(raw_ids)
    if len(table) != num_nodes:
        has_row = np.zeros(num_nodes, dtype=bool)
        has_row[node_of_row] = True
        raise InputError(
            f"{num_nodes - len(table):,} node(s) of the edge list have no row in the node "
            f"table (it has {len(table):,} rows for {num_nodes:,} nodes), e.g. "
            + ", ".join(repr(raw_ids[int(i)]) for i in np.flatnonzero(~has_row)[:3]),
            table.path,
        )
    order = np.empty(num_nodes, dtype=np.int64)
    order[node_of_row] = np.arange(num_nodes)
    features = None if table.features is None else table.features[order]
    labels = None if table.labels is None else table.labels[order]
    splits: dict[str, np.ndarray] | None = None
    source = "none"
    if table.split is not None:
        split = table.split[order]
        splits = {k: np.flatnonzero(split == i) for i, k in enumerate(("train", "val", "test"))}
        source = f"'{SPLIT_COLUMN}' column"
    elif labels is not None:
        labelled = np.flatnonzero(labels >= 0)
        shuffled = np.random.default_rng(seed).permutation(labelled)
        n_train = int(round(DEFAULT_SPLIT[0] * len(shuffled)))
        n_val = int(round(DEFAULT_SPLIT[1] * len(shuffled)))
        splits = {
            "train": shuffled[:n_train],
            "val": shuffled[n_train : n_train + n_val],
            "test": shuffled[n_train + n_val :],
        }
        source = "random {:g}/{:g}/{:g} of the labelled nodes (seed {})".format(
            *DEFAULT_SPLIT, seed
        )
    scaling = None
    if table.standardize and features is not None:
        features, scaling = standardize(features, splits["train"] if splits else None)
    return NodeData(features, labels, table.classes, splits, source, scaling)


def write_node_data(writer: GraphDirWriter, data: NodeData) -> None:
    """Write features, labels (``num_classes``) and splits into a graph being written."""
    if data.features is not None:
        writer.save_array("features", data.features)
        writer.num_features = int(data.features.shape[1])
    if data.scaling is not None:
        writer.save_array("feature_mean", data.scaling.mean)
        writer.save_array("feature_std", data.scaling.std)
    if data.labels is not None:
        writer.save_array("labels", data.labels)
        if data.classes is not None:
            writer.num_classes = len(data.classes)
        else:
            writer.num_classes = int(data.labels.max()) + 1 if len(data.labels) else 0
    if data.splits is not None:
        writer.save_splits(data.splits["train"], data.splits["val"], data.splits["test"])


def node_table_details(table: NodeTable, data: NodeData) -> dict[str, object]:
    """What the ingestion report and the manifest's ``stats`` record of a node table."""
    return {
        "node_table": str(table.path.absolute()),
        "node_table_rows": len(table),
        "feature_columns": len(table.feature_columns),
        "label_names": data.classes is not None,
        "split": data.split_source,
        "feature_standardization": data.scaling.over if data.scaling else "none",
        **(
            {f"num_{k}": int(len(v)) for k, v in data.splits.items()}
            if data.splits is not None
            else {}
        ),
    }
