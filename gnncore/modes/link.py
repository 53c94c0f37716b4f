"""Link prediction on a graph directory, in memory, memory-mapped or through a
partition buffer of embeddings on disk (``config.mode="partition_buffer"``:
:mod:`gnncore.outofcore.link_buffer`), then its record."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnncore.modes.run import RunRecording, line_logger
from gnncore.outofcore.link_buffer import link_buffer_source
from gnncore.store import GraphDir, GraphDirFeatureStore
from gnncore.store.feature_store import TensorFeatureStore
from gnncore.store.scratch import scratch_dir
from gnncore.train.core.checkpoint import data_fingerprint, open_checkpoints
from gnncore.train.core.session import Progress
from gnncore.train.link.config import LinkTrainConfig
from gnncore.train.link.data import LinkSplits, link_splits
from gnncore.train.link.loop import LinkTrainResult
from gnncore.train.link.task import LinkTask
from gnncore.train.record import fit_recorded, link_run_params


def train_link_graph_dir(
    graph: GraphDir, config: LinkTrainConfig, run: RunRecording
) -> LinkTrainResult:
    """:func:`~gnncore.modes.train_graph_dir` for link prediction."""
    m = graph.manifest
    splits = link_splits(graph)
    feature_store: Any = GraphDirFeatureStore(graph)
    if config.mode == "in_memory" and graph.features() is not None:
        feature_store = TensorFeatureStore({"x": torch.from_numpy(np.array(graph.features()))})
    checkpoints, previous = open_checkpoints(
        run.checkpoint_dir,
        run.resume,
        run.keep_checkpoints,
        config,
        lambda: data_fingerprint(
            splits.tensors(), splits.num_relations, m.num_features if config.model != "none" else 0
        ),
    )

    task = LinkTask(splits, feature_store)
    return fit_recorded(
        task,
        config,
        link_batches(splits, config, run.checkpoint_dir, run.progress),
        run.hooks(checkpoints),
        run.record(
            graph,
            link_run_params(config, m, splits, run.checkpoint_dir),
            previous,
            f"{m.name}-link-{config.model}-{config.decoder}",
        ),
    )


@contextlib.contextmanager
def link_batches(
    splits: LinkSplits,
    config: LinkTrainConfig,
    checkpoint_dir: str | os.PathLike[str] | None,
    progress: Progress,
) -> Iterator[Any]:
    """The partition buffer of ``mode="partition_buffer"`` (its tables in
    ``<checkpoint_dir>.partition-buffer`` beside the checkpoints, or in a
    temporary directory; removed afterwards), else ``None`` (the loop's own
    loader)."""
    if config.mode != "partition_buffer":
        yield None
        return
    if checkpoint_dir is not None:
        # Beside the checkpoints (on the data root's disk; /tmp may be in memory),
        # under one name per checkpoint directory: what a killed run left there is
        # replaced (a resumed run restores the tables from its checkpoint's
        # snapshot, never from these live files).
        checkpoints = Path(checkpoint_dir).absolute()
        work = checkpoints.parent / f"{checkpoints.name}.partition-buffer"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
    else:
        work = scratch_dir("gnncore-partition-buffer-")
    source = link_buffer_source(splits, config, work, line_logger(progress))
    try:
        yield source
    finally:
        source.close()
