"""``predict_graph_dir``: a trained model's predictions for every node, as Parquet.

The output directory (docs/FORMAT.md, "Prediction directories") holds
``predictions.parquet``, one row per node keyed by the node's original id, and
``manifest.json``, the summary. It is written into a temporary sibling and
renamed into place (:func:`gnncore.store.atomic.atomic_directory`), so a
reader never sees half an output and a re-run replaces it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from gnncore.errors import InputError
from gnncore.predict.engine import (
    DEFAULT_BATCH_SIZE,
    layer_widths,
    model_outputs,
    passes,
    uses_graph,
)
from gnncore.predict.ordered import StoreOrder, store_outputs, store_plan
from gnncore.predict.source import TrainedModel, load_trained_model
from gnncore.store import GraphDir
from gnncore.store.atomic import atomic_directory, check_output_dir
from gnncore.store.manifest import sha256_of
from gnncore.train.core.device import resolve_device
from gnncore.train.core.layerstore import (
    MIN_MEMORY_BUDGET,
    InferencePlan,
    check_budget,
    plan_inference,
    random_access_rows,
)
from gnncore.train.core.layerwise import Adjacency, RowSource
from gnncore.train.link.data import link_splits, message_passing_csc
from gnncore.train.spec import ModelSpec
from gnncore.usage import StageBudget, process_budget, resolve_memory_budget

FORMAT_NAME = "gnncore.predictions"
FORMAT_VERSION = 1
PREDICTIONS_FILE = "predictions.parquet"
#: Rows per Parquet row group (batches are gathered until a group is full).
ROW_GROUP_ROWS = 65536
SPLIT_NAMES = ("none", "train", "val", "test")
#: The scratch directory of the layer files, inside the output's temporary sibling.
LAYER_DIR = "layers"


@dataclass(frozen=True)
class PredictionReport:
    """What :func:`predict_graph_dir` wrote; :meth:`summary` is ``manifest.json``."""

    out_dir: Path
    rows: int
    accuracy: dict[str, float]
    info: dict[str, Any]

    @property
    def test_accuracy(self) -> float | None:
        return self.accuracy.get("test")

    def summary(self) -> dict[str, Any]:
        return dict(self.info)


def check_compatible(spec: ModelSpec, graph: GraphDir) -> None:
    """Raise :class:`InputError` when ``graph`` cannot feed the model: another
    feature width, another number of classes, or (embedding tables) another
    node count."""
    m = graph.manifest
    where = graph.path
    if spec.task == "node":
        if not graph.has("features"):
            raise InputError("the model reads node features; the graph has no features.npy", where)
        if m.num_features != spec.in_channels:
            raise InputError(
                f"the graph has {m.num_features} features per node, the model reads "
                f"{spec.in_channels}",
                where,
            )
        if graph.has("labels") and m.num_classes and m.num_classes != spec.num_classes:
            raise InputError(
                f"the graph has {m.num_classes} classes, the model predicts {spec.num_classes}",
                where,
            )
        return
    a = spec.architecture
    if not spec.in_channels and int(a["num_nodes"]) != m.num_nodes:
        raise InputError(
            f"the graph has {m.num_nodes} nodes, the model learned embeddings of "
            f"{a['num_nodes']} (a link model over learned embeddings predicts its own graph)",
            where,
        )
    if spec.in_channels and (not graph.has("features") or m.num_features != spec.in_channels):
        raise InputError(
            f"the graph has {m.num_features if graph.has('features') else 0} features per "
            f"node, the model reads {spec.in_channels}",
            where,
        )


def _feature_rows(graph: GraphDir, scattered: bool = False) -> RowSource | None:
    """Feature rows by node id; ``scattered``: mapped for random access (no
    readahead: :func:`~gnncore.train.core.layerstore.random_access_rows`), for
    reading under a memory budget."""
    features = graph.features()
    if features is None:
        return None
    if scattered:
        features = random_access_rows(Path(graph.path) / "features.npy")

    def rows(n_id: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(features[n_id.numpy()], dtype=np.float32))

    return rows


def _adjacency(spec: ModelSpec, graph: GraphDir) -> Adjacency:
    """The graph training passed messages over: the graph's own CSR (node task),
    or the training triples' undirected graph (link task,
    :func:`~gnncore.train.link.data.message_passing_csc`)."""
    if spec.task == "node":
        return Adjacency(np.asarray(graph.indptr), graph.indices)
    splits = link_splits(graph)
    return Adjacency(*message_passing_csc(splits.train, graph.num_nodes))


def original_ids(graph: GraphDir) -> pa.Array:
    """Each node's original id in node order: ``raw_id`` of ``node_ids.parquet``
    (int64 or string), else the node id itself."""
    table = graph.node_ids()
    n = graph.num_nodes
    if table is None:
        return pa.array(np.arange(n, dtype=np.int64))
    table = table.sort("node_id")
    if table.height != n or not np.array_equal(
        table["node_id"].to_numpy(), np.arange(n, dtype=np.int64)
    ):
        raise InputError(
            "node_id does not cover 0 .. num_nodes - 1", graph.path / "node_ids.parquet"
        )
    raw = table["raw_id"].to_arrow()
    if (
        pa.types.is_string(raw.type)
        or pa.types.is_large_string(raw.type)
        or pa.types.is_string_view(raw.type)
    ):
        return raw.cast(pa.large_string())
    return raw.cast(pa.int64())


def _split_codes(graph: GraphDir) -> np.ndarray:
    codes = np.zeros(graph.num_nodes, dtype=np.int8)
    for code, name in enumerate(SPLIT_NAMES[1:], start=1):
        if graph.has(f"{name}_idx"):
            codes[np.asarray(graph.split(name), dtype=np.int64)] = code
    return codes


def _list_array(values: np.ndarray) -> pa.Array:
    rows, width = values.shape
    offsets = pa.array(np.arange(0, rows * width + 1, width, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(values.reshape(-1), type=pa.float32()))


class PredictionRows:
    """The Parquet rows of a graph's predictions, written batch by batch in whole
    row groups of :data:`ROW_GROUP_ROWS` (memory: one row group), with the
    accuracy per split counted on the way (node task)."""

    def __init__(self, spec: ModelSpec, graph: GraphDir, path: Path) -> None:
        self.path = path
        self.node_task = spec.task == "node"
        self.ids = original_ids(graph)
        self.labels = np.asarray(graph.labels()) if self.node_task and graph.has("labels") else None
        self.codes = _split_codes(graph) if self.node_task else None
        self.correct = np.zeros(len(SPLIT_NAMES), dtype=np.int64)
        self.counted = np.zeros(len(SPLIT_NAMES), dtype=np.int64)
        self.width = self.rows = 0
        self._writer: pq.ParquetWriter | None = None
        self._pending: list[pa.Table] = []
        self._pending_rows = 0

    def _columns(self, a: int, b: int, out: torch.Tensor) -> dict[str, pa.Array]:
        columns: dict[str, pa.Array] = {
            "node_id": self.ids[a:b],
            "node_index": pa.array(np.arange(a, b, dtype=np.int64)),
        }
        if not self.node_task:
            embedding = out.cpu().numpy().astype(np.float32)
            self.width = embedding.shape[1]
            return {**columns, "embedding": _list_array(embedding)}
        probs = torch.softmax(out, dim=-1).cpu().numpy().astype(np.float32)
        # argmax of the logits, as training's evaluation takes it
        predicted = out.argmax(dim=-1).cpu().numpy().astype(np.int64)
        assert self.codes is not None
        codes = self.codes[a:b]
        columns["split"] = pa.DictionaryArray.from_arrays(
            pa.array(codes, type=pa.int8()), pa.array(SPLIT_NAMES)
        )
        if self.labels is not None:
            label = np.asarray(self.labels[a:b])
            columns["label"] = pa.array(label, type=pa.int64())
            known = label >= 0
            hit = (predicted == label) & known
            self.correct += np.bincount(codes[hit], minlength=len(SPLIT_NAMES))
            self.counted += np.bincount(codes[known], minlength=len(SPLIT_NAMES))
        columns["predicted_class"] = pa.array(predicted)
        columns["probabilities"] = _list_array(probs)
        self.width = probs.shape[1]
        return columns

    def add(self, a: int, b: int, out: torch.Tensor) -> None:
        """The rows of nodes ``a .. b-1`` (the model's outputs ``out``), in order."""
        table = pa.table(self._columns(a, b, out))
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path, table.schema)
        self._pending.append(table)
        self._pending_rows += table.num_rows
        if self._pending_rows >= ROW_GROUP_ROWS:  # write whole row groups, keep the rest
            combined = pa.concat_tables(self._pending)
            full = self._pending_rows - self._pending_rows % ROW_GROUP_ROWS
            self._writer.write_table(combined.slice(0, full), row_group_size=ROW_GROUP_ROWS)
            self.rows += full
            self._pending, self._pending_rows = [combined.slice(full)], self._pending_rows - full

    def close(self, flush: bool = True) -> None:
        """Write the last rows (``flush``) and close the file."""
        if self._writer is None:
            return
        if flush and self._pending_rows:
            self._writer.write_table(pa.concat_tables(self._pending), row_group_size=ROW_GROUP_ROWS)
            self.rows += self._pending_rows
        self._pending, self._pending_rows = [], 0
        self._writer.close()
        self._writer = None

    def accuracy(self) -> dict[str, float]:
        return {
            name: float(self.correct[i] / self.counted[i])
            for i, name in enumerate(SPLIT_NAMES)
            if i > 0 and self.counted[i] > 0
        }


