"""Versioned ingestion: the graph directory is named by its settings and input.

:func:`ingest_versioned` writes ``<graphs root>/<prefix>-<stage key>`` where the
key (:func:`gnncore.store.versioning.stage_key`) covers the ingest settings,
the graph format version and :func:`~gnncore.store.versioning.input_digest` of
the raw source. The graph manifest records them as ``lineage``. A directory
that already holds a valid graph with the same key is reused, not rewritten.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gnncore.errors import InputError
from gnncore.io.detect import detect_format
from gnncore.io.dispatch import ingest
from gnncore.io.report import IngestReport
from gnncore.progress import StageFn
from gnncore.store.atomic import check_output_dir, replace_directory, temporary_name
from gnncore.store.graph_dir import GraphDir
from gnncore.store.manifest import (
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST_FILE,
    Manifest,
    sha256_of,
)
from gnncore.store.versioning import input_digest, stage_key, versioned_name
from gnncore.tracking.base import RunTracker
from gnncore.usage import cost_metrics

#: The stage name in ingestion keys and lineage records.
INGEST_STAGE = "ingest"


@dataclass(frozen=True)
class VersionedIngest:
    """Where a versioned ingestion's graph is and how it came to be.

    Attributes:
        path (Path): The graph directory, ``<graphs root>/<prefix>-<stage_key>``.
        stage_key (str): The key of the settings and input (also in the name).
        input_sha256 (str): :func:`~gnncore.store.versioning.input_digest` of the source.
        manifest_sha256 (str): sha256 of the graph's ``manifest.json`` (what
            partition keys hash).
        reused (bool): The directory already held this graph and was kept as is.
        report (IngestReport): The ingestion's report (when reused: the one
            recorded when the directory was written).
        run_id (str, optional): The tracking run this ingestion logged.
    """

    path: Path
    stage_key: str
    input_sha256: str
    manifest_sha256: str
    reused: bool
    report: IngestReport
    run_id: str | None = None


def ingest_settings(
    source: str | os.PathLike[str],
    format: str = "auto",  # noqa: A002 - the public name
    directed: bool = False,
    name: str | None = None,
    id_type: str = "auto",
    seed: int = 0,
    header: bool | None = None,
) -> dict[str, Any]:
    """The settings an ingestion's key covers (``auto`` format resolved; a node
    table is an input, hashed beside the source)."""
    return {
        "format": detect_format(source) if format == "auto" else format,
        "directed": directed,
        "name": name,
        "id_type": id_type,
        "seed": seed,
        "header": header,
        "graph_format_version": FORMAT_VERSION,
    }


def _reusable(path: Path, key: str) -> Manifest | None:
    """The manifest of the valid graph at ``path`` recording ``key``, else ``None``."""
    if not (path / MANIFEST_FILE).is_file():
        return None
    try:
        manifest = GraphDir.open(path).manifest
    except InputError:
        return None
    if manifest.lineage.get("stage_key") != key or "report" not in manifest.lineage:
        return None
    return manifest


def ingest_versioned(
    source: str | os.PathLike[str],
    graphs_root: str | os.PathLike[str],
    prefix: str,
    format: str = "auto",  # noqa: A002 - the public name
    directed: bool = False,
    name: str | None = None,
    id_type: str = "auto",
    seed: int = 0,
    *,
    header: bool | None = None,
    nodes: str | os.PathLike[str] | None = None,
    standardize_features: bool = False,
    reuse: bool = True,
    progress: StageFn | None = None,
    memory_budget: int | str | None = "auto",
    tracking: RunTracker | None = None,
    tags: Mapping[str, Any] | None = None,
) -> VersionedIngest:
    """Ingest ``source`` into ``graphs_root/<prefix>-<key>`` unless it is there already.

    Args:
        source, format, directed, name, id_type, seed, header: As for
            :func:`gnncore.io.ingest`; all of them are in the key.
        nodes (str or PathLike, optional): The node table; its digest is an
            input of the key beside the source's.
        standardize_features (bool): Standardise the node table's features (in
            the key when set).
        graphs_root (str or PathLike): The directory holding graph directories.
        prefix (str): The readable part of the directory name (the dataset name).
        progress (callable, optional): Stage names as they start (see
            :func:`gnncore.io.ingest`).
        reuse (bool): Keep a valid graph directory that records the same key
            (default); ``False`` re-ingests and replaces it.
        memory_budget: As for :func:`gnncore.io.ingest` (default ``"auto"``).
            Not in the key: every budget writes the same graph.
        tracking (RunTracker, optional): Log the ingestion as a run (params: the
            settings and the budget; metrics: counts, seconds per phase, peak
            RSS, bytes read and written). A reused graph logs nothing; a
            failure marks the run failed.
        tags (Mapping, optional): Extra run tags (e.g. the Dagster run id).

    Returns:
        VersionedIngest: The path, key, input digest, whether it was reused,
        and the ingestion report.

    The graph is ingested into a hidden temporary sibling, its manifest gets
    the ``lineage`` record, and only then is it renamed into place.
    """
    if not os.path.exists(source):
        raise InputError("no such file or directory", Path(source))
    if nodes is not None and not os.path.exists(nodes):
        raise InputError("no such node table", Path(nodes))
    settings = ingest_settings(source, format, directed, name, id_type, seed, header)
    if standardize_features:  # absent when off, so earlier keys stay valid
        settings["standardize_features"] = True
    digest = input_digest(source)
    inputs = {"source": digest}
    if nodes is not None:
        inputs["nodes"] = input_digest(nodes)
    key = stage_key(INGEST_STAGE, settings, inputs)
    final = Path(graphs_root).absolute() / versioned_name(prefix, key)
    existing = _reusable(final, key) if reuse else None
    if existing is not None:
        report = IngestReport(**{**existing.lineage["report"], "out_dir": str(final)})
        return VersionedIngest(final, key, digest, sha256_of(final / MANIFEST_FILE), True, report)
    sources = [Path(source)] + ([Path(nodes)] if nodes is not None else [])
    check_output_dir(final, sources, FORMAT_NAME, "graph directory")
    final.parent.mkdir(parents=True, exist_ok=True)
    # a tmp sibling that records this pid: the next run removes it if this one is killed
    staging = final.parent / temporary_name(final, "tmp")
    run_name = f"{prefix}-ingest"
    run_tags = {"dataset": prefix, "task": "ingest", **(tags or {})}
    with tracking.start_run(run_name, run_tags) if tracking else nullcontext() as run:
        if run is not None:
            run.log_params({**settings, "memory_budget": memory_budget, "stage_key": key})
        report = _ingest_into(
            final,
            staging,
            key,
            settings,
            inputs,
            source,
            directed=directed,
            name=name,
            id_type=id_type,
            seed=seed,
            header=header,
            nodes=nodes,
            standardize_features=standardize_features,
            progress=progress,
            memory_budget=memory_budget,
        )
        if run is not None:
            run.log_metrics(ingest_metrics(report))
    manifest_sha256 = sha256_of(final / MANIFEST_FILE)
    run_id = run.run_id if run is not None else None
    return VersionedIngest(final, key, digest, manifest_sha256, False, report, run_id)


def ingest_metrics(report: IngestReport) -> dict[str, float]:
    """The figures an ingestion run logs: counts, seconds, and the stage's cost."""
    counts = {
        "num_nodes": report.num_nodes,
        "num_edges": report.num_canonical_edges,
        "self_loops_removed": report.self_loops_removed,
        "duplicates_removed": report.duplicates_removed,
        "seconds": report.seconds,
    }
    return {
        **{k: float(v) for k, v in counts.items()},
        **cost_metrics(
            report.phases,
            peak_rss_bytes=report.peak_rss_bytes,
            input_bytes=report.input_bytes,
            output_bytes=report.output_bytes,
            storage_read_bytes=report.storage_read_bytes,
            storage_written_bytes=report.storage_written_bytes,
        ),
    }


def _ingest_into(
    final: Path,
    staging: Path,
    key: str,
    settings: dict[str, Any],
    inputs: dict[str, str],
    source: str | os.PathLike[str],
    **kwargs: Any,
) -> IngestReport:
    """Ingest ``source`` into ``staging``, record the lineage, rename to ``final``."""
    try:
        report = ingest(source, staging, format=str(settings["format"]), **kwargs)
        report = dataclasses.replace(report, out_dir=str(final))
        manifest = Manifest.read(staging)
        lineage = {
            "stage": INGEST_STAGE,
            "stage_key": key,
            "settings": settings,
            "inputs": inputs,
            "report": report.to_dict(),
        }
        manifest = dataclasses.replace(manifest, lineage=lineage)
        manifest.write(staging)
        GraphDir.open(staging)
        replace_directory(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return report
