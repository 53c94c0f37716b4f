r"""Exact evaluation (every neighbour) of node classification, layer by layer.

Sampled evaluation with all neighbours (``eval_fanouts`` unset) gathers each
batch's whole ``L``-hop in-neighbourhood and computes it again for every
batch that reaches it: on a graph of average in-degree ``d`` a batch of ``B``
seeds costs about ``B (d + d^2 + ... + d^L)`` messages, and the evaluation
sets' batches together recompute most nodes many times over. Layer-wise
inference (:mod:`gnncore.train.core.layerwise`, what ``gnncore predict``
runs) computes layer ``l`` once for every node the last layer's outputs
depend on (:func:`~gnncore.train.core.layerwise.rows_per_layer`: the
evaluation nodes for the last layer, those and their in-neighbours for the
one before, and so on), with the same per-layer arithmetic, so SAGE, GAT and
GIN give the same logits (float tolerance; the same predictions).

GCN is the exception: layer-wise GCN normalises each edge ``j -> i`` with both
nodes' full-graph in-degrees (exact GCN, what ``gnncore predict`` computes),
while a sampled subgraph gives its outermost hop's nodes a degree of 1 (only
the self-loop). The accuracies differ a little (both ways are "exact" only
up to that); the layer-wise figure is the one ``gnncore predict``'s output
has.

:func:`choose` prices both ways in rows plus messages (one unit per node row a
layer computes and per edge it aggregates): layer-wise, exactly from
``rows_per_layer``; sampled, from up to :data:`SAMPLE_BATCHES` of the
evaluation loader's own batches (consecutive ``eval_batch_size`` slices of
the split), expanded hop by hop as the sampler expands them (a node once per
batch), scaled to all batches. Layer-wise is used when it costs no more.
Its hidden rows (one ``[N, hidden]`` float32 array per held layer) stay in
memory when they fit in half of the room the training's memory budget leaves
(:func:`evaluation_room`: ``config.memory_budget``, the whole process's budget
that ``gnncore train --memory-budget`` or the Dagster ``memory`` resource gave
training, less what the process holds when the evaluation is set up and a
margin; without a budget the memory available,
:func:`gnncore.memory.memory_available`); otherwise each hidden layer goes to
a ``.npy`` file in a scratch directory (``$TMPDIR``,
:func:`gnncore.store.scratch.scratch`), removed when the evaluation ends and
reclaimed by the next run if the process is killed, so the
evaluation holds one batch and not ``N x hidden``
(:mod:`gnncore.train.core.layerstore`).

With an evaluation order (:class:`~gnncore.train.core.evalorder.EvaluationOrder`:
an out-of-core run's partitioned store, handed to the task by
:mod:`gnncore.modes.node_data`) the layer-wise evaluation reads the graph as
``gnncore predict --store`` does, for the rows the evaluation needs
(``rows_per_layer``, in the store's numbering), part by part; a part's input
rows (features, then the hidden layer) read once, sequentially, the sources
of the needed rows' cut edges in sorted, coalesced reads (``O_DIRECT`` where
training reads so), at most a quarter of the evaluation's room holding them;
where a layer narrows it projects before aggregating, from one pass over its
input in node order (:mod:`gnncore.train.core.projected`: the products in
half the room, or on disk, read once per group of targets). The metrics are the graph order's
(float tolerance); on a graph whose features exceed the memory,
memory-mapped reads of scattered rows made the page cache reread the
feature file many times over.

Validation and test, when both are layer-wise, are one evaluation
(:meth:`LayerwiseEvaluation.joined`: each layer's rows the union of both
splits'), measured once per epoch: the inner layers are computed for nearly
every node either way. :class:`KeptTest` keeps the test metrics of the epoch
whose weights the run restores before measuring the test (the best
validation epoch), so the test needs no pass of its own.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import FeatureStore
from torch_geometric.nn import GATConv, GCNConv, GINConv, SAGEConv
from torch_geometric.nn.models.basic_gnn import BasicGNN

from gnncore.memory import memory_available
from gnncore.sizes import format_size
from gnncore.store.scratch import scratch, scratch_dir
from gnncore.train.core.evalorder import EvaluationOrder
from gnncore.train.core.layerwise import (
    Adjacency,
    in_edge_entries,
    in_edges,
    layerwise_inference,
    layerwise_subset,
    rows_per_layer,
)
from gnncore.train.core.models import supports_trimming
from gnncore.train.core.projected import projection_hook
from gnncore.train.core.steps import normalize_rows
from gnncore.train.node.metrics import ClassificationMetrics, confusion_matrix
from gnncore.usage import StageBudget

LOG = logging.getLogger(__name__)

#: Batches of the sampled evaluation's loader whose neighbourhoods are counted.
SAMPLE_BATCHES = 8
#: Target nodes per layer-wise batch, at least (``eval_batch_size`` when larger).
MIN_BATCH_SIZE = 4096


@dataclass(frozen=True)
class EvaluationCost:
    """Both ways of one evaluation set, in rows plus messages, and the bytes of
    the layer-wise way's hidden rows against the memory it may take (``memory``,
    from ``source``: :func:`evaluation_room`)."""

    layerwise: int
    sampled: int
    layer_bytes: int
    memory: int | None
    source: str = "the memory available"
    #: The whole process's budget the room came from (``None``: none set).
    budget: int | None = None

    def room_now(self) -> int | None:
        """The room measured again (a pass starts after the setup that measured
        :attr:`memory`, with other arrays held): what :attr:`budget` leaves
        beside what the process holds now, at least :data:`MIN_EVALUATION_ROOM`;
        :attr:`memory` without a budget."""
        if self.budget is None:
            return self.memory
        return max(StageBudget.start(self.budget, held=True).data_bytes or 0, MIN_EVALUATION_ROOM)

    @property
    def fits(self) -> bool:
        return self.memory is None or self.layer_bytes <= self.memory // 2

    @property
    def use_layerwise(self) -> bool:
        """Layer-wise when it costs no more than sampling."""
        return self.layerwise <= self.sampled

    @property
    def spill(self) -> bool:
        """Whether the hidden layers go to disk (they do not fit)."""
        return not self.fits

    def describe(self) -> str:
        """The way chosen and why, in one line (the run's JSON and its log)."""
        costs = f"cost layer-wise {self.layerwise:,}, sampled ~{self.sampled:,} rows+messages"
        if not self.use_layerwise:
            return f"sampled: cheaper ({costs})"
        if self.spill:
            half = format_size((self.memory or 0) // 2)
            return (
                f"layer-wise, hidden layers on disk: {format_size(self.layer_bytes)} exceed "
                f"half of {self.source} ({half}); {costs}"
            )
        return f"layer-wise ({costs})"


def supports_layerwise(model: torch.nn.Module) -> bool:
    """Whether layer-wise inference computes ``model`` (a :class:`BasicGNN` of
    SAGE, GAT, GIN or default GCN layers, without jumping knowledge)."""
    if not isinstance(model, BasicGNN) or model.jk_mode is not None:
        return False
    for conv in model.convs:
        if isinstance(conv, GCNConv):
            if conv.improved or not conv.add_self_loops or not conv.normalize:
                return False
        elif not isinstance(conv, (SAGEConv, GATConv, GINConv)):
            return False
    return True


def _in_neighbours(indptr: np.ndarray, indices: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    entries, _ = in_edge_entries(indptr, nodes)
    return np.asarray(indices[entries], dtype=np.int64)


def sampled_batch_cost(
    adjacency: Adjacency,
    seeds: np.ndarray,
    num_layers: int,
    trimmed: bool,
    limit: int | None = None,
) -> int:
    """Rows plus messages of one sampled batch with all neighbours: hop ``k``
    expands the nodes first reached at hop ``k - 1`` (each node once per
    batch); layer ``l`` of a trimmed model computes the nodes of hops
    ``< L - l`` from the edges of hops ``<= L - l``, an untrimmed one (GCN)
    every node from every edge. With ``limit``, the count stops once the
    nodes and edges reached so far (each counted at least once in the cost)
    exceed it, and that partial count is returned (a hop's edges are counted
    from ``indptr`` before its sources are read): on a large, well-connected
    graph two hops of a batch reach most of it, and their exact count (a sort
    of every source: 13.5M of them, about 25 s and 1 GB a batch on 386M
    edges) ran a 2 GiB training process out of memory before it trained."""
    indptr = np.asarray(adjacency.indptr, dtype=np.int64)
    seen = np.unique(seeds)
    frontier = seen
    nodes, edges = [len(seen)], []
    for _ in range(num_layers):
        edges.append(int((indptr[frontier + 1] - indptr[frontier]).sum()))
        if limit is not None and sum(nodes) + sum(edges) > limit:
            return sum(nodes) + sum(edges)  # before the hop's sources are gathered
        sources = _in_neighbours(indptr, adjacency.indices, frontier)
        frontier = np.setdiff1d(np.unique(sources), seen, assume_unique=True)
        seen = np.union1d(seen, frontier)
        nodes.append(len(frontier))
    if not trimmed:
        return num_layers * (sum(nodes) + sum(edges))
    return sum(
        sum(nodes[: num_layers - layer]) + sum(edges[: num_layers - layer])
        for layer in range(num_layers)
    )


def sampled_cost(
    adjacency: Adjacency,
    split: torch.Tensor,
    num_layers: int,
    batch_size: int,
    trimmed: bool,
    limit: int | None = None,
) -> int:
    """Rows plus messages of the sampled evaluation of ``split`` (in batches of
    ``batch_size`` in the split's order), estimated from up to
    :data:`SAMPLE_BATCHES` evenly spaced batches. With ``limit`` the count
    stops as soon as the estimate is sure to exceed it (the batches counted
    so far already cost more than the limit's share of all the picked ones,
    whatever the others cost); the partial estimate, above ``limit``, is
    returned."""
    count = -(-len(split) // batch_size)
    if count == 0:
        return 0
    picked = np.unique(np.linspace(0, count - 1, min(count, SAMPLE_BATCHES)).astype(np.int64))
    index = split.numpy()
    share = None if limit is None else limit * len(picked) // count
    total = 0
    for b in picked:
        left = None if share is None else share - total
        total += sampled_batch_cost(
            adjacency, index[b * batch_size : (b + 1) * batch_size], num_layers, trimmed, left
        )
        if share is not None and total > share:
            break
    return int(total / len(picked) * count)


def union_ids(a: torch.Tensor, b: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """The ascending union of node ids ``a`` and ``b`` (each ascending, unique)
    through a mask of ``num_nodes`` bytes: ``torch.unique`` of their
    concatenation sorted 17M ids on the showcase's 8.5M nodes and took 0.6 GB
    beside the first mega-batch."""
    mask = np.zeros(num_nodes, dtype=bool)
    mask[a.numpy()] = True
    mask[b.numpy()] = True
    return torch.from_numpy(np.flatnonzero(mask))


class LayerwiseEvaluation:
    """The exact evaluation of one split, or of several in one pass, through
    layer-wise inference: the rows each layer computes (:func:`rows_per_layer`
    of the splits' nodes together) and the cost that chose it.

    With an ``order`` (:class:`~gnncore.train.core.evalorder.EvaluationOrder`,
    a partitioned store's numbering) each layer runs for its rows in that
    order, part by part (:func:`~gnncore.train.core.layerwise.layerwise_inference`
    with its bounds: a part's input rows read once, sequentially, the sources
    of cut edges in sorted coalesced reads, at most a quarter of the
    evaluation's room held for them), as ``gnncore predict --store`` computes;
    the in-neighbour lists in that order are written once, to a scratch
    directory removed by :meth:`close`. ``passes`` counts the passes over the
    graph (calls of :meth:`measure`)."""

    def __init__(
        self,
        adjacency: Adjacency,
        split: torch.Tensor | dict[str, torch.Tensor],
        rows: list[torch.Tensor],
        batch_size: int,
        cost: EvaluationCost,
        order: EvaluationOrder | None = None,
    ) -> None:
        self.splits = split if isinstance(split, dict) else {"split": split}
        self.split = next(iter(self.splits.values()))
        self.adjacency, self.rows, self.batch_size = adjacency, rows, batch_size
        self.cost, self.order = cost, order
        self.passes = 0
        self._ordered: Adjacency | None = None
        self._scratch: str | None = None

    @property
    def way(self) -> str:
        """How it reads the graph, for the run's record."""
        if self.order is None:
            return ""
        return f"; in the {self.order.name}'s order, part by part"

    @torch.no_grad()
    def __call__(
        self,
        model: BasicGNN,
        feature_store: FeatureStore,
        device: torch.device,
        *,
        normalize_features: bool = False,
        amp_dtype: torch.dtype | None = None,
    ) -> ClassificationMetrics:
        """Accuracy and macro-F1 of ``model`` on the (first) split, as
        :func:`~gnncore.train.node.loop.evaluate` computes them (features
        normalised the same way, autocast with ``amp_dtype``)."""
        metrics = self.measure(
            model,
            feature_store,
            device,
            normalize_features=normalize_features,
            amp_dtype=amp_dtype,
        )
        return next(iter(metrics.values()))

    @torch.no_grad()
    def measure(
        self,
        model: BasicGNN,
        feature_store: FeatureStore,
        device: torch.device,
        *,
        normalize_features: bool = False,
        amp_dtype: torch.dtype | None = None,
    ) -> dict[str, ClassificationMetrics]:
        """Every split's metrics (by name) from one layer-wise pass."""
        model.eval()
        self.passes += 1
        started = time.perf_counter()

        def inputs(n_id: torch.Tensor) -> torch.Tensor:
            x = feature_store.get_tensor(group_name=None, attr_name="x", index=n_id)
            if normalize_features:
                x = normalize_rows(x)
            return x

        order = self.order
        if order is not None and normalize_features:
            order = order.normalized()
        with contextlib.ExitStack() as stack:
            layer_dir = None
            if self.cost.spill:
                layer_dir = stack.enter_context(scratch("gnncore-eval-layers-"))
            if order is None:
                predicted, width = self._predict(model, inputs, device, amp_dtype, layer_dir)
            else:
                predicted, width = self._predict_ordered(model, order, device, amp_dtype, layer_dir)
        metrics = {
            name: self._metrics(feature_store, split, predicted(split), width)
            for name, split in self.splits.items()
        }
        LOG.info(
            "layer-wise evaluation pass %d (%s)%s: %.1f s",
            self.passes,
            ", ".join(self.splits),
            self.way,
            time.perf_counter() - started,
        )
        return metrics

    @staticmethod
    def _metrics(
        feature_store: FeatureStore, split: torch.Tensor, pred: torch.Tensor, width: int
    ) -> ClassificationMetrics:
        if len(split) == 0:
            return ClassificationMetrics(0.0, 0.0, 0)
        labels = feature_store.get_tensor(group_name=None, attr_name="y", index=split)
        return ClassificationMetrics.from_confusion(confusion_matrix(pred, labels, width))

    def _predict(
        self,
        model: BasicGNN,
        inputs: Callable[[torch.Tensor], torch.Tensor],
        device: torch.device,
        amp_dtype: torch.dtype | None,
        layer_dir: Path | None,
    ) -> tuple[Callable[[torch.Tensor], torch.Tensor], int]:
        """``(predicted, classes)``: ``predicted(nodes)`` gives the predicted
        classes of the graph's nodes ``nodes`` (ascending, among the last
        layer's rows), computed in the graph's order for the rows needed."""
        targets = self.rows[-1]
        predicted = torch.empty(len(targets), dtype=torch.long)
        width = 0
        for nodes, out in layerwise_subset(
            model,
            self.adjacency,
            inputs,
            self.rows,
            batch_size=self.batch_size,
            device=device,
            amp_dtype=amp_dtype,
            layer_dir=layer_dir,
        ):
            start = int(torch.searchsorted(targets, nodes[:1]))
            predicted[start : start + len(nodes)] = out.argmax(dim=-1).cpu()
            width = out.size(-1)
        return lambda split: predicted[torch.searchsorted(targets, split)], width

    def _predict_ordered(
        self,
        model: BasicGNN,
        order: EvaluationOrder,
        device: torch.device,
        amp_dtype: torch.dtype | None,
        layer_dir: Path | None,
    ) -> tuple[Callable[[torch.Tensor], torch.Tensor], int]:
        """:meth:`_predict` in ``order``'s numbering: each layer's rows in new ids,
        part by part."""
        adjacency = self._order_adjacency(order)
        rows = [torch.sort(order.new_ids(r)).values for r in self.rows]
        targets = rows[-1]
        predicted = torch.zeros(len(targets), dtype=torch.long)
        width = 0
        memory = self.cost.room_now()  # with the ordered adjacency and rows held
        LOG.info("layer-wise pass in the %s's order: %s of room", order.name, _size(memory))
        project = None
        if device.type == "cpu":
            project = projection_hook(
                model,
                adjacency,
                order.read_range,
                max_bytes=memory // 2 if memory is not None else 1 << 62,
                batch_size=self.batch_size,
                layer_dir=layer_dir,
                spill_dir=self._scratch,  # the order's scratch: removed by close()
                compare_rows=True,  # else part by part (bounds, cache_bytes)
            )
        for a, b, out in layerwise_inference(
            model,
            adjacency,
            order.rows(self.cost.spill),
            batch_size=self.batch_size,
            device=device,
            amp_dtype=amp_dtype,
            layer_dir=layer_dir,
            bounds=order.bounds,
            cache_bytes=memory // 4 if memory is not None else 1 << 62,
            input_range=order.read_range,
            input_ranges=order.read_ranges(),
            rows=rows,
            project=project,
        ):
            predicted[a:b] = out.argmax(dim=-1).cpu()
            width = out.size(-1)
        return lambda split: predicted[torch.searchsorted(targets, order.new_ids(split))], width

    def _order_adjacency(self, order: EvaluationOrder) -> Adjacency:
        """The in-neighbour lists in ``order``'s numbering, built on the first
        pass into a scratch directory (``$TMPDIR``) kept until :meth:`close`."""
        if self._ordered is None:
            self._scratch = str(scratch_dir("gnncore-eval-order-"))
            weakref.finalize(self, shutil.rmtree, self._scratch, True)
            self._ordered = order.adjacency(Path(self._scratch))
        return self._ordered

    def close(self) -> None:
        """Remove the order's scratch directory (a later pass builds it again)."""
        self._ordered = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def joined(self, other: LayerwiseEvaluation, names: tuple[str, str]) -> LayerwiseEvaluation:
        """One evaluation of this split and ``other``'s (named ``names``) in one
        pass: each layer's rows the union of both's (a node's rows are the
        same whichever split needs them)."""
        rows = [
            union_ids(a, b, self.adjacency.num_nodes)
            for a, b in zip(self.rows, other.rows, strict=True)
        ]
        splits = {names[0]: self.split, names[1]: other.split}
        return LayerwiseEvaluation(
            self.adjacency,
            splits,
            rows,
            max(self.batch_size, other.batch_size),
            self.cost,
            self.order,
        )


class KeptTest:
    """The test metrics computed beside validation (one pass of a joined
    :class:`LayerwiseEvaluation`) for the weights they were measured on: kept
    when validation improves on the best of this process (the epoch whose
    weights the run restores before it measures the test), and given back only
    for a model with exactly those weights."""

    def __init__(self) -> None:
        self.best = -1.0
        self.weights: dict[str, torch.Tensor] | None = None
        self.metrics: ClassificationMetrics | None = None

    def offer(
        self, model: torch.nn.Module, val: ClassificationMetrics, test: ClassificationMetrics
    ) -> None:
        """Keep ``test`` and ``model``'s weights when ``val`` is the best yet."""
        if val.accuracy > self.best:
            self.best = val.accuracy
            self.weights = {
                k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()
            }
            self.metrics = test

    def take(self, model: torch.nn.Module) -> ClassificationMetrics | None:
        """The kept test metrics when ``model`` holds the kept weights, else ``None``."""
        if self.weights is None or self.metrics is None:
            return None
        state = model.state_dict()
        if state.keys() != self.weights.keys():
            return None
        same = all(torch.equal(state[k].detach().cpu(), v) for k, v in self.weights.items())
        return self.metrics if same else None


def _size(memory: int | None) -> str:
    return "no limit" if memory is None else format_size(memory)


def evaluation_room(config: Any) -> tuple[int | None, str]:
    """``(bytes, source)``: the memory exact evaluation's hidden layers are set
    against. With ``config.memory_budget`` (the whole process's budget) what it
    leaves after this process's RSS now and the margin
    (:class:`gnncore.usage.StageBudget`); without, the memory available."""
    total = getattr(config, "memory_budget_bytes", None)
    if total is None:
        return memory_available(), "the memory available"
    # Set up late in training, after reads through mapped files (the graph's CSR
    # for the cost, the store's arrays): their pages are page cache, not held.
    stage = StageBudget.start(int(total), held=True)
    source = (
        f"what the memory budget leaves ({format_size(int(total))} less "
        f"{format_size(stage.overhead)} this process holds and a {format_size(stage.margin)} "
        "margin)"
    )
    return stage.data_bytes, source


#: The least room a layer-wise pass works in (:meth:`EvaluationCost.room_now`;
#: its hidden layers go to disk below twice their size). Below it the spilled products are
#: aggregated a few targets at a time: with none left (the room measured with the
#: pages of mapped data files counted as held), the showcase's first layer
#: aggregated one node at a time, 3,265 of 8.5M nodes in 5 minutes.
#: HierBatching's sizing leaves evaluation its working set beside the static cache
#: (:func:`gnncore.outofcore.training.apart_bytes`).
MIN_EVALUATION_ROOM = 64 << 20


def choose(
    name: str,
    model: torch.nn.Module,
    adjacency: Adjacency,
    split: torch.Tensor,
    config: Any,
    order: EvaluationOrder | None = None,
) -> tuple[LayerwiseEvaluation | None, EvaluationCost | None]:
    """The layer-wise evaluation of ``split`` when :class:`EvaluationCost` says
    it is the cheaper way (logged either way under ``name``), else ``None``
    (evaluate with the sampled loader); and the cost (``None`` for a model
    layer-wise inference does not compute). With ``order`` the layer-wise
    evaluation runs in that order (:class:`LayerwiseEvaluation`)."""
    if not supports_layerwise(model):
        return None, None
    assert isinstance(model, BasicGNN)
    layers = int(model.num_layers)
    rows = rows_per_layer(adjacency, split, layers)
    layerwise = sum(len(r) + in_edges(adjacency, r) for r in rows)
    sampled = sampled_cost(  # counted until it is sure to exceed the layer-wise way
        adjacency, split, layers, config.eval_batch_size, supports_trimming(model), layerwise
    )
    held = min(max(layers - 1, 0), 2)
    layer_bytes = held * adjacency.num_nodes * int(model.hidden_channels) * 4
    budget = getattr(config, "memory_budget_bytes", None)
    cost = EvaluationCost(layerwise, sampled, layer_bytes, *evaluation_room(config), budget=budget)
    LOG.info("%s evaluation of %d nodes: %s", name, len(split), cost.describe())
    if not cost.use_layerwise:
        return None, cost
    batch_size = max(config.eval_batch_size, MIN_BATCH_SIZE)
    return LayerwiseEvaluation(adjacency, split, rows, batch_size, cost, order), cost
