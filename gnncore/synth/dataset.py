"""Writing generated graphs: straight to a graph directory, or as raw OGB files.

Both stream: edges come from the C++ generator chunk by chunk into
preallocated NumPy arrays (or gzip CSV), and features are filled in row chunks
and written sequentially to ``features.npy`` (or CSV), so a 50M-edge graph
never exists as Python lists.

With a memory budget (``generate_graph(..., memory_budget=SIZE)``,
``gnncore synth --memory-budget SIZE``) the edges never exist as whole arrays
either: the generator's chunks stream through bounded-memory ingestion's
sort/dedup/CSR path (:func:`gnncore.io.bounded.stream.write_edge_stream`:
sorted runs on disk in a scratch sibling ``.NAME.synth-PID-XXXXXXXX`` of the
output, merged k ways), so memory stays within the budget plus O(|V|) arrays
(communities, propensities, labels, splits, the eid pass's offsets). The graph
directory is the same, byte for byte, as the in-memory path writes. The raw
OGB layout (:func:`write_ogb_raw`, the versioned datasets the pipeline
generates) is written as before: it already streams its edges to gzip CSV.
"""

from __future__ import annotations

import gzip
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

import numpy as np
import polars as pl
from tqdm import tqdm

from gnncore.io.bounded.budget import MIN_MEMORY_BUDGET, batch_rows
from gnncore.io.bounded.npy_stream import npy_writer
from gnncore.io.bounded.phases import Phases
from gnncore.io.bounded.scratch import scratch_directory
from gnncore.io.bounded.stream import write_edge_stream
from gnncore.io.canonical import canonicalize, write_graph
from gnncore.io.report import IngestReport
from gnncore.progress import reporting, stage
from gnncore.store import GraphDirWriter, atomic_directory
from gnncore.store.atomic import check_output_dir
from gnncore.store.manifest import FORMAT_NAME
from gnncore.store.versioning import (
    read_stage_record,
    stage_key,
    versioned_name,
    write_stage_record,
)
from gnncore.synth.model import SynthSpec, fill_features, iter_edge_chunks, node_labels
from gnncore.synth.model import split as split_nodes
from gnncore.usage import PhaseTimer, StageUsage, resolve_memory_budget

EDGE_CHUNK = 4_000_000
#: The file that marks a directory as one ``gnncore synth --layout ogb`` wrote, and
#: its ``format``: a later run replaces only such a directory (without --overwrite).
OGB_RAW_RECORD = "gnncore-synth.json"
OGB_RAW_FORMAT = "gnncore.synth_ogb"
FEATURE_ROWS = 1 << 16
BOUNDED_PHASES = ("generate", "node data", "sort/dedup", "csr", "shuffle", "write", "checksums")
"""The phases (seconds each) that bounded-memory generation reports."""


def _edges(spec: SynthSpec, progress: bool) -> tuple[np.ndarray, np.ndarray]:
    src = np.empty(spec.num_edges, dtype=np.int64)
    dst = np.empty(spec.num_edges, dtype=np.int64)
    done = 0
    with tqdm(
        total=spec.num_edges,
        unit="edge",
        unit_scale=True,
        desc="generate edges",
        disable=not progress,
    ) as bar:
        for s, d in iter_edge_chunks(spec, EDGE_CHUNK):
            src[done : done + len(s)], dst[done : done + len(d)] = s, d
            done += len(s)
            bar.update(len(s))
    return src, dst


def _node_data(spec: SynthSpec) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    y = node_labels(spec)
    return y, split_nodes(spec, y)


Splits = tuple[np.ndarray, np.ndarray, np.ndarray]


def _node_writer(spec: SynthSpec, splits: Splits | None) -> Callable[[GraphDirWriter], None]:
    """The ``before`` hook writing features, labels and splits (both paths):
    ``splits`` when given, else the spec's own."""
    y, own = _node_data(spec)
    train, val, test = own if splits is None else splits

    def before(writer: GraphDirWriter) -> None:
        shape = (spec.num_nodes, spec.num_features)
        block = np.empty((min(FEATURE_ROWS, spec.num_nodes), spec.num_features), np.float32)
        with npy_writer(writer.file_path("features.npy", "npy"), np.float32, shape) as fh:
            for start in range(0, spec.num_nodes, FEATURE_ROWS):
                rows = min(FEATURE_ROWS, spec.num_nodes - start)
                fill_features(spec, y, start, block[:rows]).tofile(fh)
        del block
        writer.save_array("labels", y)
        writer.num_features, writer.num_classes = spec.num_features, spec.num_classes
        writer.save_splits(train, val, test)

    return before


#: In-memory generation's peak RSS per generated edge: measured 79 bytes (3.69
#: GiB for 50M edges), with a margin.
IN_MEMORY_PEAK_PER_EDGE = 96


