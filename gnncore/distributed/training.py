r"""Distributed training's entry: one rank per partition, restarts, the MLflow run.

:func:`train_distributed` writes (or reuses) the per-rank data of a partition
directory and starts one rank per partition through torch's elastic launcher
(:func:`~gnncore.distributed.launch.elastic_run`, on one machine or several)
or :func:`~gnncore.distributed.launch.spawn_local`, as :class:`Launch` says,
restarting from the newest checkpoint after a failure as often as
``max_restarts`` allows. How it runs is one :class:`DistributedConfig`; what
the ranks train is the task's own config (node classification's
:class:`~gnncore.train.NodeTrainConfig`, link prediction's
:class:`~gnncore.train.link.config.LinkTrainConfig`) and its
:class:`~gnncore.distributed.tasks.RankTask`. Each rank runs the task's rank
runner (:mod:`gnncore.distributed.rank`): the single-process loop over the
mode's batch source (:mod:`gnncore.distributed.source`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gnncore.distributed.join import launch_token
from gnncore.distributed.launch import RankFailed, elastic_run, spawn_local
from gnncore.distributed.rank import RankEpochHook, RankRun
from gnncore.distributed.tasks import LINK_TASK, NODE_TASK, RankTask
from gnncore.errors import InputError
from gnncore.partition.store import PartitionDir
from gnncore.store import GraphDir
from gnncore.train.core.checkpoint import CheckpointDir
from gnncore.train.core.session import Progress
from gnncore.train.link.config import LinkTrainConfig
from gnncore.train.node.config import ConfigError, NodeTrainConfig
from gnncore.train.record import tracked_run

#: The launchers of :func:`train_distributed`.
LAUNCHERS = ("torchrun", "spawn")


@dataclass(frozen=True)
class Launch:
    """Where and how :func:`train_distributed` starts its ranks.

    ``torchrun`` (the default) starts this machine's ``nproc`` ranks through
    torch's elastic launcher (:func:`~gnncore.distributed.launch.elastic_run`);
    with ``nnodes > 1`` every machine runs the same call with its own
    ``node_rank`` and the same ``master_addr``/``master_port`` (machine 0's
    address; the default ``127.0.0.1`` keeps everything on this machine).
    ``spawn`` uses :func:`~gnncore.distributed.launch.spawn_local` (one machine).
    ``max_restarts``: after a failed attempt, start all of this machine's ranks
    again from the newest checkpoint, this many times at most.
    ``join_token_file``: the file holding the token the ranks prove at
    rendezvous (default: ``GNNCORE_JOIN_TOKEN``, ``GNNCORE_JOIN_TOKEN_FILE``, else
    generated; :func:`~gnncore.distributed.join.launch_token`)."""

    launcher: str = "torchrun"
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int | None = None
    max_restarts: int = 0
    join_timeout: float = 300.0
    join_token_file: str | None = None

    def check(self) -> Launch:
        if self.launcher not in LAUNCHERS:
            raise ConfigError(f"launcher must be one of {LAUNCHERS}, got {self.launcher!r}")
        if self.nnodes < 1 or not 0 <= self.node_rank < self.nnodes:
            raise ConfigError(f"--node-rank {self.node_rank} is not in 0..{self.nnodes - 1}")
        if self.nnodes > 1 and self.launcher != "torchrun":
            raise ConfigError("several machines need the torchrun launcher")
        if self.nnodes > 1 and self.master_port is None:
            raise ConfigError("--nnodes > 1 needs --master-port (the same on every machine)")
        if self.max_restarts < 0:
            raise ConfigError(f"--max-restarts must be >= 0, got {self.max_restarts}")
        return self


@dataclass(frozen=True)
class DistributedConfig:
    """How :func:`train_distributed` runs the ranks (what they train is the
    task's own config).

    Attributes:
        nproc: Ranks on this machine; by default the partition's part count
            over ``launch.nnodes``.
        ranks_dir: Where the rank data goes (default: the task's
            :attr:`~gnncore.distributed.tasks.RankTask.default_dir`, e.g.
            ``<partition_dir>.ranks``); reused when it is there and current.
        replication: An HDR plan of the graph (as many parts): every rank folder
            also holds the plan's replicated nodes' rows, served locally (node
            classification only).
        checkpoint_dir: Written by rank 0, read by every rank with ``resume``
            and after a restart: a directory every rank can read.
        resume: Resume from the newest checkpoint of ``checkpoint_dir``.
        keep_checkpoints: Checkpoints kept (the newest).
        progress: Rank 0's progress: tqdm bars (``True``), nothing (``False``),
            or ``progress(line)`` once per epoch; a callable is pickled to the
            rank, so it must be picklable (:class:`~gnncore.progress.LineFile`
            writes the lines to a file another process can follow).
        backend: ``"gloo"`` or ``"nccl"`` (default: NCCL for a CUDA
            ``config.device``, else gloo). gloo with a CUDA device trains on GPUs
            shared by the ranks (several ranks on one GPU), the collectives
            through host memory.
        timeout: Seconds a collective may wait for its peers.
        run_timeout: Seconds a rank may run.
        on_epoch_end: ``f(rank, epoch)`` in every rank after each epoch
            (picklable: a module-level function).
        launch: How to start the ranks (:class:`Launch`).
    """

    nproc: int | None = None
    ranks_dir: str | os.PathLike[str] | None = None
    replication: str | os.PathLike[str] | None = None
    checkpoint_dir: str | os.PathLike[str] | None = None
    resume: bool = False
    keep_checkpoints: int = 2
    progress: Progress = False
    backend: str | None = None
    timeout: float = 120.0
    run_timeout: float = 24 * 3600.0
    on_epoch_end: RankEpochHook | None = None
    launch: Launch = field(default_factory=Launch)


def _check_backend(backend: str | None, device: str, local: int) -> str:
    """The process-group backend for ``local`` ranks per machine training on
    ``device`` (``None``: NCCL for a CUDA device, else gloo); refuses what cannot run."""
    cuda = device.startswith("cuda")
    backend = backend or ("nccl" if cuda else "gloo")
    if backend not in ("gloo", "nccl"):
        raise ConfigError(f"backend {backend!r}: use gloo or nccl")
    gpus = torch.cuda.device_count()
    if backend == "nccl" and not cuda:
        raise ConfigError(f"backend nccl runs on GPUs: give a CUDA device, not {device!r}")
    if cuda and gpus == 0:
        raise ConfigError(f"device {device!r}: no CUDA device is available")
    if backend == "nccl" and gpus < local:
        raise ConfigError(
            f"backend nccl: {local} ranks need {local} GPUs, found {gpus} "
            "(--backend gloo shares the GPUs between the ranks)"
        )
    return backend


@dataclass(frozen=True)
class _Setup:
    """A checked run: the graph, the partition, the task's config, the world,
    the backend, the rank data and the join token."""

    graph: GraphDir
    partition: PartitionDir
    config: Any
    local: int
    world: int
    backend: str
    ranks_dir: Path
    token: str | None

    @property
    def cuda(self) -> bool:
        """Whether the ranks train on CUDA devices (they then start as fresh
        interpreters, not forked: :func:`~gnncore.distributed.launch.forked.rank_start_method`)."""
        return str(self.config.device).startswith("cuda")


def _set_up(
    graph_dir: Any, partition_dir: Any, config: Any, options: DistributedConfig, task: RankTask
) -> _Setup:
    """Check the run and write (machine 0) or find the rank data."""
    launch = options.launch.check()
    # Once for every attempt: the other machines keep the token they were given.
    token = launch_token(launch.nnodes, launch.node_rank, launch.join_token_file)
    graph = GraphDir.open(graph_dir)
    config = task.prepare(config, graph)
    partition = PartitionDir.open(partition_dir, graph)
    local = partition.parts // launch.nnodes if options.nproc is None else int(options.nproc)
    world = local * launch.nnodes
    if world != partition.parts:
        raise ConfigError(
            f"--nproc {local} x --nnodes {launch.nnodes}: the partition {partition.path} has "
            f"{partition.parts} parts; one rank trains each partition"
        )
    backend = _check_backend(options.backend, config.device, local)
    if launch.max_restarts and options.checkpoint_dir is None:
        raise ConfigError("--max-restarts resumes from checkpoints: give a checkpoint directory")
    target = Path(options.ranks_dir or task.default_dir(partition_dir)).absolute()
    if launch.node_rank == 0:
        out = task.write(graph.path, partition.path, target, options.replication)
    else:
        out = target
        if not (out / "manifest.json").is_file():
            raise InputError(
                "machine "
                f"{launch.node_rank} writes no rank data: copy or share the rank folders "
                "written on machine 0 (or by gnncore ranks) to this path",
                out,
            )
    return _Setup(graph, partition, config, local, world, backend, out, token)


class _Attempts:
    """The attempts of one run: the ranks started, and started again from the
    newest checkpoint after a failure while ``launch.max_restarts`` allows."""

    def __init__(self, setup: _Setup, options: DistributedConfig, task: RankTask) -> None:
        self.setup, self.options, self.task = setup, options, task
        self.restarts = 0
        # A fresh run keeps the checkpoints it finds (a previous run's) until it writes
        # its first: a restart resumes only once an attempt of this run has written one.
        path = options.checkpoint_dir
        self.store = None if path is None else CheckpointDir(path)
        self.found = frozenset() if self.store is None else self.store.identity()

    def attempt(self, mlflow_run: tuple[str, str, str] | None, again: bool) -> dict[int, Any]:
        """Start every rank of this machine once; ``{rank: report}``."""
        s, o, launch = self.setup, self.options, self.options.launch
        wrote = self.store is not None and self.store.identity() != self.found
        run = RankRun(
            str(s.ranks_dir),
            s.config,
            None if o.checkpoint_dir is None else str(o.checkpoint_dir),
            o.keep_checkpoints,
            o.resume or (again and wrote),
            o.progress,
            mlflow_run,
            o.on_epoch_end,
        )
        if launch.launcher == "spawn":
            ranks = spawn_local(
                self.task.run_rank,
                s.world,
                (run,),
                backend=s.backend,
                timeout=o.timeout,
                run_timeout=o.run_timeout,
                join_token=s.token,
                cuda=s.cuda,
            )
            return dict(enumerate(ranks))
        return elastic_run(
            self.task.run_rank,
            s.local,
            (run,),
            nnodes=launch.nnodes,
            node_rank=launch.node_rank,
            master_addr=launch.master_addr,
            master_port=launch.master_port,
            backend=s.backend,
            timeout=o.timeout,
            run_timeout=o.run_timeout,
            join_timeout=launch.join_timeout,
            join_token=s.token,
            cuda=s.cuda,
        )

    def run_all(self, mlflow_run: tuple[str, str, str] | None) -> Any:
        """Attempt until one succeeds or the restarts run out; the task's result."""
        launch, s = self.options.launch, self.setup
        while True:
            try:
                ranks = self.attempt(mlflow_run, self.restarts > 0)
                break
            except RankFailed as err:
                if self.restarts >= launch.max_restarts:
                    raise
                self.restarts += 1
                print(
                    f"gnncore: restart {self.restarts} of {launch.max_restarts} after: "
                    f"{str(err).splitlines()[0]}",
                    file=sys.stderr,
                    flush=True,
                )
        per_rank = [ranks[r] for r in sorted(ranks)]
        out = str(s.ranks_dir)
        if launch.node_rank > 0:
            return self.task.ranks_result(s.world, launch.node_rank, out, per_rank, self.restarts)
        return self.task.main_result(per_rank, s.config, s.graph.manifest, s.world, out)


def _tracked(
    attempts: _Attempts,
    tracking: Any,
    tags: Mapping[str, Any] | None,
    run_name: str | None,
) -> Any:
    """``attempts`` inside an MLflow run this process opens (parameters first,
    the outcome last; ``FAILED`` when the last attempt fails)."""
    s, o, task = attempts.setup, attempts.options, attempts.task
    launch, m = o.launch, s.graph.manifest
    checkpoint_dir = o.checkpoint_dir
    resume_from = (
        CheckpointDir(checkpoint_dir).latest() if o.resume and checkpoint_dir is not None else None
    )
    with tracked_run(
        tracking, m.name, task.name, s.config.model, tags, run_name, resume_from
    ) as logger:
        logger.log_params(
            {
                **task.run_params(s.config, s.graph, s.ranks_dir, checkpoint_dir),
                "world_size": s.world,
                "backend": s.backend,
                "partitioner": s.partition.method,
                "partition_dir": str(s.partition.path),
                "ranks_dir": str(s.ranks_dir),
                "launcher": launch.launcher,
                "nnodes": launch.nnodes,
                "max_restarts": launch.max_restarts,
            }
        )
        try:
            result = attempts.run_all((logger.tracking_uri, logger.experiment_id, logger.run_id))
        finally:
            tracking.client.set_tag(logger.run_id, "restarts", str(attempts.restarts))
        task.log_outcome(logger, result, s.graph)
    return result


def train_distributed(
    graph_dir: str | os.PathLike[str],
    partition_dir: str | os.PathLike[str],
    config: NodeTrainConfig | LinkTrainConfig | None = None,
    options: DistributedConfig | None = None,
    *,
    tracking: Any | None = None,
    tags: Mapping[str, Any] | None = None,
    run_name: str | None = None,
    task: RankTask | None = None,
) -> Any:
    r"""Train a node classifier with one rank per partition (another task with
    ``task``: :func:`train_distributed_link`).

    Writes the per-rank data of ``graph_dir`` split by ``partition_dir`` into
    ``options.ranks_dir`` (reused when it is already there and current), then
    runs the task's rank runner in this machine's ``options.nproc`` ranks,
    started as ``options.launch`` says (:class:`Launch`; by default torch's
    elastic launcher on 127.0.0.1, gloo, or NCCL when ``backend="nccl"``, one
    GPU per rank).

    Several machines (``launch.nnodes > 1``): each runs this call with its
    ``node_rank``; machine ``i`` runs ranks ``i * nproc ..``. Machine 0 writes
    the rank data when it is missing or stale; the others never write it and
    need it already there (the folders of their own ranks, on a shared file
    system or copied; ``gnncore ranks`` writes it).

    With ``tracking`` (an :class:`~gnncore.tracking.MlflowTracker`; machine 0
    only, ignored elsewhere) this process opens the run (``tags``,
    ``run_name``) and logs its parameters (the config, the dataset, the world
    size and partitioner); rank 0 logs the epochs into it; this process then
    logs the curves and the model. The run ends ``FINISHED``, or ``FAILED``
    when a rank fails for the last time (the
    :class:`~gnncore.distributed.launch.RankFailed` propagates).

    Args:
        config: The task's config (default: the task's defaults).
        options: How the ranks run (:class:`DistributedConfig`; default: its defaults).
        task: What the ranks train (:class:`~gnncore.distributed.tasks.RankTask`;
            default node classification,
            :data:`~gnncore.distributed.tasks.NODE_TASK`).

    Returns:
        :class:`~gnncore.distributed.results.DistNodeTrainResult` on machine 0,
        :class:`~gnncore.distributed.results.DistNodeRanksResult` on the others
        (the task's results).

    Raises:
        ConfigError: Settings distributed training does not support, or a
            world size other than the partition count.
        RankFailed: A rank raised, died, was refused at rendezvous (join token)
            or the run ran out of time, after the last restart; the message
            names the rank.
        InputError: A bad join token file (``launch.join_token_file``).
        TokenError: No join token on a machine other than 0.
    """
    task = task or NODE_TASK
    options = options or DistributedConfig()
    setup = _set_up(graph_dir, partition_dir, config, options, task)
    attempts = _Attempts(setup, options, task)
    if tracking is None or options.launch.node_rank > 0:
        return attempts.run_all(None)
    return _tracked(attempts, tracking, tags, run_name)


def train_distributed_link(
    graph_dir: str | os.PathLike[str],
    partition_dir: str | os.PathLike[str],
    config: LinkTrainConfig | None = None,
    options: DistributedConfig | None = None,
    *,
    tracking: Any | None = None,
    tags: Mapping[str, Any] | None = None,
    run_name: str | None = None,
) -> Any:
    """Train a link predictor with one rank per partition: :func:`train_distributed`
    with :data:`~gnncore.distributed.tasks.LINK_TASK`, the rank data's link
    files written into ``options.ranks_dir`` (default
    :func:`~gnncore.distributed.tasks.default_link_ranks_dir`). Needs node
    features and a GNN encoder
    (:func:`~gnncore.distributed.source.link.check_link_config`).

    Returns:
        :class:`~gnncore.distributed.results.DistLinkTrainResult` on machine 0,
        :class:`~gnncore.distributed.results.DistLinkRanksResult` on the others.
    """
    return train_distributed(
        graph_dir,
        partition_dir,
        config,
        options,
        tracking=tracking,
        tags=tags,
        run_name=run_name,
        task=LINK_TASK,
    )


__all__ = [
    "LAUNCHERS",
    "DistributedConfig",
    "Launch",
    "train_distributed",
    "train_distributed_link",
]
