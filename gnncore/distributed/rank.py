r"""One rank of a distributed run: its device, its batch source and the shared loop.

Every rank process of :func:`~gnncore.distributed.run.train_distributed` runs
its task's rank runner (:attr:`~gnncore.distributed.tasks.RankTask.run_rank`):
:func:`run_node_rank` for node classification, :func:`run_link_rank` for link
prediction. Both open this rank's data (:class:`~gnncore.distributed.rank_data.RankData`),
pick its device (:func:`rank_device`), build the mode's batch source
(:mod:`gnncore.distributed.source`) and hand it to the single-process loop,
with the checkpoints, the MLflow run of rank 0 and the epoch hook of
:class:`RankRun`. What a rank returns is plain values (:func:`rank_report`):
the launcher pickles it back to the launching process.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
import torch.distributed as dist

from gnncore.distributed.collectives import all_gather_ints
from gnncore.distributed.link_data import LINK_SPLITS
from gnncore.distributed.rank_data import RankData
from gnncore.distributed.source.base import peak_rss_mb
from gnncore.distributed.source.link import DistLinkSource
from gnncore.distributed.source.node import DistBatchSource
from gnncore.distributed.source.sancus import SancusSource
from gnncore.train.core.checkpoint import CheckpointDir
from gnncore.train.core.session import Progress
from gnncore.train.fitting import RunHooks, fit
from gnncore.train.link.config import LinkTrainConfig
from gnncore.train.link.task import LinkTask
from gnncore.train.node.config import NodeTrainConfig
from gnncore.train.node.task import NodeTask

#: ``f(rank, epoch)``: called in every rank after each epoch is logged and checkpointed.
RankEpochHook = Callable[[int, int], None]

_Config = TypeVar("_Config", NodeTrainConfig, LinkTrainConfig)


@dataclass(frozen=True)
class RankRun:
    """What every rank of :func:`~gnncore.distributed.run.train_distributed` is
    given (picklable)."""

    ranks_dir: str
    config: NodeTrainConfig | LinkTrainConfig
    checkpoint_dir: str | None = None
    keep_checkpoints: int = 2
    resume: bool = False
    #: Rank 0's progress: tqdm bars (``True``), none, or ``progress(line)`` per epoch
    #: (picklable, e.g. :class:`~gnncore.progress.LineFile`).
    progress: Progress = False
    #: ``(tracking_uri, experiment_id, run_id)`` of the MLflow run rank 0 logs to.
    mlflow_run: tuple[str, str, str] | None = None
    on_epoch_end: RankEpochHook | None = None


def split_summary(ids: np.ndarray, group: Any = None) -> torch.Tensor:
    """``[n_0, crc_0, n_1, crc_1, ...]`` of every rank's owned ids of a split (a
    collective): what the checkpoint fingerprints, the same on every rank."""
    crc = zlib.crc32(np.ascontiguousarray(ids, dtype=np.int64).tobytes())
    return torch.from_numpy(all_gather_ints([len(ids), crc], group))


def rank_device(config: _Config) -> tuple[_Config, torch.device]:
    """This rank's device: under NCCL the GPU ``LOCAL_RANK`` (else the rank) of
    this machine, set as current; under gloo with a CUDA ``config.device``, GPUs
    shared by the ranks (``cuda:N``: that one; ``cuda``: ``LOCAL_RANK`` modulo
    the GPU count), the collectives going through host memory; else the CPU.
    The config comes back with that device."""
    nccl = dist.get_backend() == "nccl"
    if not nccl and not config.device.startswith("cuda"):
        return replace(config, device="cpu"), torch.device("cpu")
    local = int(os.environ.get("LOCAL_RANK", dist.get_rank()))
    wanted = torch.device(config.device) if config.device.startswith("cuda") else None
    if nccl:
        index = local
    elif wanted is not None and wanted.index is not None:
        index = wanted.index
    else:
        index = local % torch.cuda.device_count()
    torch.cuda.set_device(index)
    return replace(config, device=f"cuda:{index}"), torch.device("cuda", index)


def rank_logger(run: RankRun) -> Any | None:
    """The MLflow run logger of rank 0 (``None`` on the others, or without a run)."""
    if run.mlflow_run is None or dist.get_rank() != 0:
        return None
    # lazy: mlflow takes seconds to import; only rank 0 of a tracked run needs it
    from mlflow import MlflowClient

    from gnncore.tracking.mlflow import MlflowRunLogger

    uri, experiment_id, run_id = run.mlflow_run
    return MlflowRunLogger(MlflowClient(tracking_uri=uri), run_id, experiment_id, uri)


def rank_hooks(rank: int, run: RankRun) -> RunHooks:
    """The hooks both tasks train with, from ``run``: ``logger`` and ``progress``
    (rank 0 only), ``checkpoints``, ``resume`` and ``on_epoch_end`` (``run``'s
    hook called with this rank)."""
    checkpoints = (
        CheckpointDir(run.checkpoint_dir, keep=run.keep_checkpoints)
        if run.checkpoint_dir is not None
        else None
    )
    hook = run.on_epoch_end

    def on_epoch_end(epoch: int, path: Path | None) -> None:
        if hook is not None:
            hook(rank, epoch)

    return RunHooks(
        logger=rank_logger(run),
        progress=run.progress if rank == 0 else False,
        checkpoints=checkpoints,
        resume=run.resume,
        on_epoch_end=on_epoch_end,
    )


def rank_report(rank: int, result: Any, source: Any, **figures: Any) -> dict[str, Any]:
    """What a rank returns (plain values): the result fields but the model,
    ``figures``, ``batches_per_epoch``, ``peak_rss_mb``, the source's
    :meth:`rank_report` and, on rank 0, the best epoch's weights as NumPy arrays."""
    out: dict[str, Any] = {
        "rank": rank,
        "fields": {f.name: getattr(result, f.name) for f in fields(result) if f.name != "model"},
        **figures,
        "batches_per_epoch": source.num_batches,
        "peak_rss_mb": peak_rss_mb(),
        **source.rank_report(),
    }
    if rank == 0:
        out["state_dict"] = {
            k: v.detach().cpu().numpy() for k, v in result.model.state_dict().items()
        }
    return out


