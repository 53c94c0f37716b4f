"""Knowledge graphs as ``train.txt`` / ``valid.txt`` / ``test.txt`` triples.

``source`` is a directory holding the three files (or holding them under
``raw/``; ``valid.txt`` and ``test.txt`` are optional), one
``head<TAB>relation<TAB>tail`` triple per line; ``\\r\\n`` line ends and blank
lines are tolerated.

Ids: entities seen in the training triples get ids ``0..E_train-1`` in sorted
order, then entities seen only in valid/test get the next ids (sorted); the map
is ``node_ids.parquet`` (``raw_id``, ``node_id``) and ``stats`` records
``num_train_entities``. Relations of all three files are mapped in sorted order
(``relations.parquet``: ``raw_id``, ``rel_id``).

The graph is directed with a ``rel`` column: the deduplicated training
triples, without self-loop triples (``head == tail``; the graph format stores
no self-loops -- they are counted in ``self_loops_removed``). The triples
themselves, as read (self-loops and repeats included; valid/test not
deduplicated against train), are written as ``train_triples.npy`` /
``valid_triples.npy`` / ``test_triples.npy`` (int64 ``[T, 3]``: head, rel, tail).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gnncore.errors import InputError
from gnncore.io.canonical import canonicalize, node_id_table, write_graph
from gnncore.io.compression import check_gzip_name, gzip_error, is_gzip
from gnncore.io.readers.edge_problems import find_bad_line, line_regex
from gnncore.io.report import IngestReport
from gnncore.lazy import lazy_module
from gnncore.store.writer import GraphDirWriter

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")

SPLITS = ("train", "valid", "test")
COLUMNS = ("head", "relation", "tail")


def kg_dir(source: str | os.PathLike[str]) -> Path:
    """The directory that holds ``train.txt`` (``source`` or ``source/raw``)."""
    path = Path(source)
    if (path / "train.txt").is_file():
        return path
    if (path / "raw" / "train.txt").is_file():
        return path / "raw"
    raise InputError("missing train.txt (a KG directory holds train/valid/test.txt)", path)


def locate_triple_problem(path: Path) -> None:
    """Raise for the first malformed triple line of ``path``, if any."""

    def check(text: str) -> str | None:
        tokens = text.split("\t")
        if len(tokens) != 3:
            return f"expected 3 tab-separated columns (head relation tail), found {len(tokens)}"
        for column, token in zip(COLUMNS, tokens):
            if not token.strip():
                return f"empty {column}"
        return None

    valid = line_regex("\t", [False, False, False])

    def suspect(line: pl.Expr) -> pl.Expr:
        return ~line.str.contains(valid)

    find_bad_line(path, check, suspect, skip_comments=False)


def read_triples(path: Path) -> pl.DataFrame:
    """The ``h``, ``r``, ``t`` string columns of one triple file."""
    check_gzip_name(path)
    schema = {"h": pl.String, "r": pl.String, "t": pl.String}
    lf = pl.scan_csv(path, has_header=False, separator="\t", quote_char=None, schema=schema)
    lf = lf.filter(~pl.all_horizontal(pl.all().is_null()))
    try:
        df = lf.collect(engine="streaming")
    except pl.exceptions.PolarsError:
        locate_triple_problem(path)
        raise InputError("could not be parsed as tab-separated triples", path) from None
    except OSError as exc:
        if is_gzip(path):
            raise gzip_error(path, exc) from exc
        raise
    missing = pl.any_horizontal(pl.all().is_null() | (pl.all().str.strip_chars() == ""))
    if df.select(missing.any()).item():
        locate_triple_problem(path)
        raise InputError("a triple lacks a value", path)
    return df


def ingest_kg(
    source: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    name: str | None = None,
    seed: int = 0,
) -> IngestReport:
    """Ingest a knowledge-graph directory into ``out_dir`` (always directed)."""
    started = time.perf_counter()
    directory = kg_dir(source)
    frames: dict[str, pl.DataFrame] = {}
    for split in SPLITS:
        path = directory / f"{split}.txt"
        if path.is_file():
            frames[split] = read_triples(path)
    train = frames["train"]
    if train.height == 0:
        raise InputError("empty file: no training triples", directory / "train.txt")

    train_entities = pl.concat([train["h"], train["t"]]).unique().sort()
    others = [f[c] for s, f in frames.items() if s != "train" for c in ("h", "t")]
    extra = pl.concat(others).unique() if others else pl.Series("h", [], dtype=pl.String)
    extra = extra.filter(~extra.is_in(train_entities.implode())).sort()
    entities = pl.concat([train_entities, extra.rename(train_entities.name)])
    relations = pl.concat([f["r"] for f in frames.values()]).unique().sort()
    entity_ids = pl.int_range(len(entities), eager=True, dtype=pl.Int64)
    relation_ids = pl.int_range(len(relations), eager=True, dtype=pl.Int64)

    triples: dict[str, np.ndarray] = {}
    for split, frame in frames.items():
        h = frame["h"].replace_strict(entities, entity_ids, return_dtype=pl.Int64).to_numpy()
        r = frame["r"].replace_strict(relations, relation_ids, return_dtype=pl.Int64).to_numpy()
        t = frame["t"].replace_strict(entities, entity_ids, return_dtype=pl.Int64).to_numpy()
        triples[split] = np.column_stack([h, r, t]).astype(np.int64, copy=False)
    del frames

    num_nodes, num_relations = len(entities), len(relations)
    tr = triples["train"]
    edges = canonicalize(
        tr[:, 0], tr[:, 2], num_nodes, directed=True, rel=tr[:, 1], num_relations=num_relations
    )

    def before(writer: GraphDirWriter) -> None:
        for split, array in triples.items():
            writer.save_array(f"{split}_triples", array)

    details = {
        "num_train_entities": len(train_entities),
        **{f"num_{split}_triples": len(array) for split, array in triples.items()},
    }
    root = directory.parent if directory.name == "raw" else directory
    tables = {
        "node_ids": node_id_table(entities),
        "relations": pl.DataFrame({"raw_id": relations.rename("raw_id"), "rel_id": relation_ids}),
    }
    return write_graph(
        out_dir,
        fmt="kg",
        source=source,
        name=name or root.name,
        num_nodes=num_nodes,
        edges=edges,
        directed=True,
        seed=seed,
        num_relations=num_relations,
        tables=tables,
        before=before,
        details=details,
        started=started,
    )
