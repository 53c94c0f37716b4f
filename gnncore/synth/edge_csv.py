"""A generated graph written as a plain ``src,dst`` CSV edge list, in bounded memory.

``gnncore synth OUT.csv --layout csv`` (library: :func:`write_edge_csv`) is
the raw input of ``gnncore bench scale``: the edges of a
:class:`~gnncore.synth.SynthSpec` as one text file, the way a user's own edge
list arrives, for ``gnncore ingest`` to read. The C++ generator's chunks
(:func:`~gnncore.synth.iter_edge_chunks`) are formatted by Polars'
``write_csv`` one chunk at a time into a single file, so memory is one chunk
(two int64 arrays and Polars' text buffer), whatever the graph's size.

Measured on this 2-core machine (8M edges, 2M nodes, under load): the
generator makes 5 M edges/s and Polars writes 9 M edges/s (30 M edges/s with
int32 columns, which are used whenever the ids fit), so generation, not the
writer, sets the pace; a C++ writer would not pay off.

The file is written as ``.NAME.tmp-PID-XXXXXXXX`` beside the output and
renamed into place when complete: a failed or killed run never leaves a
truncated CSV under the final name (the next run removes the stale temporary).
A hidden record ``.NAME.gnncore.json`` beside it (size and modification time)
lets a later run replace this file; any other existing file is refused unless
``--overwrite`` (:func:`gnncore.store.atomic.check_output_file`).
The edges are the generator's raw stream, self-loops and repeated pairs
included, as raw data has them; ingesting the file gives the graph
:func:`~gnncore.synth.generate_graph` builds for the same spec, up to the id
map of nodes without edges (tests).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from tqdm import tqdm

from gnncore.store.atomic import (
    check_output_file,
    remove_stale_temporaries,
    temporary_name,
    write_output_record,
)
from gnncore.synth.model import SynthSpec, iter_edge_chunks
from gnncore.usage import StageUsage

#: Edges per generated chunk: two int64 arrays of 32 MiB each, and Polars' text.
CSV_CHUNK_EDGES = 1 << 21
CSV_HEADER = "src,dst"
#: The format in the hidden record beside the CSV (``.NAME.gnncore.json``) that lets
#: a later run replace the file it wrote, and only that one, without --overwrite.
CSV_FORMAT = "gnncore.synth_csv"


def write_edge_csv(
    path: str | os.PathLike[str],
    spec: SynthSpec,
    *,
    chunk_edges: int = CSV_CHUNK_EDGES,
    header: bool = True,
    progress: bool = False,
) -> dict[str, Any]:
    """Write the edges of ``spec`` to ``path`` as a ``src,dst`` CSV (atomically).

    Args:
        path: The CSV file to create (replaced if present).
        spec: The generator's settings; ``spec.num_edges`` lines are written.
        chunk_edges: Edges generated and formatted at a time (the memory).
        header: Write the ``src,dst`` header line first.
        progress: Show a progress bar over the edges.

    Returns:
        dict: ``path``, ``num_nodes``, ``num_edges`` (lines written, raw:
        self-loops and repeats included), ``bytes``, ``phases`` (``generate``
        and ``write`` seconds) and the stage's usage
        (:meth:`gnncore.usage.StageUsage.to_dict`: ``seconds``,
        ``peak_rss_bytes``, storage bytes, ``output_bytes``).
    """
    spec.validate()
    final = Path(path).absolute()
    check_output_file(path, [], CSV_FORMAT, "generated edge CSV")
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(final)
    tmp = final.parent / temporary_name(final, "tmp")
    narrow = spec.num_nodes <= np.iinfo(np.int32).max
    phases = {"generate": 0.0, "write": 0.0}
    try:
        with (
            StageUsage() as usage,
            open(tmp, "wb") as out,
            tqdm(
                total=spec.num_edges,
                unit="edge",
                unit_scale=True,
                desc="write CSV",
                disable=not progress,
            ) as bar,
        ):
            if header:
                out.write(f"{CSV_HEADER}\n".encode())
            mark = time.perf_counter()
            for src, dst in iter_edge_chunks(spec, chunk_edges):
                now = time.perf_counter()
                phases["generate"] += now - mark
                if narrow:  # Polars formats int32 columns about 3x faster
                    src, dst = src.astype(np.int32), dst.astype(np.int32)
                pl.DataFrame({"src": src, "dst": dst}).write_csv(out, include_header=False)
                bar.update(len(src))
                mark = time.perf_counter()
                phases["write"] += mark - now
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, final)
        write_output_record(final, CSV_FORMAT)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    usage.set_outputs([final])
    return {
        "path": str(final),
        "num_nodes": spec.num_nodes,
        "num_edges": spec.num_edges,
        "bytes": final.stat().st_size,
        "phases": phases,
        **usage.to_dict(),
    }
