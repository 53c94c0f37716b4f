"""A new random order of a graph's partition stream, everything else shared.

Streaming partitioners (GREM, greedy) depend on the order of
``edges_shuffled.npy``; comparing several shuffles of one graph needs copies
that differ only there. Other files are hard-linked (copied across
filesystems), so a reshuffled copy of a large graph costs one edge file.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import numpy as np

from gnncore.store.atomic import atomic_directory, check_output_dir
from gnncore.store.graph_dir import GraphDir
from gnncore.store.manifest import FORMAT_NAME, FileEntry, sha256_of

STREAM = "edges_shuffled.npy"


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def reshuffle_edges(
    graph_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], seed: int
) -> GraphDir:
    """Write a copy of ``graph_dir`` whose ``edges_shuffled.npy`` uses ``seed``.

    The permutation is drawn exactly as in-memory ingestion draws it, so
    ``reshuffle_edges(g, out, s)`` streams the same order as ingesting with
    ``seed=s`` (bounded ingestion too, unless it recorded
    ``stats.shuffle_buckets``: that mark is not copied).
    """
    graph = GraphDir.open(graph_dir)
    check_output_dir(out_dir, [graph.path], FORMAT_NAME, "graph directory")
    stream = graph.array("edges_shuffled")
    n = max(graph.num_nodes, 1)
    key = stream[:, 0].astype(np.int64) * n + stream[:, 1]  # back to canonical (sorted) order
    key.sort()
    pairs = np.empty(stream.shape, dtype=stream.dtype)
    pairs[:, 0], pairs[:, 1] = key // n, key % n
    del key
    perm = np.random.default_rng(seed).permutation(len(pairs))
    with atomic_directory(out_dir) as tmp:
        for name in graph.manifest.files:
            if name != STREAM:
                _link_or_copy(graph.path / name, tmp / name)
        np.save(tmp / STREAM, pairs[perm])
        entry = graph.manifest.files[STREAM]
        files = dict(graph.manifest.files)
        files[STREAM] = FileEntry(
            STREAM,
            "npy",
            (tmp / STREAM).stat().st_size,
            sha256_of(tmp / STREAM),
            dtype=entry.dtype,
            shape=entry.shape,
        )
        stats = {k: v for k, v in graph.manifest.stats.items() if k != "shuffle_buckets"}
        stats["shuffle_seed"] = seed  # numpy's permutation, whatever drew the source's order
        manifest = dataclasses.replace(graph.manifest, files=files, stats=stats)
        manifest.write(tmp)
    return GraphDir.open(out_dir)