def run_node_rank(rank: int, world: int, run: RankRun) -> dict[str, Any]:
    """Train this rank of a distributed node-classification run (the group is
    initialised) over :class:`~gnncore.distributed.source.node.DistBatchSource`,
    or :class:`~gnncore.distributed.source.sancus.SancusSource` in mode
    ``sancus``; returns :func:`rank_report`. The launcher names the rank that
    failed first (:func:`~gnncore.distributed.launch.blame`)."""
    if not isinstance(run.config, NodeTrainConfig):
        raise TypeError(f"node classification takes a NodeTrainConfig, not {type(run.config)}")
    data = RankData.open(run.ranks_dir, rank)
    config, device = rank_device(run.config)
    source: DistBatchSource | SancusSource
    if config.mode == "sancus":
        source = SancusSource(data, config, device)
    else:
        source = DistBatchSource(data, config, device)
    train, val, test = (split_summary(data.split_ids(s)) for s in ("train", "val", "test"))
    task = NodeTask(
        source.feature_store,
        None,
        (train, val, test),
        data.num_classes,
        in_channels=data.num_features,
        eval_batches=(source.eval_batches("val"), source.eval_batches("test")),
    )
    result = fit(task, config, source, rank_hooks(rank, run))
    return rank_report(
        rank,
        result,
        source,
        train_ids=len(source.split_ids["train"]),
        owned_train_ids=len(data.split_ids("train")),
    )


def run_link_rank(rank: int, world: int, run: RankRun) -> dict[str, Any]:
    """Train this rank of a distributed link-prediction run (the group is
    initialised) over :class:`~gnncore.distributed.source.link.DistLinkSource`;
    returns :func:`rank_report`, with ``train_edges``."""
    if not isinstance(run.config, LinkTrainConfig):
        raise TypeError(f"link prediction takes a LinkTrainConfig, not {type(run.config)}")
    data = RankData.open(run.ranks_dir, rank)
    config, device = rank_device(run.config)
    source = DistLinkSource(data, config, device)
    # The same on every rank: what each rank owns of each split (count and crc).
    owned = [split_summary(np.asarray(data.array(f"link_{s}"))) for s in LINK_SPLITS]
    task = LinkTask(
        source.splits,
        source.feature_store,
        eval_ranks=(source.ranker("val"), source.ranker("test")),
        fingerprint_data=owned,
    )
    result = fit(task, config, source, rank_hooks(rank, run))
    return rank_report(
        rank,
        result,
        source,
        train_ids=len(source.splits.train),
        owned_train_ids=len(data.array("link_train")),
        train_edges=int(source.edge_index.shape[1]),
    )


__all__ = [
    "RankEpochHook",
    "RankRun",
    "rank_device",
    "rank_hooks",
    "rank_logger",
    "rank_report",
    "run_link_rank",
    "run_node_rank",
    "split_summary",
]
