"""HierBatching mega-batches against a slow reference, and training through them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import planted_graph
from gnncore.errors import InputError
from gnncore.outofcore.hierbatching import HierBatchSource
from gnncore.outofcore.megabatch import (
    StaticCache,
    data_bytes,
    load_mega_batch,
    mega_batch_parts,
)
from gnncore.outofcore.store import write_partitioned_store
from gnncore.outofcore.training import hierbatching_batches
from gnncore.partition import partition_graph
from gnncore.sampler import build_sampler
from gnncore.store import GraphDir
from gnncore.train import NodeTask, NodeTrainConfig, RunHooks, fit


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("hb")
    graph = GraphDir.open(planted_graph(root / "g", num_nodes=600, degree=10))
    partition_graph(graph.path, root / "part", method="metis", parts=8, seed=0)
    store = write_partitioned_store(graph.path, root / "part", root / "store", static_fraction=0.05)
    return graph, store


def _store_edges(graph, store) -> set[tuple[int, int]]:
    node_map = np.asarray(store.array("node_map"))
    indptr, indices = np.asarray(graph.indptr), np.asarray(graph.indices)
    dst = np.repeat(np.arange(graph.num_nodes), np.diff(indptr))
    return set(zip(node_map[indices].tolist(), node_map[dst].tolist(), strict=True))


@pytest.mark.parametrize("parts", [(0,), (1, 5), (2, 3, 7)])
def test_mega_batch_is_the_subgraph_induced_on_t_and_its_static_neighbours(built, parts):
    graph, store = built
    static = StaticCache.read(store)
    mega = load_mega_batch(store, parts, static)
    offsets = store.offsets
    t_nodes = {v for p in parts for v in range(offsets[p], offsets[p + 1])}
    edges = _store_edges(graph, store)
    static_set = set(np.asarray(store.array("static_nodes")).tolist())
    # The slow way: N(T) ∩ static from the whole edge set, then every edge inside.
    neighbours = {u for (u, v) in edges if v in t_nodes and u in static_set} - t_nodes
    members = t_nodes | neighbours
    assert set(mega.nodes.tolist()) == members
    assert len(mega.nodes) == len(members)  # no node twice
    expected = {(u, v) for (u, v) in edges if u in members and v in members}
    dst = np.repeat(np.arange(len(mega.nodes)), np.diff(mega.indptr))
    got = list(zip(mega.nodes[mega.indices].tolist(), mega.nodes[dst].tolist(), strict=True))
    assert len(got) == len(set(got))
    assert set(got) == expected
    x = np.asarray(store.array("features"))
    assert np.array_equal(mega.x, x[mega.nodes])
    assert mega.local_ids(mega.nodes).tolist() == list(range(len(mega.nodes)))


@pytest.mark.parametrize("chunk_edges", [1, 7])
def test_static_in_lists_filtered_in_chunks_give_the_same_mega_batch(built, chunk_edges):
    """The static neighbours' in-lists are expanded a chunk at a time (bounded
    memory on heavy-tailed graphs): any chunk gives the same ``G_cache``."""
    _, store = built
    static = StaticCache.read(store)
    assert len(static.indices) > 50  # many chunks of 1 or 7 entries
    whole = load_mega_batch(store, (1, 5), static)
    chunked = load_mega_batch(store, (1, 5), static, chunk_edges=chunk_edges)
    assert len(whole.nodes) > 2 * (store.offsets[2] - store.offsets[1])  # static neighbours
    for name in ("nodes", "indptr", "indices", "x"):
        assert np.array_equal(getattr(chunked, name), getattr(whole, name)), name


def test_budget_sets_the_partitions_per_mega_batch(built):
    _, store = built
    data = data_bytes(store)
    r_s = store.num_static / store.num_nodes
    for n_d in (1, 2, 4, 8):
        budget = int(2 * (r_s + n_d / store.parts) * data) + 1
        assert mega_batch_parts(store, budget) == n_d
    assert mega_batch_parts(store, None, parts=3) == 3
    assert mega_batch_parts(store, 10**12) == store.parts
    with pytest.raises(InputError, match="cannot hold the static cache"):
        mega_batch_parts(store, int(2 * r_s * data))


def _source(store, n_d=3, passes=2, seed=0, prefetch=True, schedule="groups", batch_workers=0):
    return HierBatchSource(
        store,
        n_d,
        passes,
        batch_size=16,
        make_sampler=lambda g, s: build_sampler("dense", g, (5, 5), seed=s),
        generator=torch.Generator().manual_seed(seed),
        prefetch=prefetch,
        schedule=schedule,
        batch_workers=batch_workers,
    )


def _epoch(source, epoch=1):
    source.start_epoch(epoch)
    with source.batches() as batches:
        seen = [(b.n_id[: b.batch_size].clone(), b.y[: b.batch_size].clone()) for b in batches]
    return seen


def test_an_epoch_reads_each_partition_once_and_trains_each_node_once_per_pass(built):
    _, store = built
    source = _source(store, n_d=3, passes=2)
    seen = _epoch(source)
    assert source.stats.steps == 3  # ceil(8 / 3)
    assert source.stats.partitions_read == store.parts
    parts_seen = sorted(p for step in source._plan for p in step.parts)
    assert parts_seen == list(range(store.parts))
    labels = np.asarray(store.array("labels"))
    train = np.asarray(store.array("train_idx"))
    # Seeds are local ids; count labels instead: each training node twice per epoch.
    counts = np.bincount(torch.cat([y for _, y in seen]).numpy(), minlength=labels.max() + 1)
    assert counts.tolist() == (2 * np.bincount(labels[train], minlength=labels.max() + 1)).tolist()
    assert sum(len(y) for _, y in seen) == 2 * len(train)
    assert len(seen) <= len(source)
    expected_bytes = data_bytes(store)  # every partition's features and in-edges once
    assert source.stats.bytes_read == expected_bytes


def test_loading_with_partitions_in_memory_equals_reading_them(built):
    _, store = built
    static = StaticCache.read(store)
    before = load_mega_batch(store, (1, 4, 6), static, keep_pieces=True)
    after = load_mega_batch(store, (0, 4, 6), static, resident=before.pieces)
    fresh = load_mega_batch(store, (0, 4, 6), static)
    assert after.partitions_read == 1 and fresh.partitions_read == 3
    for name in ("nodes", "indptr", "indices", "x"):
        assert np.array_equal(getattr(after, name), getattr(fresh, name))
    part0 = store.offsets[1] - store.offsets[0]
    features = part0 * store.info["num_features"] * 4
    in_edges = 16 * (store.in_edge_range(0)[1] - store.in_edge_range(0)[0])
    assert after.nbytes_read == features + in_edges


@pytest.mark.parametrize("passes", [1, 2])
def test_a_buffer_epoch_swaps_each_other_partition_in_once(built, passes):
    _, store = built
    c = 3
    source = _source(store, n_d=c, passes=passes, schedule="buffer")
    seen = _epoch(source)
    plan = source._plan
    assert len(plan) == store.parts - c + 1
    assert all(len(step.parts) == c for step in plan)
    for before, after in zip(plan, plan[1:], strict=False):
        assert len(set(after.parts) - set(before.parts)) == 1  # one swap per state
    assert sorted(p for step in plan for p in step.targets) == list(range(store.parts))
    assert source.stats.swaps == store.parts - c  # Alg. 7: each partition read once
    assert source.stats.partitions_read == store.parts
    assert source.stats.bytes_read == data_bytes(store)
    train = np.asarray(store.array("train_idx"))
    assert sum(len(y) for _, y in seen) == passes * len(train)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("schedule", ["groups", "buffer"])
def test_a_finished_step_is_freed_without_the_cyclic_collector(built, schedule, workers):
    """Reference counting alone frees each step's loaders and cached subgraph (the
    source runs no per-step collection): with the collector off, nothing of an
    epoch is left once it ends, and at most two mega-batches live during it."""
    import gc

    from torch_geometric.loader import NodeLoader

    from gnncore.outofcore.megabatch import MegaBatch

    def alive(kind: type, generation: int | None = None) -> int:
        return sum(isinstance(o, kind) for o in gc.get_objects(generation))

    def alive_new(kind: type) -> int:
        # With the collector off after gc.collect(), every object made since is in
        # generation 0 (nothing promotes it): the epoch's mega-batches are all there,
        # without walking the ~400k objects of the imports at every batch.
        return alive(kind, 0)

    _, store = built
    source = _source(store, n_d=2, passes=1, schedule=schedule, batch_workers=workers)
    gc.collect()
    gc.disable()
    try:
        before = alive(NodeLoader), alive(MegaBatch)
        source.start_epoch(1)
        peak = 0
        with source.batches() as batches:
            for _ in batches:
                peak = max(peak, alive_new(MegaBatch))
                # Sampled in the step's threads, the batch says how long it took.
                assert (batches.last_timing is not None) == (workers > 0)
        assert (alive(NodeLoader), alive(MegaBatch)) == before == (0, 0)
        assert 1 <= peak <= 2  # the step training and the one prefetched
    finally:
        gc.enable()


@pytest.mark.parametrize("schedule", ["groups", "buffer"])
def test_prefetch_draws_the_same_batches_and_epochs_differ(built, schedule):
    _, store = built
    ahead = _source(store, prefetch=True, schedule=schedule)
    inline = _source(store, prefetch=False, schedule=schedule)
    threaded = _source(store, prefetch=True, schedule=schedule, batch_workers=2)
    first, second, third = _epoch(ahead, 1), _epoch(inline, 1), _epoch(threaded, 1)
    assert len(first) == len(second) == len(third)
    for (a, ya), (b, yb), (c, yc) in zip(first, second, third, strict=True):
        assert torch.equal(a, b) and torch.equal(ya, yb)
        assert torch.equal(a, c) and torch.equal(ya, yc)  # sampled in threads: the same
    assert ahead._plan == inline._plan
    again = _epoch(ahead, 2)
    same = [torch.equal(y, z) for (_, y), (_, z) in zip(first, again, strict=False)]
    assert not all(same)  # a new grouping and shuffle each epoch


def test_training_through_mega_batches_learns_and_resumes_exactly(built, tmp_path):
    graph, store = built
    config = NodeTrainConfig(
        model="sage",
        epochs=4,
        hidden=32,
        fanouts=(5, 5),
        batch_size=32,
        mode="hierbatching",
        mega_batch_parts=3,
        patience=0,
        device="cpu",
    )
    lines: list[str] = []

    def run(checkpoints=None, resume=False, epochs=4):
        c = NodeTrainConfig(**{**config.to_dict(), "epochs": epochs})
        source, evals = hierbatching_batches(store, c, log=lines.append)
        return fit(
            NodeTask(
                source.feature_store,
                None,
                (store.array("train_idx"), store.array("val_idx"), store.array("test_idx")),
                int(store.info["num_classes"]),
                eval_batches=evals,
            ),
            c,
            source=source,
            hooks=RunHooks(progress=False, checkpoints=checkpoints, resume=resume),
        )

    full = run()
    assert full.test_accuracy > 0.8  # 4 planted communities: chance is 0.25
    assert any("train mega-batch 1: partitions" in line for line in lines)
    run(tmp_path / "ckpt", epochs=2)
    resumed = run(tmp_path / "ckpt", resume=True)
    for a, b in zip(full.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert resumed.test_accuracy == full.test_accuracy


def test_reads_bypass_the_page_cache_under_a_budget_or_when_the_data_cannot_stay_cached(
    built, monkeypatch
):
    import gnncore.outofcore.training as training

    _, store = built
    need = data_bytes(store)
    monkeypatch.setattr(training, "memory_available", lambda: 100 * need)
    assert training.direct_reads(store, None) is False  # fits: later epochs hit the cache
    assert training.direct_reads(store, 10 * need) is True  # a budget: no cache on top
    monkeypatch.setattr(training, "memory_available", lambda: need)
    assert training.direct_reads(store, None) is True  # more than half the memory
    config = NodeTrainConfig(mode="hierbatching", mega_batch_parts=2, fanouts=(5, 5))
    source, _ = hierbatching_batches(store, config)
    assert source.store.direct_reads is True
