"""The epoch driver takes its training batches from a BatchSource: a source other
than the default plugs in without changing the loop, and sees every epoch's hooks."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
import torch
from torch_geometric.loader import NodeLoader

from conftest import planted_graph
from gnncore.sampler import build_sampler
from gnncore.store import GraphDir, GraphDirFeatureStore, GraphDirGraphStore
from gnncore.train import NodeTask, NodeTrainConfig, RunHooks, fit
from gnncore.train.core.batches import BatchSource, LoaderBatchSource

CONFIG = NodeTrainConfig(hidden=16, epochs=3, batch_size=32, lr=0.01, device="cpu", patience=0)


class RecordingSource:
    """Delegates to a :class:`LoaderBatchSource` and records the driver's calls."""

    def __init__(self, inner: LoaderBatchSource) -> None:
        self.inner = inner
        self.feature_store = inner.feature_store
        self.calls: list[tuple[str, int]] = []
        self.batches_drawn = 0

    def __len__(self) -> int:
        return len(self.inner)

    def start_epoch(self, epoch: int) -> None:
        self.calls.append(("start", epoch))

    def batches(self) -> AbstractContextManager[Iterator[Any]]:
        outer = self

        class Counting:
            def __enter__(self) -> Iterator[Any]:
                self.it = outer.inner.batches().__enter__()
                return self

            def __iter__(self) -> Iterator[Any]:
                return self

            def __next__(self) -> Any:
                batch = next(self.it)
                outer.batches_drawn += 1
                return batch

            def __exit__(self, *exc: Any) -> None:
                self.it.__exit__(*exc)

        return Counting()

    def end_epoch(self, epoch: int) -> None:
        self.calls.append(("end", epoch))

    def random_state(self) -> tuple[torch.Generator, dict[str, Any]]:
        return self.inner.random_state()


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> GraphDir:
    return GraphDir.open(planted_graph(tmp_path_factory.mktemp("source") / "g"))


def _splits(graph: GraphDir) -> list[torch.Tensor]:
    return [torch.from_numpy(graph.split(s).copy()) for s in ("train", "val", "test")]


def _default_like_source(graph: GraphDir, config: NodeTrainConfig) -> LoaderBatchSource:
    """What the loop builds by default, built outside it."""
    features, topology = GraphDirFeatureStore(graph), GraphDirGraphStore(graph)
    sampler = build_sampler(config.sampler, topology, config.fanouts, seed=config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    loader = NodeLoader(
        (features, topology),
        node_sampler=sampler,
        input_nodes=_splits(graph)[0],
        batch_size=config.batch_size,
        shuffle=True,
        generator=generator,
    )
    return LoaderBatchSource(
        loader,
        features,
        generator,
        {"train": sampler},
        torch.device("cpu"),
        config.prefetch_workers,
        config.prefetch_depth,
    )


def test_a_plugged_in_source_trains_exactly_like_the_default(graph: GraphDir) -> None:
    stores = GraphDirFeatureStore(graph), GraphDirGraphStore(graph)
    classes = graph.manifest.num_classes
    default = fit(
        NodeTask(*stores, _splits(graph), classes), CONFIG, hooks=RunHooks(progress=False)
    )
    source = RecordingSource(_default_like_source(graph, CONFIG))
    assert isinstance(source, BatchSource)
    plugged = fit(
        NodeTask(*stores, _splits(graph), classes),
        CONFIG,
        source=source,
        hooks=RunHooks(progress=False),
    )
    assert source.calls == [
        ("start", 1),
        ("end", 1),
        ("start", 2),
        ("end", 2),
        ("start", 3),
        ("end", 3),
    ]
    assert source.batches_drawn == 3 * len(source)
    assert plugged.train_loss == default.train_loss
    for (name, a), b in zip(
        default.model.state_dict().items(), plugged.model.state_dict().values()
    ):
        assert torch.equal(a, b), name


def test_a_plugged_in_source_resumes_from_its_checkpointed_random_state(
    graph: GraphDir, tmp_path: Path
) -> None:
    stores = GraphDirFeatureStore(graph), GraphDirGraphStore(graph)
    classes = graph.manifest.num_classes
    whole = fit(
        NodeTask(*stores, _splits(graph), classes),
        CONFIG,
        source=_default_like_source(graph, CONFIG),
        hooks=RunHooks(progress=False),
    )
    first = dataclasses.replace(CONFIG, epochs=1)
    fit(
        NodeTask(*stores, _splits(graph), classes),
        first,
        source=_default_like_source(graph, first),
        hooks=RunHooks(progress=False, checkpoints=tmp_path),
    )
    resumed = fit(
        NodeTask(*stores, _splits(graph), classes),
        CONFIG,
        source=_default_like_source(graph, CONFIG),
        hooks=RunHooks(progress=False, checkpoints=tmp_path, resume=True),
    )
    assert resumed.resumed_from_epoch == 1
    assert resumed.train_loss == whole.train_loss
    for a, b in zip(whole.model.state_dict().values(), resumed.model.state_dict().values()):
        assert torch.equal(a, b)
