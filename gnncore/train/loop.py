r"""Mini-batch node classification over any PyG feature store and graph store.

The loop never touches the data directly: a
:class:`~torch_geometric.loader.NodeLoader` samples with the given sampler and
joins rows from the given :class:`~torch_geometric.data.FeatureStore` (``"x"``
and ``"y"``), so the same code trains from memory, from memory-mapped graph
directories, or from a placed / remote store. Metrics go to an optional run
logger (:class:`gnncore.tracking.RunLogger`); MLflow is not imported here.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch_geometric.data import FeatureStore, GraphStore
from torch_geometric.loader import NodeLoader
from torch_geometric.sampler import BaseSampler
from tqdm.auto import tqdm

from gnncore.train.config import NodeTrainConfig
from gnncore.train.device import resolve_device
from gnncore.train.models import build_model

Index = torch.Tensor


class MetricLogger(Protocol):
    """The part of :class:`gnncore.tracking.RunLogger` the loop uses."""

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None: ...


@dataclass
class NodeTrainResult:
    """What :func:`train_node_classifier` returns.

    ``model`` holds the weights of ``best_epoch`` (highest validation accuracy,
    earliest on ties), on the training device. Epochs count from 1;
    ``train_loss[e - 1]`` and ``val_accuracy[e - 1]`` belong to epoch ``e``.
    ``run_id`` is set by :func:`gnncore.train.train_graph_dir` when the run
    was tracked.
    """

    model: torch.nn.Module
    config: NodeTrainConfig
    train_loss: list[float]
    val_accuracy: list[float]
    best_epoch: int
    best_val_accuracy: float
    test_accuracy: float
    seconds: float
    device: str
    num_parameters: int
    run_id: str | None = None

    def summary(self) -> dict[str, Any]:
        """JSON-friendly scalars (no model)."""
        return {
            "model": self.config.model,
            "epochs": self.config.epochs,
            "best_epoch": self.best_epoch,
            "val_accuracy": self.best_val_accuracy,
            "test_accuracy": self.test_accuracy,
            "final_train_loss": self.train_loss[-1] if self.train_loss else None,
            "seconds": self.seconds,
            "device": self.device,
            "num_parameters": self.num_parameters,
            "seed": self.config.seed,
        }


def _as_index(nodes: Any) -> Index:
    index = torch.as_tensor(nodes).reshape(-1)
    if index.dtype == torch.bool:
        index = index.nonzero().reshape(-1)
    return index.to(torch.long)


def _make_loader(data: tuple[FeatureStore, GraphStore], sampler: BaseSampler, nodes: Index,
                 batch_size: int, config: NodeTrainConfig, device: torch.device,
                 generator: torch.Generator | None = None) -> NodeLoader:
    shuffle = generator is not None
    workers = config.num_workers
    return NodeLoader(data=data, node_sampler=sampler, input_nodes=nodes,
                      batch_size=batch_size, shuffle=shuffle, generator=generator,
                      num_workers=workers, persistent_workers=workers > 0,
                      pin_memory=device.type == "cuda")


def _forward(model: torch.nn.Module, batch: Any) -> torch.Tensor:
    """Seed-node logits; layer ``i`` is trimmed to the hops it still needs when the
    sampler reported one hop per layer (edges emitted hop by hop)."""
    nodes, edges = batch.num_sampled_nodes, batch.num_sampled_edges
    num_layers = getattr(model, "num_layers", None)
    if nodes is None or edges is None or len(edges) != num_layers:
        nodes = edges = None
    out = model(batch.x, batch.edge_index, num_sampled_nodes_per_hop=nodes,
                num_sampled_edges_per_hop=edges)
    return out[:batch.batch_size]


@torch.no_grad()
def evaluate(model: torch.nn.Module, loader: NodeLoader, device: torch.device) -> float:
    """Accuracy of ``model`` on the seed nodes of ``loader``."""
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=device)  # summed on device: one sync
    total = 0
    for batch in loader:
        batch = batch.to(device, non_blocking=True)
        pred = _forward(model, batch).argmax(dim=-1)
        correct += (pred == batch.y[:batch.batch_size]).sum()
        total += batch.batch_size
    return int(correct) / max(total, 1)


def train_node_classifier(
    feature_store: FeatureStore,
    graph_store: GraphStore,
    train_idx: Any,
    val_idx: Any,
    test_idx: Any,
    num_classes: int,
    config: NodeTrainConfig,
    logger: MetricLogger | None = None,
    sampler: BaseSampler | None = None,
    progress: bool = True,
    eval_sampler: BaseSampler | None = None,
    in_channels: int | None = None,
) -> NodeTrainResult:
    r"""Train a node classifier with neighbour-sampled mini-batches.

    Each epoch runs over ``train_idx`` in shuffled batches, then measures the
    validation accuracy; the weights of the best validation epoch are restored
    before the test accuracy is measured.

    Args:
        feature_store (FeatureStore): Provides node attributes ``"x"`` (float
            features) and ``"y"`` (int64 labels), ``group_name=None``.
        graph_store (GraphStore): The homogeneous adjacency.
        train_idx, val_idx, test_idx (Tensor or array): Node ids (or boolean
            masks) of the splits.
        num_classes (int): Output channels.
        config (NodeTrainConfig): Hyper-parameters; validated here.
        logger (RunLogger, optional): Receives ``train_loss`` and
            ``val_accuracy`` per epoch (``step=epoch``) and ``test_accuracy``,
            ``best_epoch``, ``best_val_accuracy`` and ``seconds`` at the end.
            (default: :obj:`None`)
        sampler (BaseSampler, optional): Training sampler; default a
            :class:`gnncore.sampler.NeighborSampler` over ``graph_store`` with
            ``config.fanouts`` and ``config.seed``. (default: :obj:`None`)
        progress (bool, optional): Show tqdm bars (epochs, and batches within
            an epoch). (default: :obj:`True`)
        eval_sampler (BaseSampler, optional): Sampler for validation and test;
            default a :class:`~gnncore.sampler.NeighborSampler` with
            ``config.eval_fanouts`` (all neighbours when ``None``).
            (default: :obj:`None`)
        in_channels (int, optional): Feature width; read from the feature
            store when omitted. (default: :obj:`None`)
    """
    config.validate()
    if num_classes < 2:
        raise ValueError(f"num_classes={num_classes}: node classification needs >= 2 classes")
    started = time.perf_counter()
    device = resolve_device(config.device)
    torch.manual_seed(config.seed)

    if sampler is None or eval_sampler is None:
        from gnncore.sampler import NeighborSampler

        if sampler is None:
            sampler = NeighborSampler(graph_store, config.fanouts, seed=config.seed)
        if eval_sampler is None:
            fanouts = config.eval_fanouts or (-1,) * config.num_layers
            eval_sampler = NeighborSampler(graph_store, fanouts, seed=config.seed + 1)
    if in_channels is None:
        size = feature_store.get_tensor_size(group_name=None, attr_name="x")
        if size is None or len(size) != 2:
            raise ValueError(f"feature store 'x' must be 2-d [num_nodes, F]; size is {size}")
        in_channels = int(size[1])

    model = build_model(config.model, in_channels, config.hidden, num_classes,
                        config.num_layers, config.dropout).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr,
                                 weight_decay=config.weight_decay)
    data = (feature_store, graph_store)
    generator = torch.Generator().manual_seed(config.seed)
    train_loader = _make_loader(data, sampler, _as_index(train_idx), config.batch_size,
                                config, device, generator)
    val_loader = _make_loader(data, eval_sampler, _as_index(val_idx), config.eval_batch_size,
                              config, device)
    test_loader = _make_loader(data, eval_sampler, _as_index(test_idx),
                               config.eval_batch_size, config, device)

    losses: list[float] = []
    accuracies: list[float] = []
    best_epoch, best_val, best_state = 0, -1.0, None
    epochs = tqdm(range(1, config.epochs + 1), desc="epochs", unit="epoch",
                  disable=not progress, dynamic_ncols=True)
    for epoch in epochs:
        loss = _train_epoch(model, train_loader, optimizer, device,
                            lambda it: tqdm(it, desc=f"epoch {epoch}", unit="batch",
                                            leave=False, disable=not progress,
                                            total=len(train_loader), dynamic_ncols=True))
        val_acc = evaluate(model, val_loader, device)
        losses.append(loss)
        accuracies.append(val_acc)
        if val_acc > best_val:
            best_epoch, best_val = epoch, val_acc
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        epochs.set_postfix(loss=f"{loss:.4f}", val_acc=f"{val_acc:.4f}",
                           best=f"{best_val:.4f}@{best_epoch}")
        if logger is not None:
            logger.log_metrics({"train_loss": loss, "val_accuracy": val_acc}, step=epoch)

    assert best_state is not None  # epochs >= 1
    model.load_state_dict(best_state)
    test_acc = evaluate(model, test_loader, device)
    seconds = time.perf_counter() - started
    if logger is not None:
        logger.log_metrics({"test_accuracy": test_acc, "best_val_accuracy": best_val,
                            "best_epoch": float(best_epoch), "seconds": seconds},
                           step=config.epochs)
    return NodeTrainResult(
        model=model, config=config, train_loss=losses, val_accuracy=accuracies,
        best_epoch=best_epoch, best_val_accuracy=best_val, test_accuracy=test_acc,
        seconds=seconds, device=str(device),
        num_parameters=sum(p.numel() for p in model.parameters()))


def _train_epoch(model: torch.nn.Module, loader: NodeLoader, optimizer: torch.optim.Optimizer,
                 device: torch.device, wrap: Callable[[Any], Any]) -> float:
    """One pass over ``loader``; the mean loss per seed node."""
    model.train()
    total_loss = torch.zeros((), device=device)  # summed on device: one sync per epoch
    total = 0
    for batch in wrap(loader):
        batch = batch.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        out = _forward(model, batch)
        loss = F.cross_entropy(out, batch.y[:batch.batch_size])
        loss.backward()
        optimizer.step()
        total_loss += loss.detach() * batch.batch_size
        total += batch.batch_size
    return float(total_loss) / max(total, 1)


def copy_to_cpu(model: torch.nn.Module) -> torch.nn.Module:
    """A CPU copy of ``model`` in eval mode (for export and logging)."""
    return copy.deepcopy(model).to("cpu").eval()
