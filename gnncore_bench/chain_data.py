"""The raw input of ``gnncore bench chain``: a generated graph as a user brings it.

A user's graph arrives as an edge list and a node table beside it (features,
labels, splits; docs/FORMAT.md), which ``raw_dataset`` takes as ``source`` and
``nodes``. :func:`write_chain_input` writes both for a
:class:`~gnncore.synth.SynthSpec`: the edges with
:func:`~gnncore.synth.write_edge_csv` (``src,dst``, one chunk in memory at a
time) and the node table as Parquet, written in row groups of
:data:`ROWS_PER_GROUP` nodes (``node_id``, ``label``, ``split`` and one float32
column ``f0 .. f{F-1}`` per feature), so memory is the O(|V|) labels and splits
plus one row group, whatever the feature bytes. Same communities, labels,
features and split as :func:`~gnncore.synth.generate_graph` for the spec.

Run as ``python -m gnncore_bench.chain_data OUT_DIR SPEC_JSON`` (the harness
runs it under the chain's memory limit as the ``csv`` stage).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from gnncore.synth import SynthSpec, fill_features, labels, node_table, write_edge_csv
from gnncore.synth.model import split as split_nodes
from gnncore.usage import StageUsage

#: Nodes per Parquet row group (64 features: 64 MiB of float32 at a time).
ROWS_PER_GROUP = 1 << 18
EDGES_NAME = "edges.csv"
NODES_NAME = "nodes.parquet"
SPLIT_NAMES = ("train", "val", "test", "none")


def write_node_table(path: Path, spec: SynthSpec, rows_per_group: int = ROWS_PER_GROUP) -> int:
    """Write the node table of ``spec`` to ``path`` (Parquet); return its bytes."""
    y = labels(spec, node_table(spec)[0])
    split = np.full(spec.num_nodes, 3, dtype=np.int8)
    for code, ids in enumerate(split_nodes(spec, y)):
        split[ids] = code
    names = pa.array(SPLIT_NAMES, type=pa.string())
    columns = [f"f{i}" for i in range(spec.num_features)]
    schema = pa.schema(
        [("node_id", pa.int64()), ("label", pa.int64()), ("split", pa.string())]
        + [(c, pa.float32()) for c in columns]
    )
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    block = np.empty((rows_per_group, spec.num_features), dtype=np.float32)
    try:
        with pq.ParquetWriter(tmp, schema) as writer:
            for start in range(0, spec.num_nodes, rows_per_group):
                stop = min(start + rows_per_group, spec.num_nodes)
                x = fill_features(spec, y, start, block[: stop - start])
                arrays = [
                    pa.array(np.arange(start, stop, dtype=np.int64)),
                    pa.array(y[start:stop]),
                    names.take(pa.array(split[start:stop])),
                    *(pa.array(x[:, i]) for i in range(spec.num_features)),
                ]
                writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path.stat().st_size


def write_chain_input(out_dir: Path, spec: SynthSpec) -> dict[str, Any]:
    """Write ``edges.csv`` and ``nodes.parquet`` of ``spec`` into ``out_dir``.

    Returns:
        dict: ``edges`` and ``nodes`` (paths), ``num_nodes``, ``num_edges``
        (CSV lines), ``edges_bytes``, ``nodes_bytes`` and the stage's usage
        (:meth:`gnncore.usage.StageUsage.to_dict`).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    edges, nodes = out_dir / EDGES_NAME, out_dir / NODES_NAME
    with StageUsage() as usage:
        csv = write_edge_csv(edges, spec)
        nodes_bytes = write_node_table(nodes, spec)
    usage.set_outputs([edges, nodes])
    return {
        "edges": str(edges),
        "nodes": str(nodes),
        "num_nodes": spec.num_nodes,
        "num_edges": csv["num_edges"],
        "edges_bytes": csv["bytes"],
        "nodes_bytes": nodes_bytes,
        **usage.to_dict(),
    }


def main(argv: list[str]) -> int:
    """``python -m gnncore_bench.chain_data OUT_DIR SPEC_JSON [SUMMARY_JSON]``."""
    out_dir, spec = Path(argv[0]), SynthSpec(**json.loads(argv[1]))
    summary = write_chain_input(out_dir, spec)
    if len(argv) > 2:
        Path(argv[2]).write_text(json.dumps(summary, indent=2, default=str) + "\n")
    print(json.dumps(summary, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
