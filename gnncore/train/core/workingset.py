"""What training holds besides its data: the working set a memory budget must also fit.

Mode ``auto`` (:mod:`gnncore.modes.choose`) compares the in-memory training data
*plus* this working set with the budget, and HierBatching
(:mod:`gnncore.outofcore.training`) sizes its mega-batches from what the budget
leaves after it. Estimated from the config and the graph's sizes, nothing built:

* ``model``: the parameters, their gradients and Adam's two moments (16 bytes a
  parameter; Adagrad's one sum for link prediction counts the same), from the
  layer widths (features -> hidden ... -> classes) and the architecture;
* ``batches``: the sampled mini-batches in flight: ``prefetch_depth`` prepared
  ahead plus the one computing (one only without prefetch threads), each
  ``B·(1 + f_1 + f_1·f_2 + ...)`` nodes (``-1`` counts the average degree; at
  most ``N``) of features, ids and edges, plus the computing one's activations
  and their gradients: the first layer's gathered messages (``max(F, hidden)``
  floats a sampled node) and the hidden outputs of the nodes an inner layer
  computes (``hidden·L`` floats a node of the first ``L - 1`` hops), twice;
* ``evaluation``: one evaluation batch (layer-wise exact evaluation: at least
  4,096 target rows, their in-neighbours' rows and one message per in-edge;
  sampled evaluation: a batch of ``eval_batch_size`` seeds);
* ``eval_layers``: exact layer-wise evaluation's hidden layers when they stay in
  memory: ``N x hidden`` float32 per held layer (at most two); spilled to disk
  they cost nothing here (:mod:`gnncore.train.core.layerstore`).

Training and evaluation take turns: the total is the model plus the larger of the
training batches and the evaluation's batch with its layers. The figures are
upper-bound estimates of steady state, not measurements; the
interpreter, torch and MLflow are the process's fixed overhead, measured at the
stage's start (:class:`gnncore.usage.StageBudget`), not estimated here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Bytes of a float32.
FLOAT = 4
#: Bytes per trained parameter: the weight, its gradient and the optimizer's two
#: moments (Adam), float32.
PARAM_STATE_BYTES = 16
#: Target rows of a layer-wise evaluation batch at least
#: (:data:`gnncore.train.node.exact.MIN_BATCH_SIZE`).
EVAL_MIN_ROWS = 4096
#: Hidden layers layer-wise evaluation holds at once at most (the one read, the
#: one written).
EVAL_HELD_LAYERS = 2


@dataclass(frozen=True)
class WorkingSet:
    """Training's working set in bytes, by part (see the module)."""

    model: int
    batches: int
    evaluation: int
    eval_layers: int

    def total(self, layers_in_memory: bool = True) -> int:
        """Bytes of the whole working set: the model and the larger of the training
        batches and the evaluation (they take turns); ``layers_in_memory=False``
        leaves out the evaluation's hidden layers (they spill to disk)."""
        layers = self.eval_layers if layers_in_memory else 0
        return self.model + max(self.batches, self.evaluation + layers)

    def parts(self, layers_in_memory: bool = True) -> dict[str, int]:
        """The parts as ``{"model": ..., "batches": ..., "evaluation": ...,
        "eval_layers": ...}`` (``eval_layers`` 0 when they spill)."""
        return {
            "model": self.model,
            "batches": self.batches,
            "evaluation": self.evaluation,
            "eval_layers": self.eval_layers if layers_in_memory else 0,
        }


def _layer_params(model: str, fan_in: int, fan_out: int, heads: int = 1) -> int:
    """Parameters of one message-passing layer ``fan_in -> fan_out`` (``heads``:
    GAT's heads whose outputs are averaged, on its last layer)."""
    if model == "sage":  # lin_l (with bias) and lin_r
        return 2 * fan_in * fan_out + fan_out
    if model == "gat":  # lin, att_src, att_dst (per head), bias
        return fan_in * fan_out * heads + 2 * heads * fan_out + fan_out
    if model == "gin":  # a two-layer MLP with batch norm
        return fan_in * fan_out + fan_out * fan_out + 4 * fan_out
    return fan_in * fan_out + fan_out  # gcn, the MLP of model "none"


def model_bytes(model: str, widths: list[int], heads: int = 1) -> int:
    """Bytes of the parameters and their training state
    (:data:`PARAM_STATE_BYTES` each) of layers ``widths[0] -> widths[1] -> ...``
    (GAT's last layer averages ``heads`` heads, the others concatenate them)."""
    pairs = list(zip(widths, widths[1:], strict=False))
    params = sum(
        _layer_params(model, a, b, heads if i == len(pairs) - 1 else 1)
        for i, (a, b) in enumerate(pairs)
    )
    return PARAM_STATE_BYTES * params


def sampled_nodes(
    seeds: int,
    fanouts: tuple[int, ...],
    avg_degree: float,
    num_nodes: int,
    reach: float = 1.0,
    neighbour_degree: float | None = None,
) -> int:
    """Nodes of one sampled mini-batch of ``seeds`` seeds: ``seeds`` times
    ``1 + f_1·r + f_1·f_2·r^2 + ...`` (``-1``: every neighbour, the average
    degree from the seeds and ``neighbour_degree`` from the hops after, where
    given; ``r``, ``reach``: the share of sampled neighbours kept, below 1 where
    only the neighbours in memory are, as in a HierBatching mega-batch), at most
    ``num_nodes``. A neighbour is reached through its in-edges, so its expected
    degree is ``sum(d^2) / sum(d)`` (:func:`neighbour_degree`), not the mean:
    on the generator's 2M-node graph 140 against 10, and a 1,024-seed batch
    with every neighbour of two hops holds 0.6M nodes, not 0.1M."""
    total, frontier = float(seeds), float(seeds)
    for hop, fanout in enumerate(fanouts):
        every = neighbour_degree if hop > 0 and neighbour_degree else avg_degree
        frontier *= (every if fanout < 0 else fanout) * reach
        total += frontier
    return int(min(math.ceil(total), max(num_nodes, seeds)))


