r"""Distributed node classification: one rank per partition, the shared loop.

DistDGL's trainer (ALGORITHMS.md §2, §8) as one more
:class:`~gnncore.train.core.batches.BatchSource` of
:func:`~gnncore.train.train_node_classifier`; the loop, the session and the
checkpoints are the single-process ones.

* **Training ids.** Rank ``r`` trains on the training nodes it owns. When the
  ranks own unequal numbers, the ones with a surplus hand a random subset of
  it (drawn from ``(seed, rank)``) to the ones short of nodes
  (:func:`transfer_plan`), so each ends up with ``T // W`` or ``T // W + 1``
  of the ``T`` training nodes and keeps all it can of its own.
* **Equal batch counts.** ``config.batch_size`` is the global batch of one
  optimiser step, so each rank takes ``B = ceil(batch_size / W)`` seeds per
  batch, and every rank runs ``K = max_r ceil(n_r / B)`` batches per epoch:
  its shuffled ids (drawn from ``(seed, epoch, rank)``) split into ``K``
  near-equal batches, so no collective is left unmatched. The sampler
  (:class:`~gnncore.distributed.sampler.DistNeighborSampler`) and the feature
  store (:class:`~gnncore.distributed.feature_store.DistFeatureStore`) run
  their exchanges in the training thread, between the gradient all-reduces of
  :class:`~torch.nn.parallel.DistributedDataParallel`.
* **Evaluation** is sharded the same way (balanced, ``K`` batches per rank,
  a rank with no seeds left in a round still serves its peers) and the
  confusion matrices are summed with ``all_reduce``: every rank gets the same
  accuracy, so early stopping and the best epoch agree on every rank.
* **Rank 0** alone logs and writes checkpoints (``main_process``); every rank
  loads the checkpoint when resuming. The per-rank figures of each epoch
  (remote-row share, rows and bytes fetched, seconds of sampling, feature
  exchange and compute, peak RSS) are gathered to every rank by :meth:`adapt`
  and logged by rank 0 as ``rank<r>_<figure>``, with totals as ``dist_*``.

:func:`train_distributed` writes (or reuses) the per-rank data of a partition
directory and starts one rank per partition through torch's elastic launcher
(:func:`~gnncore.distributed.launch.elastic_run`, on one machine or several;
:class:`Launch`), restarting from the newest checkpoint after a failure as
often as ``max_restarts`` allows.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch_geometric.data import Data, TensorAttr
from torch_geometric.sampler import NodeSamplerInput

from gnncore.distributed.exchange import (
    all_gather_fields,
    all_reduce_sum,
    comm_device,
    exchange,
)
from gnncore.distributed.feature_store import DistFeatureStore, Replica
from gnncore.distributed.rank_data import RankData
from gnncore.distributed.sampler import DistNeighborSampler, sampled_data
from gnncore.errors import InputError
from gnncore.train.core.session import Progress
from gnncore.train.link.config import LinkTrainConfig
from gnncore.train.node.config import OUT_OF_CORE_MODES, ConfigError, NodeTrainConfig
from gnncore.train.node.loop import NodeTrainResult

#: ``f(rank, epoch)``: called in every rank after each epoch is logged and checkpointed.
RankEpochHook = Callable[[int, int], None]


# Splitting the ids -----------------------------------------------------------


def transfer_plan(counts: Any) -> np.ndarray:
    """``moves[i, j]``: how many of rank ``i``'s ids go to rank ``j`` so that every
    rank ends with ``T // W`` or ``T // W + 1`` of the ``T = sum(counts)`` ids,
    moving as few as possible (the ranks owning the most keep the extra ones;
    ties by rank). Surpluses are matched to deficits in rank order."""
    counts = np.asarray(counts, dtype=np.int64)
    world = len(counts)
    total = int(counts.sum())
    target = np.full(world, total // world, dtype=np.int64)
    order = np.lexsort((np.arange(world), -counts))  # most first, ties by rank
    target[order[: total % world]] += 1
    surplus = counts - target
    moves = np.zeros((world, world), dtype=np.int64)
    givers = [int(r) for r in np.flatnonzero(surplus > 0)]
    takers = [int(r) for r in np.flatnonzero(surplus < 0)]
    left = surplus.copy()
    t = 0
    for g in givers:
        while left[g] > 0:
            r = takers[t]
            n = min(int(left[g]), int(-left[r]))
            moves[g, r] += n
            left[g] -= n
            left[r] += n
            if left[r] == 0:
                t += 1
    return moves


def _all_counts(n: int, group: Any) -> np.ndarray:
    return _all_gather_ints([n], group)


def _all_gather_ints(values: list[int], group: Any) -> np.ndarray:
    """``values`` of every rank, concatenated in rank order (a collective)."""
    device = comm_device(group)
    world = dist.get_world_size(group)
    mine = torch.tensor(values, dtype=torch.int64, device=device)
    out = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(out, mine, group=group)
    return torch.cat(out).cpu().numpy()


def balance_ids(own: np.ndarray, seed: int, group: Any = None) -> np.ndarray:
    """This rank's share of a split whose ids each rank owns ``own`` of
    (a collective): its own ids less those handed on (a random subset drawn
    from ``(seed, rank)``), plus those received (:func:`transfer_plan`). Sorted."""
    own = np.sort(np.asarray(own, dtype=np.int64))
    return np.sort(balance_rows(own, seed, group))


def balance_rows(own: np.ndarray, seed: int, group: Any = None) -> np.ndarray:
    """This rank's share of int64 rows (ids, or ``[n, k]`` triples) of which each
    rank owns ``own`` (a collective): the rows it keeps, in their order, then
    those received from each rank in rank order. Ranks with a surplus hand on a
    random subset (drawn from ``(seed, rank)``, in their order) to the ranks
    short of rows (:func:`transfer_plan`)."""
    rank = dist.get_rank(group)
    own = np.asarray(own, dtype=np.int64)
    moves = transfer_plan(_all_counts(len(own), group))
    give = moves[rank]
    order = np.random.default_rng([seed, 7919, rank]).permutation(len(own))
    handed = own[np.sort(order[: int(give.sum())])]
    parts = list(torch.split(torch.from_numpy(handed), give.tolist()))
    received = exchange(parts, group)
    kept = own[np.sort(order[int(give.sum()) :])]
    return np.concatenate([kept, *[r.numpy().reshape(-1, *own.shape[1:]) for r in received]])


def _max(value: int, group: Any) -> int:
    return int(_all_counts(value, group).max())


def split_batches(ids: np.ndarray, num_batches: int, rng: np.random.Generator) -> list[np.ndarray]:
    """``ids`` shuffled by ``rng`` and cut into ``num_batches`` near-equal batches of
    distinct ids; when there are fewer ids than batches, ids are repeated (each
    batch then holds one)."""
    ids = np.asarray(ids, dtype=np.int64)
    if num_batches <= 0:
        return []
    if len(ids) == 0:
        raise ValueError("cannot fill batches from no ids")
    shuffled = ids[rng.permutation(len(ids))]
    if len(shuffled) < num_batches:
        shuffled = shuffled[np.arange(num_batches) % len(shuffled)]
    return [np.ascontiguousarray(b) for b in np.array_split(shuffled, num_batches)]


# Batches --------------------------------------------------------------------


@dataclass
class RankFigures:
    """One rank's counters over a span of batches (training epoch)."""

    batches: int = 0
    seeds: int = 0
    sample_s: float = 0.0
    exchange_s: float = 0.0

    def add(self, other: RankFigures) -> None:
        self.batches += other.batches
        self.seeds += other.seeds
        self.sample_s += other.sample_s
        self.exchange_s += other.exchange_s