def generate_graph(
    out_dir: str | os.PathLike[str],
    spec: SynthSpec,
    name: str = "synthetic",
    progress: bool = False,
    memory_budget: int | str | None = "auto",
    splits: Splits | None = None,
    details: Mapping[str, Any] | None = None,
) -> IngestReport:
    """Generate ``spec`` straight into a graph directory (docs/FORMAT.md).

    Self-loops and repeated pairs from the generator are dropped and counted
    exactly as ingestion does. Returns the :class:`~gnncore.io.IngestReport`
    with the stage's phases, peak RSS and bytes written.

    ``splits`` (train, val, test node ids) replaces the spec's own split, e.g.
    subsets of it chosen by a benchmark; ``details`` are recorded in the
    manifest beside ``synth_spec``.

    ``memory_budget``: ``"auto"`` (the default) generates in memory when the
    estimated peak (:data:`IN_MEMORY_PEAK_PER_EDGE` per edge) fits in half the
    available memory (:func:`gnncore.usage.default_memory_budget`), else in
    bounded memory within that budget; bytes or a size such as ``"1GiB"``:
    in bounded memory (module docstring); ``None``: in memory. The graph
    directory is the same byte for byte; the bounded path's report has
    ``phases`` (:data:`BOUNDED_PHASES`) and ``memory_budget``.
    """
    check_output_dir(out_dir, [], FORMAT_NAME, "graph directory")
    recorded = {"synth_spec": spec_dict(spec), **(details or {})}
    budget = resolve_memory_budget(memory_budget)
    if memory_budget == "auto" and budget is not None:
        budget = budget if spec.num_edges * IN_MEMORY_PEAK_PER_EDGE > budget else None
    timer = PhaseTimer()
    with reporting(timer), StageUsage() as usage:
        if budget is not None:
            report = _generate_bounded(out_dir, spec, name, progress, budget, splits, recorded)
        else:
            report = _generate(out_dir, spec, name, progress, splits, recorded)
        timer.stop()
    usage.set_outputs([out_dir])
    return report.with_usage(usage, timer.seconds())


def _generate(
    out_dir: str | os.PathLike[str],
    spec: SynthSpec,
    name: str,
    progress: bool,
    splits: Splits | None,
    details: Mapping[str, Any],
) -> IngestReport:
    started = time.perf_counter()
    spec.validate()
    stage("generate")
    src, dst = _edges(spec, progress)
    edges = canonicalize(src, dst, spec.num_nodes, directed=False)
    del src, dst
    before = _node_writer(spec, splits)

    return write_graph(
        out_dir,
        fmt="synth",
        source=out_dir,
        name=name,
        num_nodes=spec.num_nodes,
        edges=edges,
        directed=False,
        seed=spec.seed,
        before=before,
        details=details,
        started=started,
    )


def _generate_bounded(
    out_dir: str | os.PathLike[str],
    spec: SynthSpec,
    name: str,
    progress: bool,
    budget: int,
    splits: Splits | None,
    details: Mapping[str, Any],
) -> IngestReport:
    started = time.perf_counter()
    if budget < MIN_MEMORY_BUDGET:
        raise ValueError(f"memory_budget must be at least {MIN_MEMORY_BUDGET} bytes, got {budget}")
    spec.validate()
    phases = Phases(BOUNDED_PHASES)
    phases.start("node data")
    before = _node_writer(spec, splits)

    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        with tqdm(
            total=spec.num_edges,
            unit="edge",
            unit_scale=True,
            desc="generate edges",
            disable=not progress,
        ) as bar:
            phases.start("generate")
            for s, d in iter_edge_chunks(spec, batch_rows(budget)):
                bar.update(len(s))
                yield s, d
                phases.start("generate")

    with scratch_directory(Path(out_dir), "synth") as scratch:
        return write_edge_stream(
            chunks(),
            out_dir,
            scratch,
            phases,
            num_nodes=spec.num_nodes,
            directed=False,
            name=name,
            seed=spec.seed,
            budget=budget,
            fmt="synth",
            source=out_dir,
            before=before,
            details=details,
            started=started,
            before_phase="node data",
        )


def spec_dict(spec: SynthSpec) -> dict[str, Any]:
    """The spec as plain JSON values.

    ``communities_per_class`` appears only when it is not 1, and ``model``,
    ``right_exponent`` and ``left_fraction`` only when not at their defaults,
    so the graphs, manifests and stage keys of specs written before they
    existed stay the same.
    """
    values = _later_fields_at_default(spec)
    if values["communities_per_class"] == 1:
        del values["communities_per_class"]
    return values


_LATER_FIELDS = {"model": "planted", "right_exponent": None, "left_fraction": 0.5}
"""Fields added after stage keys were recorded, with their defaults."""


def _later_fields_at_default(spec: SynthSpec) -> dict[str, Any]:
    """All fields, without those of :data:`_LATER_FIELDS` at their default."""
    values = {k: getattr(spec, k) for k in spec.__dataclass_fields__}
    for name, default in _LATER_FIELDS.items():
        if values[name] == default:
            del values[name]
    return values


def _write_csv_gz(path: Path, frame: pl.DataFrame, append: bool = False) -> None:
    with gzip.open(path, "ab" if append else "wb", compresslevel=1) as fh:
        # GzipFile is a binary file object, but typeshed does not declare it an IO[bytes]
        frame.write_csv(cast(IO[bytes], fh), include_header=False)


