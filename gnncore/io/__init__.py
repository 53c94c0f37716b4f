"""Ingestion: read graph datasets into gnncore graph directories with Polars.

:func:`ingest` reads one dataset and writes it atomically through
:func:`gnncore.store.create_graph_dir` (an error leaves no output behind;
re-running replaces the output). Formats:

* ``edgelist`` -- CSV/TSV/whitespace text, optionally gzipped, SNAP ``#``
  comments, optional header (:mod:`gnncore.io.readers.edgelist`);
* ``parquet`` -- an edge table (:mod:`gnncore.io.readers.parquet`);
* ``ogb`` -- the OGB node-property raw layout (:mod:`gnncore.io.readers.ogb`);
* ``planetoid`` -- Cora/CiteSeer/PubMed raw files via PyG (:mod:`gnncore.io.readers.planetoid`);
* ``kg`` -- ``train/valid/test.txt`` triples (:mod:`gnncore.io.readers.kg`);
* ``auto`` -- guessed from the path (:mod:`gnncore.io.detect`).

:func:`ingest_versioned` (:mod:`gnncore.io.versioning.versioned`) ingests into a
directory named by the settings and the input's digest, and reuses it when it
already holds that graph.

Every input error is an :class:`~gnncore.errors.InputError` naming the file,
the 1-based line (text) or 0-based row (tables) and the problem.
"""

from gnncore.io.detect import FORMATS, detect_format
from gnncore.io.dispatch import ID_TYPES, in_memory_peak_estimate, ingest
from gnncore.io.report import IngestReport
from gnncore.io.versioning.versioned import VersionedIngest, ingest_versioned

__all__ = [
    "FORMATS",
    "ID_TYPES",
    "IngestReport",
    "VersionedIngest",
    "detect_format",
    "in_memory_peak_estimate",
    "ingest",
    "ingest_versioned",
]
