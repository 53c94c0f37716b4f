"""Bounded-memory ingestion of a text edge list: the entry point
(:func:`ingest_edgelist_external`) and its integer-id path; string ids go to
:mod:`gnncore.io.bounded.string_ids` (the steps: :mod:`gnncore.io.bounded`)."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from gnncore.errors import InputError
from gnncore.heap import fix_mmap_threshold
from gnncore.io.bounded.budget import MIN_MEMORY_BUDGET, batch_rows
from gnncore.io.bounded.node_table import NodeTableStringIds, StreamedNodeTable
from gnncore.io.bounded.parse import KeyRemap, KeySink, StringIds, WideIds, mapped_chunks, parse
from gnncore.io.bounded.phases import Phases
from gnncore.io.bounded.scratch import clear_scratch, scratch_directory
from gnncore.io.bounded.stream import StreamJob, write_edge_stream, write_key_graph
from gnncore.io.bounded.string_ids import ingest_string_ids
from gnncore.io.bounded.text import decompress
from gnncore.io.canonical import node_id_table
from gnncore.io.compression import check_gzip_name, is_gzip
from gnncore.io.readers.edge_layout import sniff
from gnncore.io.readers.edgelist import ID_TYPES, default_name
from gnncore.io.report import IngestReport
from gnncore.progress import stage
from gnncore.store.writer import GraphDirWriter
from gnncore.typing import require_csrc


def ingest_edgelist_external(
    source: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    memory_budget: int,
    directed: bool = False,
    name: str | None = None,
    id_type: str = "auto",
    seed: int = 0,
    header: bool | None = None,
    max_fan_in: int = 64,
    nodes: StreamedNodeTable | None = None,
) -> IngestReport:
    """Ingest a text edge list in bounded memory (module docstring).

    Args:
        source, out_dir, directed, name, seed, header: As
            :func:`gnncore.io.readers.edgelist.ingest_edgelist`.
        memory_budget (int): Bytes for buffers (parse batches, sort runs, merge
            buffers, the shuffle's permutation); at least
            :data:`MIN_MEMORY_BUDGET`. The O(|V|) arrays and Polars' reader
            come on top (module docstring).
        id_type (str): ``"auto"``, ``"int"`` or ``"string"``: as the in-memory
            path, ``"auto"`` reads integers when Polars can, else strings
            (:mod:`gnncore.io.bounded.string_ids`).
        max_fan_in (int): Most runs merged at once.
        nodes (StreamedNodeTable, optional): A Parquet node table
            (:mod:`gnncore.io.bounded.node_table`); integer ids only (string
            ids raise :class:`~gnncore.io.bounded.node_table.NodeTableStringIds`);
            its features are laid out in the scratch directory first.

    Returns:
        IngestReport: With ``phases`` (seconds per phase), ``peak_rss_bytes``
        and ``memory_budget``.
    """
    require_csrc()
    fix_mmap_threshold()  # the budget counts RSS: freed buffers go back at once
    started = time.perf_counter()
    phases = Phases()
    budget = int(memory_budget)
    if budget < MIN_MEMORY_BUDGET:
        raise ValueError(f"memory_budget must be at least {MIN_MEMORY_BUDGET} bytes, got {budget}")
    if id_type not in ID_TYPES:
        raise ValueError(f"id_type must be one of {ID_TYPES}, not {id_type!r}")
    source = Path(source)
    if source.is_dir():
        raise InputError(
            "is a directory, not an edge-list file (for a dataset directory "
            "use --format ogb, planetoid or kg)",
            source,
        )
    if not source.is_file():
        raise InputError("no such file", source)
    check_gzip_name(source)
    with scratch_directory(Path(out_dir), "ingest") as scratch:
        if nodes is not None:
            phases.start("write")  # the node table's features: node data, as in "write"
            nodes.prepare(scratch, budget, id_type)
        fallback = False
        if id_type != "string":
            try:
                return _ingest_int_ids(
                    source, Path(out_dir), scratch, phases, started, budget, directed, name,
                    id_type, seed, header, max_fan_in, nodes,
                )  # fmt: skip
            except StringIds:
                clear_scratch(scratch)
                fallback = True
        if nodes is not None:
            raise NodeTableStringIds(
                "memory_budget with a node table takes integer node ids only for now"
            )
        return ingest_string_ids(
            source, Path(out_dir), scratch, phases, started, budget, directed=directed,
            name=name, seed=seed, header=header, max_fan_in=max_fan_in, fallback=fallback,
        )  # fmt: skip


def _ingest_int_ids(
    source: Path,
    out: Path,
    scratch: Path,
    phases: Phases,
    started: float,
    budget: int,
    directed: bool,
    name: str | None,
    id_type: str,
    seed: int,
    header: bool | None,
    max_fan_in: int,
    nodes: StreamedNodeTable | None = None,
) -> IngestReport:
    """Ingest integer ids (module docstring of :mod:`gnncore.io.bounded`); raises
    :class:`StringIds` when ``id_type="auto"`` and Polars reads them as strings."""
    stage("reading edges")
    phases.start("parse")
    text = source
    if is_gzip(source):
        text = scratch / "input.txt"
        decompress(source, text)
    rows = batch_rows(budget)
    try:
        layout = sniff(text, header)
        layouts = [layout]
        if layout.separator in ("\t", " "):
            layouts.append(replace(layout, separator=None))
        try:
            layout, ids, parsed = parse(text, layouts, scratch, budget, rows, directed,
                                        max_fan_in, wide=False, id_type=id_type)  # fmt: skip
        except WideIds:  # ids past 2**32: parse again, into the general path's files
            clear_scratch(scratch)
            layout, ids, parsed = parse(text, layouts, scratch, budget, rows, directed,
                                        max_fan_in, wide=True, id_type=id_type)  # fmt: skip
        if parsed.count == 0:
            raise InputError("empty file: no edges", text)
    except InputError as exc:
        if exc.path == text and text != source:
            raise InputError(exc.problem, source, line=exc.line, row=exc.row) from None
        raise

    if isinstance(parsed, KeySink):
        # the keys first: their buffer and scratch (half the budget) are gone
        # before the ids' arrays are built; runs on disk get their last merge
        # with the id mapping (write_key_graph), not a pass of their own
        stage("sorting edges")
        phases.start("sort/dedup")
        parsed.keys.finish_runs()
    stage("remapping ids")
    phases.start("remap")
    raw_ids, lut = ids.finish()
    del ids
    details: dict[str, Any] = {
        "separator": layout.separator_name,
        "header": layout.header,
        "ignored_weight_column": layout.ncols == 3,
        "id_type": "int",
    }
    if nodes is not None:
        raw_ids, lut = nodes.attach(raw_ids, lut, seed)
        details.update(nodes.details)

    unwritten = [raw_ids]  # taken by ``before``: not held once node_ids.parquet is written

    def before(writer: GraphDirWriter) -> None:
        writer.write_table("node_ids", node_id_table(unwritten.pop()))
        if nodes is not None:
            nodes.write(writer)

    common: dict[str, Any] = {
        "num_nodes": len(raw_ids), "directed": directed, "name": name or default_name(source),
        "seed": seed, "budget": budget, "fmt": "edgelist", "source": source, "before": before,
        "details": details, "started": started, "max_fan_in": max_fan_in,
    }  # fmt: skip
    if isinstance(parsed, KeySink):
        # node_ids.parquet is written beside the remap and the CSR (a node table's
        # data, larger, still first)
        job = StreamJob(out, scratch, phases, before_beside=nodes is None, **common)
        remap = KeyRemap(raw_ids, lut)
        del raw_ids, lut  # held by ``remap`` and ``before`` alone, each dropping them when done
        return write_key_graph(
            parsed.keys,
            job,
            num_input=parsed.count,
            loops=parsed.count - parsed.kept,
            remap=remap,
        )
    chunks = mapped_chunks(parsed, rows, raw_ids, lut, phases)
    del lut
    return write_edge_stream(chunks, out, scratch, phases, **common)