def write_ogb_raw(
    out_dir: str | os.PathLike[str],
    spec: SynthSpec,
    progress: bool = False,
    record: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``spec`` in OGB's raw node-property layout (atomically).

    With ``record``, it is written (with the returned summary as ``summary``)
    as :data:`gnncore.store.versioning.STAGE_FILE` before the directory is
    renamed into place.

    ``raw/edge.csv.gz``, ``raw/num-node-list.csv.gz``, ``raw/node-feat.csv.gz``,
    ``raw/node-label.csv.gz`` and ``split/random/{train,valid,test}.csv.gz``:
    what ``gnncore ingest --format ogb`` reads, and the layout a user's own
    OGB-style dataset has. Edges keep the generator's self-loops and repeats,
    as raw data does.
    """
    spec.validate()
    check_output_dir(out_dir, [], OGB_RAW_FORMAT, "generated OGB dataset", marker=OGB_RAW_RECORD)
    started = time.perf_counter()
    y, (train, val, test) = _node_data(spec)
    with atomic_directory(out_dir) as tmp:
        # what tells a later run that this directory is synth's own (to replace it)
        marker = {"format": OGB_RAW_FORMAT, "synth_spec": spec_dict(spec)}
        (tmp / OGB_RAW_RECORD).write_text(json.dumps(marker, sort_keys=True) + "\n")
        raw, split_dir = tmp / "raw", tmp / "split" / "random"
        raw.mkdir()
        split_dir.mkdir(parents=True)
        edge_file = raw / "edge.csv.gz"
        edge_file.write_bytes(b"")
        for s, d in tqdm(
            iter_edge_chunks(spec, EDGE_CHUNK), desc="write edges", disable=not progress
        ):
            _write_csv_gz(edge_file, pl.DataFrame({"src": s, "dst": d}), append=True)
        _write_csv_gz(raw / "num-node-list.csv.gz", pl.DataFrame({"n": [spec.num_nodes]}))
        feat_file = raw / "node-feat.csv.gz"
        feat_file.write_bytes(b"")
        block = np.empty((FEATURE_ROWS, spec.num_features), dtype=np.float32)
        for start in range(0, spec.num_nodes, FEATURE_ROWS):
            rows = fill_features(spec, y, start, block[: min(FEATURE_ROWS, spec.num_nodes - start)])
            _write_csv_gz(feat_file, pl.DataFrame(rows.astype(np.float64).round(6)), append=True)
        _write_csv_gz(raw / "node-label.csv.gz", pl.DataFrame({"y": y}))
        for file, idx in (("train", train), ("valid", val), ("test", test)):
            _write_csv_gz(split_dir / f"{file}.csv.gz", pl.DataFrame({"id": idx}))
        summary = {
            "path": str(out_dir),
            "num_nodes": spec.num_nodes,
            "num_edges": spec.num_edges,
            "num_classes": spec.num_classes,
            "num_features": spec.num_features,
            "seconds": time.perf_counter() - started,
        }
        if record is not None:
            write_stage_record(tmp, {**record, "summary": summary})
    return summary


@dataclass(frozen=True)
class GeneratedDataset:
    """A versioned generated raw dataset (:func:`write_ogb_raw_versioned`).

    Attributes:
        path (Path): ``<root>/<prefix>-<stage_key>``.
        stage_key (str): The key of the generator spec (also in the name).
        reused (bool): The directory already held this dataset and was kept.
        summary (dict): :func:`write_ogb_raw`'s summary (when reused: the
            recorded one, ``path`` updated).
    """

    path: Path
    stage_key: str
    reused: bool
    summary: dict[str, Any]


def dataset_stage_key(spec: SynthSpec) -> str:
    """The stage key of generating ``spec`` as raw OGB files."""
    return stage_key("dataset", {"layout": "ogb-raw", **_later_fields_at_default(spec)}, {})


def write_ogb_raw_versioned(
    root: str | os.PathLike[str],
    prefix: str,
    spec: SynthSpec,
    progress: bool = False,
    reuse: bool = True,
) -> GeneratedDataset:
    """Write ``spec`` as raw OGB files into ``root/<prefix>-<key>``, unless there.

    The directory's :data:`~gnncore.store.versioning.STAGE_FILE` records the
    stage key, the spec and the summary; a directory recording the same key is
    reused (``reuse=False`` regenerates it). The gzip files carry their write
    time, so regenerating the same spec gives other bytes: reusing keeps the
    downstream ingestion's input digest, and so the graph, the same.
    """
    key = dataset_stage_key(spec)
    final = Path(root).absolute() / versioned_name(prefix, key)
    recorded = read_stage_record(final) if reuse else None
    if recorded is not None and recorded.get("stage_key") == key and "summary" in recorded:
        summary = {**recorded["summary"], "path": str(final)}
        return GeneratedDataset(final, key, True, summary)
    record = {"stage": "dataset", "stage_key": key, "settings": _later_fields_at_default(spec)}
    summary = write_ogb_raw(final, spec, progress=progress, record=record)
    return GeneratedDataset(final, key, False, summary)
