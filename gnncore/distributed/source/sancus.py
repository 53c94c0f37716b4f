r"""The ``sancus`` mode's batch source: one rank's full-graph batches.

:class:`SancusSource` is the batch source of the shared training loop
(:func:`~gnncore.train.fit` of a :class:`~gnncore.train.NodeTask`) for ``--mode sancus``: one
training batch per epoch (the whole core of the rank), one evaluation batch
per split, the halo rows exchanged layer by layer under a staleness bound by
:class:`~gnncore.distributed.sancus.HaloExchange` inside
:class:`~gnncore.distributed.sancus.SancusGCN` (the exchanges, the model and
the algorithm are described in :mod:`gnncore.distributed.sancus`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import asdict, fields
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch_geometric.data import Data

from gnncore.distributed.collectives import all_gather_fields, all_reduce_sum
from gnncore.distributed.rank_data import RankData
from gnncore.distributed.sancus import (
    HaloExchange,
    SancusCounters,
    SancusGCN,
    build_halo_plan,
)
from gnncore.store.feature_store import TensorFeatureStore
from gnncore.train.core.steps import normalize_rows
from gnncore.train.node.config import ConfigError, NodeTrainConfig
from gnncore.train.node.staleness import Staleness

#: What each rank sends of its epoch in :meth:`SancusSource.adapt`, in this
#: order (one float64 row per rank): the training pass's :class:`SancusCounters`
#: (all but ``eval_bytes``), then the step's ``compute_s``.
EPOCH_FIGURES = tuple(f.name for f in fields(SancusCounters) if f.name != "eval_bytes") + (
    "compute_s",
)


class SancusSource:
    """One rank's full-graph batches for the shared training loop (see the module
    docstring): one training batch per epoch, one evaluation batch per split.

    Args:
        data (RankData): This rank's data (features, labels and masks needed).
        config (NodeTrainConfig): ``model`` (``gcn``), ``staleness``,
            ``staleness_bound``, ``normalize_features`` and ``seed`` are read.
        device (torch.device): The training device.
        group (ProcessGroup, optional): The group of the exchanges (default: the
            default group); the gradient all-reduce gets a group of its own.
    """

    num_batches = 1

    def __init__(
        self, data: RankData, config: NodeTrainConfig, device: torch.device, group: Any = None
    ) -> None:
        if config.model != "gcn":
            raise ConfigError(f"mode 'sancus' trains model 'gcn', not {config.model!r}")
        if not (data.has("features") and data.has("labels")):
            raise ConfigError(f"{data.dir}: full-graph training needs features and labels")
        if data.num_core == 0:
            raise ConfigError(f"{data.dir}: partition {data.rank} owns no nodes")
        self.data, self.config, self.device, self.group = data, config, device, group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        self.main_process = self.rank == 0
        self.staleness = Staleness.of(config.staleness, config.staleness_bound)
        backend = dist.get_backend(group)
        ranks = dist.get_process_group_ranks(group) if group is not None else None
        #: DDP's gradient all-reduce runs here, apart from the halo exchanges.
        self.grad_group = dist.new_group(ranks, backend=backend)
        features = torch.from_numpy(np.array(data.array("features")))
        self.plan = build_halo_plan(data, features, group)
        halo_x = self.plan.halo_x
        if config.normalize_features:  # the loop normalises the core rows itself
            halo_x = normalize_rows(halo_x)
        self.halo_x = halo_x.to(device)
        labels = torch.from_numpy(np.array(data.array("labels"), dtype=np.int64))
        self.x, self.y = features, labels
        self.feature_store = TensorFeatureStore({"x": features, "y": labels})
        self.split_rows = {
            s: torch.from_numpy(np.flatnonzero(np.asarray(data.array(f"{s}_mask"))))
            for s in ("train", "val", "test")
        }
        #: Global ids of the splits' rows (what the checkpoint fingerprints).
        self.split_ids = {s: r.numpy() + data.core_range[0] for s, r in self.split_rows.items()}
        counts = torch.tensor([len(self.split_rows["train"])], dtype=torch.int64)
        total = int(all_reduce_sum(counts, group).item())
        if total == 0:
            raise ConfigError("the graph has no training nodes")
        mine = len(self.split_rows["train"])
        #: The loss is the mean over this rank's training nodes; DDP averages the
        #: ranks' gradients: scaling by ``W n_r / T`` makes it the global mean's.
        self.grad_scale = self.world * mine / total
        self.halo_exchange = HaloExchange(self.plan, self.staleness, device, group)
        self.generator = torch.Generator().manual_seed(config.seed)
        self._module: SancusGCN | None = None
        self._at_start = SancusCounters()
        self._last: dict[str, float] = {}

    # The loop's hooks ------------------------------------------------------

    def __len__(self) -> int:
        return 1

    def start_epoch(self, epoch: int) -> None:
        self.halo_exchange.epoch = epoch
        self._at_start = SancusCounters(**asdict(self.halo_exchange.counters))

    def batches(self) -> contextlib.AbstractContextManager[Iterator[Any]]:
        rows = self.split_rows["train"]
        scale = self.grad_scale
        if not len(rows):  # no training node here: take part, add nothing
            rows, scale = torch.zeros(1, dtype=torch.int64), 0.0
        return contextlib.nullcontext(iter([self._batch(rows, scale)]))

    def end_epoch(self, epoch: int) -> None:
        now, then = self.halo_exchange.counters.as_dict(), self._at_start.as_dict()
        self._last = {k: now[k] - then[k] for k in now if k != "eval_bytes"}

    def adapt(self, epoch: int, throughput: dict[str, float]) -> dict[str, float]:
        """Every rank's figures of the epoch's training pass (a collective), as
        ``rank<r>_<name>`` (:class:`SancusCounters`, ``compute_s``), and the totals
        ``dist_broadcast_bytes``, ``dist_always_bytes``, ``dist_broadcast_saving``
        (``1 - broadcast / always``), ``dist_skips``, ``dist_sends``,
        ``dist_grad_bytes`` and ``dist_world_size``."""
        mine = {**self._last, "compute_s": float(throughput.get("compute_s", 0.0))}
        gathered = all_gather_fields(mine, EPOCH_FIGURES, self.group)
        out: dict[str, float] = {"dist_world_size": float(self.world)}
        for r, figures in enumerate(gathered):
            out.update({f"rank{r}_{k}": float(v) for k, v in figures.items()})
        for name in ("broadcast_bytes", "always_bytes", "skips", "sends", "grad_bytes"):
            out[f"dist_{name}"] = float(sum(f[name] for f in gathered))
        always = out["dist_always_bytes"]
        out["dist_broadcast_saving"] = 1 - out["dist_broadcast_bytes"] / always if always else 0.0
        return out

    def random_state(self) -> tuple[torch.Generator, dict[str, Any]]:
        return self.generator, {}

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """:class:`SancusGCN` over ``model`` in
        :class:`~torch.nn.parallel.DistributedDataParallel` on the gradient group."""
        module = self._sancus(model)
        if self.device.type == "cuda":
            index = self.device.index
            return DistributedDataParallel(
                module, device_ids=[index], output_device=index, process_group=self.grad_group
            )
        return DistributedDataParallel(module, process_group=self.grad_group)

    def eval_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """:class:`SancusGCN` over ``model``: evaluation reads the distributed rows."""
        return self._sancus(model)

    def reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` summed over the ranks (a collective), on its own device."""
        return all_reduce_sum(tensor, self.group)

    def eval_batches(self, split: str) -> SancusEvalBatches:
        """``split``'s evaluation batch (``val`` or ``test``): one full forward pass."""
        return SancusEvalBatches(self, split)

    # Internals -------------------------------------------------------------

    def _sancus(self, model: torch.nn.Module) -> SancusGCN:
        if self._module is None or self._module.gcn is not model:
            self._module = SancusGCN(model, self.plan, self.halo_exchange, self.halo_x)
            self._module.adjacency = self.plan.adjacency.to(self.device)
        return self._module

    def _batch(self, rows: torch.Tensor, scale: float) -> Data:
        if self._module is None:
            raise RuntimeError("SancusSource: the loop has not wrapped the model yet")
        self._module.rows = rows.to(self.device)
        self._module.grad_scale = scale
        return Data(
            x=self.x,
            y=self.y[rows],
            edge_index=torch.empty((2, 0), dtype=torch.int64),
            batch_size=len(rows),
            num_sampled_nodes=[],  # no hops: the loop trims nothing
            num_sampled_edges=[],
        )

    def rank_report(self) -> dict[str, Any]:
        """What :func:`~gnncore.distributed.rank.run_node_rank` returns about the
        exchanges: ``store`` (``remote_share``: the share of the rows each layer
        reads that are halo rows) and ``sancus`` (the run's
        :class:`SancusCounters`, ``setup_bytes``, halo and core sizes)."""
        n, m = self.plan.num_core, len(self.plan.halo_ids)
        return {
            "store": {"remote_share": m / (n + m) if n + m else 0.0, "remote_rows": float(m)},
            "sancus": {
                **self.halo_exchange.counters.as_dict(),
                "setup_bytes": float(self.plan.setup_bytes),
                "halo_rows": float(m),
                "core_rows": float(n),
                "staleness": self.staleness.policy,
                "staleness_bound": self.staleness.bound,
            },
        }


class SancusEvalBatches:
    """One split's evaluation on this rank: a single batch, the full forward pass
    (every rank takes part, with or without nodes of the split)."""

    def __init__(self, source: SancusSource, split: str) -> None:
        self.source = source
        self.rows = source.split_rows[split]

    def __len__(self) -> int:
        return 1

    def __iter__(self) -> Iterator[Data]:
        yield self.source._batch(self.rows, 1.0)


__all__ = ["EPOCH_FIGURES", "SancusEvalBatches", "SancusSource"]