def neighbour_degree(indptr: Any, block: int = 1 << 20) -> float:
    """``sum(d^2) / sum(d)`` over the rows of ``indptr`` (CSR or CSC offsets,
    memory-mapped is fine: read in blocks of ``block`` rows): the expected
    degree of a node reached through an edge. 0 for a graph without edges."""
    squares = total = 0.0
    rows = len(indptr) - 1
    for start in range(0, rows, block):
        degrees = np.diff(np.asarray(indptr[start : min(start + block, rows) + 1], dtype=np.int64))
        squares += float(np.dot(degrees, degrees))
        total += float(degrees.sum())
    return squares / total if total else 0.0


def _in_flight(config: Any) -> int:
    """Mini-batches alive at once: the one computing plus those prepared ahead."""
    return 1 + (int(config.prefetch_depth) if int(config.prefetch_workers) > 0 else 0)


def node_working_set(
    num_nodes: int,
    num_edges: int,
    num_features: int,
    num_classes: int,
    config: Any,
    reach: float = 1.0,
    neighbour_degree: float | None = None,
    eval_in_flight: int | None = None,
) -> WorkingSet:
    """The working set of node classification with ``config`` (a
    :class:`~gnncore.train.NodeTrainConfig`) on a graph of these sizes
    (``num_edges``: stored directed edges; ``reach`` and ``neighbour_degree``:
    :func:`sampled_nodes`; ``eval_in_flight``: sampled evaluation batches alive
    at once, those of training when ``None``)."""
    n, f, hidden = int(num_nodes), int(num_features), int(config.hidden)
    layers = int(config.num_layers)
    avg = num_edges / max(n, 1)
    mlp = config.model == "none"
    fanouts = (0,) * layers if mlp else tuple(config.fanouts)
    widths = [f] + [hidden] * (layers - 1) + [max(int(num_classes), 1)]
    per_node = FLOAT * f + 24  # features, the node id, an int64 edge pair
    degree = neighbour_degree
    train_nodes = sampled_nodes(int(config.batch_size), fanouts, avg, n, reach, degree)
    inner = sampled_nodes(int(config.batch_size), fanouts[:-1], avg, n, reach, degree)
    activations = 2 * FLOAT * (train_nodes * max(f, hidden) + inner * hidden * layers)
    batches = _in_flight(config) * train_nodes * per_node + activations
    layerwise = not mlp and config.eval_fanouts is None and config.model in ("sage", "gat", "gin")
    layerwise = layerwise or (config.model == "gcn" and config.eval_fanouts is None)
    if layerwise:
        rows = min(n, max(int(config.eval_batch_size), EVAL_MIN_ROWS))
        width = FLOAT * max(f, hidden)
        messages = math.ceil(rows * avg) * (width + 16)  # gathered rows, int64 edge pairs
        inputs = min(n, math.ceil(rows * (1 + avg))) * (width + 8)
        evaluation = messages + inputs + rows * FLOAT * (hidden + widths[-1])
        held = min(max(layers - 1, 0), EVAL_HELD_LAYERS)
        eval_layers = held * n * hidden * FLOAT
    else:
        eval_fanouts = (0,) * layers if mlp else tuple(config.eval_fanouts or (-1,) * layers)
        eval_nodes = sampled_nodes(int(config.eval_batch_size), eval_fanouts, avg, n, reach, degree)
        alive = _in_flight(config) if eval_in_flight is None else int(eval_in_flight)
        # The batches alive, and the computing one's first-layer messages (an
        # edge a sampled node) and hidden rows.
        evaluation = eval_nodes * (alive * per_node + FLOAT * (max(f, hidden) + hidden))
        eval_layers = 0
    model = model_bytes(config.model, widths, int(config.heads))
    return WorkingSet(model, batches, evaluation, eval_layers)


def link_working_set(num_nodes: int, num_edges: int, num_features: int, config: Any) -> WorkingSet:
    """The working set of link prediction with ``config`` (a
    :class:`~gnncore.train.LinkTrainConfig`): a GNN encoder's parameters (a learned
    embedding table is training data, counted there), the mini-batches in
    flight (positives' heads and tails and the shared negatives, expanded by the
    encoder's fan-outs, with their scores) and one evaluation batch of scores
    (every entity per query, or ``eval_negatives``)."""
    n, dim = int(num_nodes), int(config.dim)
    avg = num_edges / max(n, 1)
    gnn = config.model != "none"
    width = max(int(num_features), dim) if gnn else dim
    model = (
        model_bytes(config.model, [int(num_features)] + [dim] * len(config.fanouts)) if gnn else 0
    )
    seeds = 2 * int(config.batch_size) + int(config.num_negatives)
    fanouts = tuple(config.fanouts) if gnn else ()
    nodes = sampled_nodes(seeds, fanouts, avg, n)
    scores = int(config.batch_size) * int(config.num_negatives) * FLOAT * 2  # and gradients
    inner = sampled_nodes(seeds, fanouts[:-1], avg, n)
    activations = 2 * FLOAT * (nodes * width + inner * dim * max(len(fanouts), 1))
    batches = _in_flight(config) * nodes * (FLOAT * width + 24) + activations + scores
    candidates = int(config.eval_negatives) or n
    evaluation = int(config.eval_batch_size) * candidates * FLOAT * 2
    return WorkingSet(model, batches, evaluation, 0)