def _progress_bar(progress: bool, total: int) -> Any:
    if not (progress and sys.stderr.isatty()):
        return None
    from tqdm.auto import tqdm  # lazy: only on a terminal

    return tqdm(total=total, desc="predict", unit="batch")


def _data_budget(memory_budget: int | str | None) -> int | None:
    """The bytes the layers and batches may take: ``"auto"`` is this process's
    budget less its overhead now (:class:`~gnncore.usage.StageBudget`), else
    the size as given."""
    if memory_budget == "auto":
        return StageBudget.start(process_budget()).require(MIN_MEMORY_BUDGET, "prediction")
    return resolve_memory_budget(memory_budget)


def predict_graph_dir(
    graph_dir: str | os.PathLike[str] | GraphDir,
    out_dir: str | os.PathLike[str],
    model: str | os.PathLike[str] | TrainedModel,
    *,
    tracking_uri: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    device: str = "auto",
    progress: bool = True,
    memory_budget: int | str | None = "auto",
    store: str | os.PathLike[str] | None = None,
) -> PredictionReport:
    r"""Write a trained model's prediction for every node of a graph directory.

    Node classification: ``predicted_class`` and ``probabilities`` (softmax of
    the logits); link prediction: the node's ``embedding`` (the encoder's
    output; for plain DistMult the learned entity embedding). Outputs are
    computed by layer-wise inference over node batches
    (:mod:`gnncore.train.core.layerwise`) and streamed to Parquet. Between layers
    every node's hidden rows are kept: in memory when they fit in half of
    ``memory_budget``, else in one file per layer in a scratch directory
    inside the output's temporary sibling, with batches sized from the budget
    (:func:`~gnncore.train.core.layerstore.plan_inference`; the same predictions
    within float tolerance). The features go through exactly what training's
    evaluation applied (``normalize_features``; autocast on CUDA when
    training used ``amp``).

    Args:
        graph_dir: The graph to predict on (features of the model's width).
        out_dir: The prediction directory to create or replace.
        model: A ``models:/`` URI, a local model directory, or a
            :class:`TrainedModel`.
        tracking_uri (str, optional): The MLflow store ``models:/`` URIs
            resolve in.
        batch_size (int): Target nodes per batch (at most, under a budget).
            (default: :obj:`4096`)
        device (str): ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
        progress (bool): A tqdm bar over the batches of all layers, on a
            terminal. (default: :obj:`True`)
        memory_budget (int or str, optional): Bytes (or a size such as
            ``"2GiB"``) the layer outputs and batches may take; ``"auto"``:
            what the whole process may take (:func:`~gnncore.usage.process_budget`)
            less what it holds when the call starts and a margin
            (:class:`~gnncore.usage.StageBudget`), refused below the layer store's
            minimum; ``None``: keep the layers in memory. (default: ``"auto"``)
        store (path, optional): A partitioned store of this graph (``gnncore
            store``): a node model's layers run in its node order, part by part
            (:mod:`gnncore.predict.ordered`), each part's rows read once when
            they fit in a quarter of the budget (batches then sized from half
            of it); rows written in the graph's order, the same values.
            Ignored by a model without message passing; refused for a link
            model (it passes messages over its training triples).

    Returns:
        PredictionReport: rows, accuracy per split (node task) and the summary.
    """
    started = time.perf_counter()
    if batch_size < 1:
        raise InputError(f"batch_size must be >= 1, got {batch_size}")
    graph = graph_dir if isinstance(graph_dir, GraphDir) else GraphDir.open(graph_dir)
    graph.check_structure()
    check_output_dir(out_dir, [graph.path], FORMAT_NAME, "predictions")
    try:  # before the model loads
        budget = check_budget(_data_budget(memory_budget))
    except ValueError as exc:
        raise InputError(f"memory_budget: {exc}") from None
    trained = model if isinstance(model, TrainedModel) else load_trained_model(model, tracking_uri)
    spec = trained.spec
    check_compatible(spec, graph)
    torch_device = resolve_device(device)
    module = trained.module.to(torch_device).eval()
    n = graph.num_nodes
    widths = layer_widths(spec, module)
    plan = plan_inference(n, widths, len(widths) - 1, batch_size, budget, len(graph.indices))
    order = _store_order(store, spec, module, graph)
    plan, cache_bytes = store_plan(plan, n, widths, batch_size, budget, len(graph.indices), order)
    adjacency = _adjacency(spec, graph) if uses_graph(spec, module) else None
    bar = _progress_bar(
        progress, passes(spec, module, adjacency, n, plan.batch_size, plan.max_edges)
    )
    with atomic_directory(out_dir) as tmp:
        rows = PredictionRows(spec, graph, tmp / PREDICTIONS_FILE)
        layer_dir = tmp / LAYER_DIR if plan.spill or order is not None else None
        if layer_dir is not None:
            layer_dir.mkdir()
        complete = False
        try:
            on_batch = bar.update if bar is not None else None
            if order is None:
                outputs = model_outputs(
                    spec, module, adjacency, _feature_rows(graph, scattered=plan.spill), n,
                    batch_size=plan.batch_size, max_edges=plan.max_edges, device=torch_device,
                    on_batch=on_batch, layer_dir=layer_dir,
                )  # fmt: skip
            else:  # the graph's adjacency above counted the batches (about as many)
                assert layer_dir is not None
                outputs = store_outputs(
                    spec, module, graph, order, plan, cache_bytes, budget, layer_dir,
                    torch_device, on_batch, ROW_GROUP_ROWS,
                )  # fmt: skip
            for a, b, out in outputs:
                rows.add(a, b, out)
            complete = True
        finally:
            rows.close(flush=complete)
            if bar is not None:
                bar.close()
            if layer_dir is not None:
                shutil.rmtree(layer_dir, ignore_errors=True)
        if rows.rows == 0:
            raise InputError("the graph has no nodes", graph.path)
        if rows.rows != n:
            raise RuntimeError(f"wrote {rows.rows} rows for {n} nodes")
        accuracy = rows.accuracy()
        seconds = time.perf_counter() - started
        info = _summary(spec, trained, graph, rows, plan, budget, torch_device, seconds)
        info["order"] = "graph" if order is None else "partitioned store"
        info["store"] = order.describe(cache_bytes) if order is not None else None
        (tmp / "manifest.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    return PredictionReport(Path(out_dir), rows.rows, accuracy, info)


def _store_order(
    store: str | os.PathLike[str] | None, spec: ModelSpec, module: torch.nn.Module, graph: GraphDir
) -> StoreOrder | None:
    """The store to run in (checked against ``graph``), or ``None``: none given,
    or a model without message passing (its rows need no neighbours)."""
    if store is None or not uses_graph(spec, module):
        return None
    if spec.task != "node":
        raise InputError(
            "a partitioned store serves node models; a link model passes messages over its "
            "training triples, not the store's edges",
            Path(store),
        )
    return StoreOrder.open(store, graph)


def link_latest(out_dir: str | os.PathLike[str], name: str) -> Path:
    """Point ``<parent of out_dir>/<name>`` at ``out_dir``: a relative symbolic link
    that readers outside the pipeline can follow to the newest predictions
    (``.../predictions/<graph>-<task>-latest/predictions.parquet``). The link is
    made beside and renamed over the old one, so a reader always finds a
    complete directory through it.

    Raises:
        InputError: ``name`` is not a plain file name, or a real file or
            directory (not a link) already has that name.
    """
    target = Path(out_dir)
    if Path(name).name != name or name in ("", ".", ".."):
        raise InputError(f"not a plain name for the latest link: {name!r}", target.parent)
    link = target.parent / name
    if link.exists() and not link.is_symlink():
        raise InputError("exists and is not a link: not replaced by the latest link", link)
    temporary = target.parent / f".{name}.{os.getpid()}.tmp"
    temporary.unlink(missing_ok=True)
    os.symlink(target.name, temporary, target_is_directory=True)
    os.replace(temporary, link)
    return link


def _summary(
    spec: ModelSpec,
    trained: TrainedModel,
    graph: GraphDir,
    rows: PredictionRows,
    plan: InferencePlan,
    budget: int | None,
    device: torch.device,
    seconds: float,
) -> dict[str, Any]:
    m = graph.manifest
    node_task = spec.task == "node"
    columns = ["node_id", "node_index"] + (
        ["split"]
        + (["label"] if graph.has("labels") else [])
        + ["predicted_class", "probabilities"]
        if node_task
        else ["embedding"]
    )
    info: dict[str, Any] = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "task": spec.task,
        "rows": rows.rows,
        "file": PREDICTIONS_FILE,
        "columns": columns,
        "node_id_type": "string" if graph.has("node_ids") and _string_ids(graph) else "int64",
        "num_classes" if node_task else "embedding_dim": rows.width,
        "graph": {
            "path": str(Path(graph.path).absolute()),
            "name": m.name,
            "manifest_sha256": sha256_of(Path(graph.path) / "manifest.json"),
            "num_nodes": m.num_nodes,
        },
        "model": {**trained.describe(), "architecture": spec.architecture},
        "trained_on": spec.graph,
        "method": "layer-wise" if uses_graph(spec, trained.module) else "row-wise",
        **plan.to_dict(),
        "memory_budget": budget,
        "device": str(device),
        "seconds": round(seconds, 3),
    }
    if node_task:
        accuracy = rows.accuracy()
        info["accuracy"] = accuracy
        info["test_accuracy"] = accuracy.get("test")
        if "test_accuracy" in spec.metrics:
            info["training_test_accuracy"] = spec.metrics["test_accuracy"]
    elif spec.metrics:
        info["training_metrics"] = spec.metrics
    return info


def _string_ids(graph: GraphDir) -> bool:
    schema = pq.read_schema(Path(graph.path) / "node_ids.parquet")
    kind = schema.field("raw_id").type
    return bool(
        pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)
    )


def preview_rows(out_dir: str | os.PathLike[str], count: int = 5) -> str:
    """The first ``count`` rows of a prediction directory as a Markdown table
    (vectors rounded to 3 digits, at most 6 entries shown)."""
    parquet = pq.ParquetFile(Path(out_dir) / PREDICTIONS_FILE)
    table = next(parquet.iter_batches(batch_size=count)).to_pylist()

    def cell(value: Any) -> str:
        if isinstance(value, list):
            shown = ", ".join(f"{v:.3f}" for v in value[:6])
            return f"[{shown}{', …' if len(value) > 6 else ''}]"
        return str(value).replace("|", "\\|")

    names = parquet.schema_arrow.names
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    lines += ["| " + " | ".join(cell(row[name]) for name in names) + " |" for row in table]
    return "\n".join(lines)
