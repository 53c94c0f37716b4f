"""The entry point of ingestion: :func:`ingest` checks the arguments, picks
the format and the path (in memory, or bounded memory under a budget) and
hands the dataset to its reader (:mod:`gnncore.io.readers`) or to the
bounded-memory path (:mod:`gnncore.io.bounded`)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from gnncore.errors import InputError
from gnncore.io.bounded.node_table import (
    NodeTableStringIds,
    bounded_node_table_refusal,
    read_streamed_node_table,
)
from gnncore.io.bounded.text_ingest import ingest_edgelist_external
from gnncore.io.detect import FORMATS, detect_format
from gnncore.io.readers.edgelist import ingest_edgelist
from gnncore.io.readers.kg import ingest_kg
from gnncore.io.readers.node_table import read_node_table
from gnncore.io.readers.ogb import ingest_ogb
from gnncore.io.readers.parquet import ingest_parquet
from gnncore.io.readers.planetoid import ingest_planetoid
from gnncore.io.report import IngestReport
from gnncore.prefault import small_pages
from gnncore.progress import StageFn, reporting, stage
from gnncore.sizes import format_size
from gnncore.store.atomic import check_output_dir
from gnncore.store.manifest import FORMAT_NAME
from gnncore.usage import PhaseTimer, StageUsage, resolve_memory_budget, tree_bytes

ID_TYPES = ("auto", "int", "string")


def ingest(
    source: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    format: str = "auto",  # noqa: A002 - the public name
    directed: bool = False,
    name: str | None = None,
    id_type: str = "auto",
    seed: int = 0,
    *,
    header: bool | None = None,
    nodes: str | os.PathLike[str] | None = None,
    standardize_features: bool = False,
    progress: StageFn | None = None,
    memory_budget: int | str | None = "auto",
) -> IngestReport:
    """Ingest a dataset into the graph directory ``out_dir``.

    Args:
        source (str or PathLike): A file (``edgelist``, ``parquet``) or a
            dataset directory (``ogb``, ``planetoid``, ``kg``).
        out_dir (str or PathLike): The graph directory to create or replace.
        format (str): ``"auto"`` or one of :data:`FORMATS`.
        directed (bool): Keep edge direction (``edgelist``, ``parquet``,
            ``ogb``, ``planetoid``); ``kg`` graphs are always directed.
        name (str, optional): Dataset name for the manifest (default: derived
            from the source path).
        id_type (str): ``"auto"``, ``"int"`` or ``"string"`` node ids
            (``edgelist`` and ``parquet``; other formats define their ids).
        seed (int): Seed of the shuffled edge stream (``edges_shuffled.npy``).
        header (bool, optional): ``edgelist`` only: force a header line (True)
            or none (False) instead of detecting it.
        nodes (str or PathLike, optional): ``edgelist`` and ``parquet`` only: a
            node table (Parquet/CSV/TSV with ``node_id`` and features, optional
            ``label`` and ``split``; :mod:`gnncore.io.readers.node_table`).
        standardize_features (bool): With ``nodes``: standardise each feature
            column over the training nodes (mean and deviation kept as
            ``feature_mean.npy`` / ``feature_std.npy``).
        memory_budget (int or str, optional): The memory ingestion may take.
            ``"auto"`` (the default): half of the memory this process may still
            take (:func:`gnncore.usage.default_memory_budget`), in bounded
            memory wherever that path takes the input (it is the faster one:
            2.6x on a 20M-edge CSV, about 20 ms slower on a 3,000-edge one),
            else in memory, with a warning when in-memory ingestion's estimated
            peak (:func:`in_memory_peak_estimate`) exceeds the budget. Bytes or a size such as
            ``"1GiB"``: always in bounded memory
            (:mod:`gnncore.io.bounded`: parse batches, sort runs and
            merge buffers within the budget, spilling to disk beside
            ``out_dir``). ``None``: in memory. Both paths write the same graph
            directory, byte for byte. The bounded path takes text edge lists
            (integer ids, and string ids: :mod:`gnncore.io.bounded.string_ids`),
            with a Parquet node table and integer ids
            (:mod:`gnncore.io.bounded.node_table`); CSV/TSV node tables,
            ``standardize_features``, string ids with a node table and other
            formats are ingested in memory for now (an explicit budget with
            them is a ``ValueError``; ``"auto"`` ingests them in memory).
        progress (callable, optional): Called with the name of each stage
            (reading, remapping, canonical edges, writing, ...); e.g. a
            :class:`gnncore.progress.StageBar` or a logger's ``info``.

    Returns:
        IngestReport: The counts (also recorded in the manifest's ``stats``),
        seconds per phase, peak RSS, and the bytes read and written.

    Raises:
        InputError: The input is missing or malformed (names file, line/row).
    """
    timer = PhaseTimer(progress)
    # small pages: ingestion's buffers are filled and read in sequence (prefault.py)
    with reporting(timer), StageUsage() as usage, small_pages():
        fmt = _checked_format(source, format, id_type, header, nodes, standardize_features)
        sources = [Path(source)] + ([Path(nodes)] if nodes is not None else [])
        check_output_dir(out_dir, sources, FORMAT_NAME, "graph directory")
        budget = resolve_memory_budget(memory_budget)
        auto = memory_budget == "auto"
        if auto and budget is not None and not _bounded_applies(fmt, nodes, standardize_features):
            _warn_in_memory(source, fmt, budget)
            budget = None
        report = None
        if budget is not None:
            try:
                report = _ingest_bounded(
                    source, out_dir, fmt, directed, name, id_type, seed, header, nodes,
                    standardize_features, budget,
                )  # fmt: skip
            except NodeTableStringIds:
                if not auto:
                    raise
                _warn_in_memory(source, fmt, budget, "string ids")
        if report is None:
            report = _ingest(
                source,
                out_dir,
                fmt,
                directed,
                name,
                id_type,
                seed,
                header,
                nodes,
                standardize_features,
            )
        timer.stop()
    usage.set_inputs([source] + ([nodes] if nodes is not None else []))
    usage.set_outputs([out_dir])
    return report.with_usage(usage, timer.seconds())


#: In-memory ingestion's peak RSS per byte of (uncompressed) edge-list text:
#: measured 6.7 (1.9 GiB for the 284 MiB, 20M-edge CSV), with a margin.
IN_MEMORY_PEAK_PER_TEXT_BYTE = 8
#: The same per byte of gzipped text or of a columnar file (Parquet's integer
#: columns compress about 4x).
IN_MEMORY_PEAK_PER_PACKED_BYTE = 32


def in_memory_peak_estimate(source: str | os.PathLike[str], fmt: str) -> int:
    """Roughly the peak RSS in-memory ingestion of ``source`` would reach,
    from the input's size on disk (what ``memory_budget="auto"`` compares with
    its budget)."""
    size = tree_bytes([source])
    packed = fmt == "parquet" or str(source).endswith(".gz")
    return size * (IN_MEMORY_PEAK_PER_PACKED_BYTE if packed else IN_MEMORY_PEAK_PER_TEXT_BYTE)


def takes_memory_budget(
    source: str | os.PathLike[str],
    format: str = "auto",  # noqa: A002 - the public name
    nodes: str | os.PathLike[str] | None = None,
    standardize_features: bool = False,
) -> bool:
    """Whether bounded-memory ingestion takes ``source``: a text edge list,
    without a node table or with a Parquet one and no ``standardize_features``
    (its ids must be integers: string ids are refused under an explicit budget
    and ingested in memory under ``"auto"``). An explicit budget with any other
    input is refused, and a deployment's budget (the Dagster ``memory``
    resource) can only be reported against, as ingestion runs in memory."""
    fmt = detect_format(source) if format == "auto" else format
    return _bounded_applies(fmt, nodes, standardize_features)


def _bounded_applies(
    fmt: str, nodes: str | os.PathLike[str] | None, standardize_features: bool = False
) -> bool:
    """Whether bounded-memory ingestion takes this input (see :func:`_ingest_bounded`)."""
    if fmt != "edgelist":
        return False
    return nodes is None or bounded_node_table_refusal(nodes, standardize_features) is None


def _warn_in_memory(
    source: str | os.PathLike[str], fmt: str, budget: int, why: str | None = None
) -> None:
    """Warn when in-memory ingestion, taken where the bounded path does not apply
    (``why``: what it does not take), may pass the default budget."""
    estimate = in_memory_peak_estimate(source, fmt)
    if estimate > budget:
        warnings.warn(
            f"{source}: in-memory ingestion may take about {format_size(estimate)}, "
            f"more than the default budget of {format_size(budget)} (half the "
            "available memory), and the bounded-memory path takes text edge lists "
            "(with Parquet node tables, integer ids and no feature standardisation) only"
            + (f", not {why}" if why else "")
            + ": ingesting in memory",
            ResourceWarning,
            stacklevel=3,
        )


def _checked_format(
    source: str | os.PathLike[str],
    format: str,  # noqa: A002 - the public name
    id_type: str,
    header: bool | None,
    nodes: str | os.PathLike[str] | None,
    standardize_features: bool,
) -> str:
    """The format of ``source`` (``auto`` resolved) once the arguments that do
    not depend on the ingestion path are checked."""
    if format != "auto" and format not in FORMATS:
        raise ValueError(f"format must be 'auto' or one of {FORMATS}, not {format!r}")
    if id_type not in ID_TYPES:
        raise ValueError(f"id_type must be one of {ID_TYPES}, not {id_type!r}")
    if not os.path.exists(source):
        raise InputError("no such file or directory", Path(source))
    fmt = detect_format(source) if format == "auto" else format
    if header is not None and fmt != "edgelist":
        raise ValueError("header= applies to the edgelist format only")
    if nodes is not None and fmt not in ("edgelist", "parquet"):
        raise ValueError(f"nodes= applies to edge lists and Parquet edge tables, not to {fmt}")
    if standardize_features and nodes is None:
        raise ValueError("standardize_features= applies to the features of a node table (nodes=)")
    return fmt


def _ingest_bounded(
    source: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    fmt: str,
    directed: bool,
    name: str | None,
    id_type: str,
    seed: int,
    header: bool | None,
    nodes: str | os.PathLike[str] | None,
    standardize_features: bool,
    budget: int,
) -> IngestReport:
    if fmt != "edgelist":
        raise ValueError(
            f"memory_budget applies to text edge lists (format edgelist) for now, not to {fmt}: "
            "ingest it without a memory budget"
        )
    table = None
    if nodes is not None:
        refusal = bounded_node_table_refusal(nodes, standardize_features)
        if refusal is not None:
            raise ValueError(f"memory_budget with a node table: {refusal}: ingest it without one")
        stage("reading the node table")
        table = read_streamed_node_table(nodes)
    return ingest_edgelist_external(
        source,
        out_dir,
        memory_budget=budget,
        directed=directed,
        name=name,
        id_type=id_type,
        seed=seed,
        header=header,
        nodes=table,
    )


def _ingest(
    source: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    fmt: str,
    directed: bool,
    name: str | None,
    id_type: str,
    seed: int,
    header: bool | None,
    nodes: str | os.PathLike[str] | None,
    standardize_features: bool,
) -> IngestReport:
    if nodes is not None:
        stage("reading the node table")
    table = None if nodes is None else read_node_table(nodes, standardize_features)
    if fmt == "edgelist":
        return ingest_edgelist(
            source,
            out_dir,
            directed=directed,
            name=name,
            id_type=id_type,
            seed=seed,
            header=header,
            nodes=table,
        )
    if fmt == "parquet":
        return ingest_parquet(
            source, out_dir, directed=directed, name=name, id_type=id_type, seed=seed, nodes=table
        )
    if fmt in ("ogb", "planetoid", "kg"):
        stage(f"reading {fmt} files")
    if fmt == "ogb":
        return ingest_ogb(source, out_dir, directed=directed, name=name, seed=seed)
    if fmt == "planetoid":
        return ingest_planetoid(source, out_dir, directed=directed, name=name, seed=seed)
    return ingest_kg(source, out_dir, name=name, seed=seed)