#: What each rank sends of its epoch in :meth:`DistBatchSource.adapt`, in this
#: order (one float64 row per rank): ``end_epoch``'s figures, then the step's
#: ``compute_s`` and the peak RSS.
EPOCH_FIGURES = (
    "remote_share",
    "remote_rows",
    "local_rows",
    "remote_bytes",
    "served_bytes",
    "id_bytes",
    "batches",
    "seeds",
    "sample_s",
    "exchange_s",
    "compute_s",
    "peak_rss_mb",
)


def peak_rss_mb() -> float:
    """This process's peak resident set size in MiB (``ru_maxrss``)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


class DistBatchSource:
    r"""This rank's training batches for :func:`~gnncore.train.train_node_classifier`
    (see the module docstring); also its evaluation batches (:meth:`eval_batches`).

    Args:
        data (RankData): This rank's data (its rank and part count match the group).
        config (NodeTrainConfig): ``fanouts``, ``eval_fanouts``, ``batch_size``,
            ``eval_batch_size`` and ``seed`` are read.
        device (torch.device): The training device (CUDA with NCCL: this rank's GPU).
        group (ProcessGroup, optional): The group (default: the default group).
    """

    def __init__(
        self,
        data: RankData,
        config: NodeTrainConfig,
        device: torch.device,
        group: Any = None,
    ) -> None:
        self.data = data
        self.config = config
        self.device = device
        self.group = group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        #: Only rank 0 logs and writes checkpoints.
        self.main_process = self.rank == 0
        self.feature_store = DistFeatureStore(data, group, replica=Replica.of(data))
        # An MLP reads no edges: sample the seeds only.
        hops = (0,) * config.num_layers if config.model == "none" else config.fanouts
        self.sampler = DistNeighborSampler(data, hops, seed=config.seed, group=group)
        eval_hops = (
            (0,) * config.num_layers
            if config.model == "none"
            else config.eval_fanouts or (-1,) * config.num_layers
        )
        self.eval_sampler = DistNeighborSampler(data, eval_hops, seed=config.seed + 1, group=group)
        #: Unused for shuffling (epoch ``e`` of rank ``r`` shuffles with ``(seed, e, r)``,
        #: so a resumed rank draws what it would have); kept for the checkpoint.
        self.generator = torch.Generator().manual_seed(config.seed)
        self.split_ids = {
            s: balance_ids(data.split_ids(s), config.seed + i, group)
            for i, s in enumerate(("train", "val", "test"))
        }
        total_train = int(_all_counts(len(self.split_ids["train"]), group).sum())
        if total_train < self.world:
            raise ConfigError(
                f"{total_train} training nodes cannot feed {self.world} ranks (one at least each)"
            )
        #: Seeds per rank and batch: ``config.batch_size`` is the global batch (one
        #: optimiser step of DDP averages the ranks' gradients), as in one process.
        self.batch_size = -(-config.batch_size // self.world)
        self.num_batches = _max(-(-len(self.split_ids["train"]) // self.batch_size), group)
        self._plan: list[np.ndarray] = []
        self.epoch_figures = RankFigures()
        self._stats_at_start: dict[str, float] = {}
        self._last: dict[str, float] = {}

    # The loop's hooks ------------------------------------------------------

    def __len__(self) -> int:
        return self.num_batches

    def start_epoch(self, epoch: int) -> None:
        rng = np.random.default_rng([self.config.seed, epoch, self.rank])
        self._plan = split_batches(self.split_ids["train"], self.num_batches, rng)
        self.epoch_figures = RankFigures()
        self._stats_at_start = self.feature_store.stats.as_dict()

    def batches(self) -> contextlib.AbstractContextManager[Iterator[Any]]:
        return contextlib.nullcontext(self._iterate(self._plan, self.sampler, self.epoch_figures))

    def end_epoch(self, epoch: int) -> None:
        now = self.feature_store.stats.as_dict()
        delta = {k: now[k] - self._stats_at_start.get(k, 0.0) for k in now}
        rows = delta["local_rows"] + delta["remote_rows"]
        self._last = {
            "remote_share": delta["remote_rows"] / rows if rows else 0.0,
            "remote_rows": delta["remote_rows"],
            "local_rows": delta["local_rows"],
            "remote_bytes": delta["remote_bytes"],
            "served_bytes": delta["served_bytes"],
            "id_bytes": delta["id_bytes"],
            "batches": float(self.epoch_figures.batches),
            "seeds": float(self.epoch_figures.seeds),
            "sample_s": self.epoch_figures.sample_s,
            "exchange_s": self.epoch_figures.exchange_s,
        }

    def adapt(self, epoch: int, throughput: dict[str, float]) -> dict[str, float]:
        """Every rank's figures of the epoch (a collective), as ``rank<r>_<name>``,
        and their totals: ``dist_remote_share`` (fetched rows over all rows
        gathered), ``dist_remote_rows`` and ``dist_remote_bytes`` (summed),
        ``dist_world_size``. ``compute_s`` is the step's forward, backward
        (with the gradient all-reduce) and optimiser step."""
        mine = {
            **self._last,
            "compute_s": float(throughput.get("compute_s", 0.0)),
            "peak_rss_mb": peak_rss_mb(),
        }
        gathered = all_gather_fields(mine, EPOCH_FIGURES, self.group)
        out: dict[str, float] = {"dist_world_size": float(self.world)}
        for r, figures in enumerate(gathered):
            out.update({f"rank{r}_{k}": float(v) for k, v in figures.items()})
        remote = sum(f["remote_rows"] for f in gathered)
        rows = remote + sum(f["local_rows"] for f in gathered)
        out["dist_remote_rows"] = float(remote)
        out["dist_remote_bytes"] = float(sum(f["remote_bytes"] for f in gathered))
        out["dist_remote_share"] = remote / rows if rows else 0.0
        return out

    def random_state(self) -> tuple[torch.Generator, dict[str, Any]]:
        return self.generator, {"train": self.sampler}

    def rank_report(self) -> dict[str, Any]:
        """What :func:`run_rank` returns about the exchanges: ``store``, the
        feature store's counters."""
        return {"store": self.feature_store.stats.as_dict()}

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """``model`` in :class:`~torch.nn.parallel.DistributedDataParallel`
        (gradients averaged over the ranks in the backward pass)."""
        from torch.nn.parallel import DistributedDataParallel

        if self.device.type == "cuda":
            index = self.device.index
            return DistributedDataParallel(
                model, device_ids=[index], output_device=index, process_group=self.group
            )
        return DistributedDataParallel(model, process_group=self.group)

    def reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` summed over the ranks (a collective), on its own device."""
        return all_reduce_sum(tensor, self.group)

    # Evaluation ------------------------------------------------------------

    def eval_batches(self, split: str) -> DistEvalBatches:
        """``split``'s batches on this rank (``val`` or ``test``), in a fixed order."""
        return DistEvalBatches(self, split)

    # Internals -------------------------------------------------------------

    def _iterate(
        self,
        plan: list[np.ndarray],
        sampler: DistNeighborSampler,
        figures: RankFigures,
    ) -> Iterator[Data]:
        """The batches of ``plan`` (a batch without seeds takes part in the
        exchanges and is not yielded; training plans have none)."""
        for seeds in plan:
            batch = self._batch(seeds, sampler, figures)
            if batch is not None:
                yield batch

    def _batch(
        self, seeds: np.ndarray, sampler: DistNeighborSampler, figures: RankFigures
    ) -> Data | None:
        """One batch (``None`` for no seeds, after taking part in the exchanges)."""
        started = time.perf_counter()
        out = sampler.sample_from_nodes(NodeSamplerInput(None, torch.from_numpy(seeds)))
        sampled = time.perf_counter()
        x, y = self.feature_store.multi_get_tensor(
            [TensorAttr(None, "x", out.node), TensorAttr(None, "y", out.node)]
        )
        figures.sample_s += sampled - started
        figures.exchange_s += time.perf_counter() - sampled
        if not len(seeds):
            return None
        figures.batches += 1
        figures.seeds += len(seeds)
        return sampled_data(out, x=x, y=y, batch_size=len(seeds))


class DistEvalBatches:
    """One split's evaluation batches on this rank: its balanced share, cut into
    as many batches as the rank with the most needs (a round without seeds here
    still serves the peers and yields nothing); the sampler restarts each pass,
    so every evaluation draws the same neighbourhoods."""

    def __init__(self, source: DistBatchSource, split: str) -> None:
        self.source = source
        ids = source.split_ids[split]
        size = source.config.eval_batch_size
        rounds = _max(-(-len(ids) // size), source.group)
        self.plan = [ids[i * size : (i + 1) * size] for i in range(rounds)]
        self.figures = RankFigures()

    def __len__(self) -> int:
        return len(self.plan)

    def __iter__(self) -> Iterator[Data]:
        sampler = self.source.eval_sampler
        sampler._num_batches = 0  # the same draws at every evaluation
        yield from self.source._iterate(self.plan, sampler, self.figures)


# One rank ---------------------------------------------------------------------


@dataclass(frozen=True)
class RankRun:
    """What every rank of :func:`train_distributed` is given (picklable)."""

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


def _split_summary(ids: np.ndarray, group: Any) -> torch.Tensor:
    """``[n_0, crc_0, n_1, crc_1, ...]`` of every rank's owned ids of a split (a
    collective): what the checkpoint fingerprints, the same on every rank."""
    import zlib

    crc = zlib.crc32(np.ascontiguousarray(ids, dtype=np.int64).tobytes())
    return torch.from_numpy(_all_gather_ints([len(ids), crc], group))


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


def _rank_device(config: NodeTrainConfig) -> tuple[NodeTrainConfig, torch.device]:
    """This rank's device: under NCCL the GPU ``LOCAL_RANK`` (else the rank) of
    this machine, set as current; under gloo with a CUDA ``config.device``, GPUs
    shared by the ranks (``cuda:N``: that one; ``cuda``: ``LOCAL_RANK`` modulo
    the GPU count), the collectives going through host memory; else the CPU."""
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


def _rank_logger(run: RankRun) -> Any | None:
    if run.mlflow_run is None or dist.get_rank() != 0:
        return None
    from mlflow import MlflowClient

    from gnncore.tracking.mlflow import MlflowRunLogger

    uri, experiment_id, run_id = run.mlflow_run
    return MlflowRunLogger(MlflowClient(tracking_uri=uri), run_id, experiment_id, uri)


def run_rank(rank: int, world: int, run: RankRun) -> dict[str, Any]:
    """Train this rank of a distributed run (the group is initialised); returns
    plain values: the result fields, the per-rank figures and, on rank 0, the
    best epoch's weights as NumPy arrays. The launcher names the rank that
    failed first (:func:`~gnncore.distributed.launch.blame`)."""
    from gnncore.train.core.checkpoint import CheckpointDir

    if isinstance(run.config, LinkTrainConfig):
        from gnncore.distributed.link_training import run_link_rank

        return run_link_rank(rank, world, run)
    data = RankData.open(run.ranks_dir, rank)
    config, device = _rank_device(run.config)
    source: Any
    if config.mode == "sancus":
        from gnncore.distributed.sancus import SancusSource

        source = SancusSource(data, config, device)
    else:
        source = DistBatchSource(data, config, device)
    checkpoints = (
        CheckpointDir(run.checkpoint_dir, keep=run.keep_checkpoints)
        if run.checkpoint_dir is not None
        else None
    )
    hook = run.on_epoch_end

    def on_epoch_end(epoch: int, path: Path | None) -> None:
        if hook is not None:
            hook(rank, epoch)

    splits = tuple(_split_summary(data.split_ids(s), None) for s in ("train", "val", "test"))
    result = _train_rank(source, data, config, run, checkpoints, on_epoch_end, splits, rank)
    out: dict[str, Any] = {
        "rank": rank,
        "fields": {f.name: getattr(result, f.name) for f in fields(result) if f.name != "model"},
        "train_ids": len(source.split_ids["train"]),
        "owned_train_ids": len(data.split_ids("train")),
        "batches_per_epoch": source.num_batches,
        "peak_rss_mb": peak_rss_mb(),
        **source.rank_report(),
    }
    if rank == 0:
        out["state_dict"] = {
            k: v.detach().cpu().numpy() for k, v in result.model.state_dict().items()
        }
    return out


def _train_rank(
    source: Any,
    data: RankData,
    config: NodeTrainConfig,
    run: RankRun,
    checkpoints: Any,
    on_epoch_end: Callable[[int, Path | None], None],
    splits: tuple[torch.Tensor, ...],
    rank: int,
) -> NodeTrainResult:
    from gnncore.train.node.loop import train_node_classifier

    train, val, test = splits
    return train_node_classifier(
        source.feature_store,
        None,
        train,
        val,
        test,
        data.num_classes,
        config,
        logger=_rank_logger(run),
        progress=run.progress if rank == 0 else False,
        in_channels=data.num_features,
        checkpoints=checkpoints,
        resume=run.resume,
        on_epoch_end=on_epoch_end,
        train_batches=source,
        eval_batches=(source.eval_batches("val"), source.eval_batches("test")),
    )


# The entry point ----------------------------------------------------------------


#: What each rank's report shows of its share in the summaries.
RANK_FIGURES = ("rank", "train_ids", "batches_per_epoch", "peak_rss_mb")


def rank_figures(report: dict[str, Any]) -> dict[str, Any]:
    """A rank's :data:`RANK_FIGURES` out of what :func:`run_rank` returned."""
    return {k: report[k] for k in RANK_FIGURES}


def distributed_summary(
    result: Any, test_metric: Callable[[dict[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    """The distributed part of a machine-0 result's summary: world size, rank
    data and per rank its figures, ``test_metric(fields)`` of its own result,
    its remote-row share and SANCUS counters when it has them."""
    return {
        "world_size": result.world_size,
        "ranks_dir": result.ranks_dir,
        "per_rank": [
            rank_figures(r)
            | test_metric(r["fields"])
            | {"remote_share": r["store"]["remote_share"]}
            | ({"sancus": r["sancus"]} if "sancus" in r else {})
            for r in result.per_rank
        ],
    }


@dataclass(kw_only=True)
class DistNodeTrainResult(NodeTrainResult):
    """:class:`~gnncore.train.NodeTrainResult` of rank 0 (every rank has the same
    reduced metrics), with the world size, the rank-data directory and what each
    rank reported (``train_ids``, ``batches_per_epoch``, ``peak_rss_mb``, its
    feature store's counters and its own copy of the metrics)."""

    world_size: int = 1
    ranks_dir: str = ""
    per_rank: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            **super().summary(),
            **distributed_summary(self, lambda f: {"test_accuracy": f["test_accuracy"]}),
        }


@dataclass
class RanksResult:
    """What a distributed run returns on a machine other than the first
    (``node_rank > 0``): rank 0, its model and the MLflow run live on machine 0;
    here are the reduced metrics (the same on every rank, ``metrics`` of the
    task's subclass) and this machine's ranks' reports."""

    world_size: int
    node_rank: int
    ranks_dir: str
    per_rank: list[dict[str, Any]]
    restarts: int = 0

    def metrics(self, fields: dict[str, Any]) -> dict[str, Any]:
        """The task's reduced metrics out of a rank's result ``fields``."""
        raise NotImplementedError

    def summary(self) -> dict[str, Any]:
        fields = self.per_rank[0]["fields"]
        return {
            "world_size": self.world_size,
            "node_rank": self.node_rank,
            "ranks": [r["rank"] for r in self.per_rank],
            "ranks_dir": self.ranks_dir,
            "restarts": self.restarts,
            "stopped_epoch": fields["stopped_epoch"],
            "best_epoch": fields["best_epoch"],
            **self.metrics(fields),
            "resumed_from_epoch": fields["resumed_from_epoch"],
            "per_rank": [rank_figures(r) for r in self.per_rank],
        }


@dataclass
class DistNodeRanksResult(RanksResult):
    """:class:`RanksResult` of node classification: accuracy and macro-F1."""

    def metrics(self, fields: dict[str, Any]) -> dict[str, Any]:
        return {
            "val_accuracy": fields["best_val_accuracy"],
            "test_accuracy": fields["test_accuracy"],
            "test_macro_f1": fields["test_macro_f1"],
        }


def _check_config(config: NodeTrainConfig) -> None:
    if config.mode in OUT_OF_CORE_MODES:
        raise ConfigError(f"distributed training reads rank data, not mode {config.mode!r}")
    if config.locality_aware or config.hdr_part >= 0:
        raise ConfigError("distributed training samples uniformly (no locality-aware or HDR)")


def default_ranks_dir(partition_dir: str | os.PathLike[str]) -> Path:
    """Where :func:`train_distributed` writes the rank data by default:
    ``<partition_dir>.ranks`` beside the partition directory."""
    part = Path(partition_dir).absolute()
    return part.parent / f"{part.name}.ranks"


#: The launchers of :func:`train_distributed`.
LAUNCHERS = ("torchrun", "spawn")


@dataclass(frozen=True)
class RankTask:
    """What :func:`train_distributed` does differently per task; the launch,
    the restarts and the MLflow run are shared. :data:`NODE_TASK` (node
    classification) is the default; link prediction's is
    :data:`gnncore.distributed.link_training.LINK_TASK`. Each rank runs
    :func:`run_rank`, which picks the task's loop from its config."""

    name: str
    #: ``(config or None, graph) -> config``: validated, refused (``ConfigError``,
    #: ``InputError``) when the ranks cannot train it on ``graph``.
    prepare: Callable[[Any, Any], Any]
    #: ``(graph_dir, partition_dir, out_dir, replication) -> out_dir``: write or reuse.
    write: Callable[[Path, Path, Path, Any], Path]
    #: ``partition_dir -> ranks_dir`` when none is given.
    default_dir: Callable[[Any], Path]
    #: ``(per_rank, config, graph manifest, world, ranks_dir) -> result`` on machine 0.
    main_result: Callable[[list[dict[str, Any]], Any, Any, int, str], Any]
    #: ``(world, node_rank, ranks_dir, per_rank, restarts) -> result`` elsewhere.
    ranks_result: Callable[[int, int, str, list[dict[str, Any]], int], Any]
    #: ``(config, graph, ranks_dir, checkpoint_dir) -> MLflow parameters``.
    run_params: Callable[[Any, Any, Path, Any], dict[str, Any]]
    #: ``(logger, result, graph)``: the curves and the model, at the end.
    log_outcome: Callable[[Any, Any, Any], None]


def _prepare_node(config: NodeTrainConfig | None, graph: Any) -> NodeTrainConfig:
    config = (config or NodeTrainConfig()).validate()
    _check_config(config)
    for name in ("features", "labels"):
        if not graph.has(name):
            raise InputError(f"node classification needs {name}; the graph has none", graph.path)
    return config


def _write_node(graph_dir: Path, partition_dir: Path, out: Path, replication: Any) -> Path:
    from gnncore.distributed.rank_write import write_rank_data

    return write_rank_data(graph_dir, partition_dir, out, replication=replication)


def _node_params(
    config: NodeTrainConfig, graph: Any, ranks_dir: Path, checkpoint_dir: Any
) -> dict[str, Any]:
    from gnncore.train.record import node_run_params

    return node_run_params(config, graph.manifest, checkpoint_dir)


def _log_node_outcome(logger: Any, result: Any, graph: Any) -> None:
    from gnncore.store import GraphDirFeatureStore
    from gnncore.train.record import example_input, log_outcome, training_curves

    features = GraphDirFeatureStore(graph)
    example = example_input(features, graph.manifest.num_features)
    log_outcome(logger, result, training_curves(result), example, graph)


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


def train_distributed(
    graph_dir: str | os.PathLike[str],
    partition_dir: str | os.PathLike[str],
    config: NodeTrainConfig | LinkTrainConfig | None = None,
    nproc: int | None = None,
    *,
    ranks_dir: str | os.PathLike[str] | None = None,
    replication: str | os.PathLike[str] | None = None,
    tracking: Any | None = None,
    tags: Mapping[str, Any] | None = None,
    run_name: str | None = None,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    resume: bool = False,
    keep_checkpoints: int = 2,
    progress: Progress = False,
    backend: str | None = None,
    timeout: float = 120.0,
    run_timeout: float = 24 * 3600.0,
    on_epoch_end: RankEpochHook | None = None,
    launch: Launch | None = None,
    task: RankTask | None = None,
) -> Any:
    r"""Train a node classifier with one rank per partition (another task with
    ``task``: :func:`~gnncore.distributed.link_training.train_distributed_link`).

    Writes the per-rank data of ``graph_dir`` split by ``partition_dir`` into
    ``ranks_dir`` (default :func:`default_ranks_dir`; reused when it is already
    there and current), then runs :func:`run_rank` in this machine's ``nproc``
    ranks, started as ``launch`` says (:class:`Launch`; by default torch's
    elastic launcher on 127.0.0.1, gloo, or NCCL when ``backend="nccl"``, one
    GPU per rank).

    With ``replication`` (an HDR plan of the graph, as many parts) every rank
    folder also holds the plan's replicated nodes' rows, and the feature store
    serves them locally (``dist_remote_rows`` falls accordingly).

    Several machines (``launch.nnodes > 1``): each runs this call with its
    ``node_rank``; machine ``i`` runs ranks ``i * nproc ..``. Machine 0 writes
    the rank data when it is missing or stale; the others never write it and
    need it already there (the folders of their own ranks, on a shared file
    system or copied; ``gnncore ranks`` writes it).

    With ``tracking`` (an :class:`~gnncore.tracking.MlflowTracker`; machine 0
    only, ignored elsewhere) this process opens the run and logs its parameters
    (the config, the dataset, the world size and partitioner); rank 0 logs the
    epochs into it; this process then logs the curves and the model. The run
    ends ``FINISHED``, or ``FAILED`` when a rank fails for the last time (the
    :class:`~gnncore.distributed.launch.RankFailed` propagates). Checkpoints
    (``checkpoint_dir``) are written by rank 0 and read by every rank with
    ``resume`` and after a restart; they need a directory every rank can read.

    Args:
        nproc: Ranks on this machine; by default the partition's part count
            over ``launch.nnodes``.
        backend: ``"gloo"`` or ``"nccl"`` (default: NCCL for a CUDA
            ``config.device``, else gloo). gloo with a CUDA device trains on GPUs
            shared by the ranks (several ranks on one GPU), the collectives through
            host memory.
        timeout: Seconds a collective may wait for its peers.
        run_timeout: Seconds a rank may run.
        progress: Rank 0's progress: tqdm bars (``True``), nothing (``False``),
            or ``progress(line)`` once per epoch; a callable is pickled to the
            rank, so it must be picklable (:class:`~gnncore.progress.LineFile`
            writes the lines to a file another process can follow).
        on_epoch_end: ``f(rank, epoch)`` in every rank after each epoch
            (picklable: a module-level function).
        launch: How to start the ranks (:class:`Launch`).
        task: What the ranks train (:class:`RankTask`; default node
            classification, :data:`NODE_TASK`).

    Returns:
        :class:`DistNodeTrainResult` on machine 0, :class:`DistNodeRanksResult`
        on the others.

    Raises:
        ConfigError: Settings distributed training does not support, or a
            world size other than the partition count.
        RankFailed: A rank raised, died, was refused at rendezvous (join token)
            or the run ran out of time, after the last restart; the message
            names the rank.
        InputError: A bad join token file (``launch.join_token_file``).
        TokenError: No join token on a machine other than 0.
    """
    from gnncore.distributed.join import launch_token
    from gnncore.distributed.launch import RankFailed
    from gnncore.partition.store import PartitionDir
    from gnncore.store import GraphDir

    task = task or NODE_TASK
    launch = (launch or Launch()).check()
    # Once for every attempt: the other machines keep the token they were given.
    token = launch_token(launch.nnodes, launch.node_rank, launch.join_token_file)
    graph = GraphDir.open(graph_dir)
    config = task.prepare(config, graph)
    partition = PartitionDir.open(partition_dir, graph)
    local = partition.parts // launch.nnodes if nproc is None else int(nproc)
    world = local * launch.nnodes
    if world != partition.parts:
        raise ConfigError(
            f"--nproc {local} x --nnodes {launch.nnodes}: the partition {partition.path} has "
            f"{partition.parts} parts; one rank trains each partition"
        )
    backend = _check_backend(backend, config.device, local)
    if launch.max_restarts and checkpoint_dir is None:
        raise ConfigError("--max-restarts resumes from checkpoints: give a checkpoint directory")
    m = graph.manifest
    target = Path(ranks_dir or task.default_dir(partition_dir)).absolute()
    if launch.node_rank == 0:
        out = task.write(graph.path, partition.path, target, replication)
    else:
        out = target
        if not (out / "manifest.json").is_file():
            raise InputError(
                "machine "
                f"{launch.node_rank} writes no rank data: copy or share the rank folders "
                "written on machine 0 (or by gnncore ranks) to this path",
                out,
            )
    restarts = 0
    from gnncore.train.core.checkpoint import CheckpointDir

    # A fresh run keeps the checkpoints it finds (a previous run's) until it writes
    # its first: a restart resumes only once an attempt of this run has written one.
    store = None if checkpoint_dir is None else CheckpointDir(checkpoint_dir)
    found = frozenset() if store is None else store.identity()

    def attempt(mlflow_run: tuple[str, str, str] | None, again: bool) -> dict[int, Any]:
        wrote = store is not None and store.identity() != found
        run = RankRun(
            str(out),
            config,
            None if checkpoint_dir is None else str(checkpoint_dir),
            keep_checkpoints,
            resume or (again and wrote),
            progress,
            mlflow_run,
            on_epoch_end,
        )
        if launch.launcher == "spawn":
            ranks = spawn_local_ranks(run, world, backend, timeout, run_timeout, token)
            return dict(enumerate(ranks))
        from gnncore.distributed.launch import elastic_run

        return elastic_run(
            run_rank,
            local,
            (run,),
            nnodes=launch.nnodes,
            node_rank=launch.node_rank,
            master_addr=launch.master_addr,
            master_port=launch.master_port,
            backend=backend,
            timeout=timeout,
            run_timeout=run_timeout,
            join_timeout=launch.join_timeout,
            join_token=token,
        )

    def run_all(mlflow_run: tuple[str, str, str] | None) -> Any:
        nonlocal restarts
        while True:
            try:
                ranks = attempt(mlflow_run, restarts > 0)
                break
            except RankFailed as err:
                if restarts >= launch.max_restarts:
                    raise
                restarts += 1
                print(
                    f"gnncore: restart {restarts} of {launch.max_restarts} after: "
                    f"{str(err).splitlines()[0]}",
                    file=sys.stderr,
                    flush=True,
                )
        per_rank = [ranks[r] for r in sorted(ranks)]
        if launch.node_rank > 0:
            return task.ranks_result(world, launch.node_rank, str(out), per_rank, restarts)
        return task.main_result(per_rank, config, m, world, str(out))

    if tracking is None or launch.node_rank > 0:
        return run_all(None)

    from gnncore.train.record import tracked_run

    previous = (
        CheckpointDir(checkpoint_dir).latest() if resume and checkpoint_dir is not None else None
    )
    with tracked_run(tracking, m.name, task.name, config.model, tags, run_name, previous) as logger:
        logger.log_params(
            {
                **task.run_params(config, graph, out, checkpoint_dir),
                "world_size": world,
                "backend": backend,
                "partitioner": partition.method,
                "partition_dir": str(partition.path),
                "ranks_dir": str(out),
                "launcher": launch.launcher,
                "nnodes": launch.nnodes,
                "max_restarts": launch.max_restarts,
            }
        )
        try:
            result = run_all((logger.tracking_uri, logger.experiment_id, logger.run_id))
        finally:
            tracking.client.set_tag(logger.run_id, "restarts", str(restarts))
        task.log_outcome(logger, result, graph)
    return result


def spawn_local_ranks(
    run: RankRun,
    world: int,
    backend: str,
    timeout: float,
    run_timeout: float,
    join_token: str | None = None,
) -> list[dict[str, Any]]:
    """:func:`run_rank` on ``world`` ranks spawned on this machine."""
    from gnncore.distributed.launch import spawn_local

    return spawn_local(
        run_rank,
        world,
        (run,),
        backend=backend,
        timeout=timeout,
        run_timeout=run_timeout,
        join_token=join_token,
    )


def _main_result(
    ranks: list[dict[str, Any]], config: NodeTrainConfig, m: Any, world: int, ranks_dir: str
) -> DistNodeTrainResult:
    """Machine 0's result: rank 0's metrics and best weights."""
    from gnncore.train.core.models import build_model

    main = ranks[0]
    model = build_model(
        config.model,
        m.num_features,
        config.hidden,
        m.num_classes,
        config.num_layers,
        config.dropout,
        heads=config.heads,
    )
    model.load_state_dict({k: torch.from_numpy(v) for k, v in main["state_dict"].items()})
    for r in ranks:
        r.pop("state_dict", None)
    return DistNodeTrainResult(
        model=model.eval(),
        **main["fields"],
        world_size=world,
        ranks_dir=ranks_dir,
        per_rank=ranks,
    )


#: Node classification (:func:`train_distributed`'s default task).
NODE_TASK = RankTask(
    name="node",
    prepare=_prepare_node,
    write=_write_node,
    default_dir=default_ranks_dir,
    main_result=_main_result,
    ranks_result=DistNodeRanksResult,
    run_params=_node_params,
    log_outcome=_log_node_outcome,
)


__all__ = [
    "DistBatchSource",
    "DistEvalBatches",
    "DistNodeRanksResult",
    "DistNodeTrainResult",
    "LAUNCHERS",
    "Launch",
    "NODE_TASK",
    "RANK_FIGURES",
    "RankTask",
    "RankRun",
    "RanksResult",
    "balance_ids",
    "balance_rows",
    "default_ranks_dir",
    "distributed_summary",
    "rank_figures",
    "run_rank",
    "split_batches",
    "train_distributed",
    "transfer_plan",
]
