"""HierBatching's mega-batches are sized from the whole process's budget (issue 27, the
chain beyond memory): what the process holds, the margin and the working set come off
``memory_budget`` first, and a budget that leaves no room for one partition is refused
before training, naming the minimum the process needs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gnncore.outofcore.megabatch import StaticCache
from gnncore.outofcore.store import PartitionedStore, write_partitioned_store
from gnncore.outofcore.training import (
    EXACT_ROW_COPIES,
    LOAD_SHARE,
    RESIDENT_NODE_BYTES,
    STATIC_NODE_BYTES,
    STATIC_SHARE,
    apart_bytes,
    budget_static_fraction,
    exact_rows_bytes,
    mega_batch_payload,
    reach,
    setup_bytes,
    sized_mega_batches,
    sized_parts,
    static_cache_bytes,
    static_internal_edges,
    working_bytes,
)
from gnncore.partition import partition_graph
from gnncore.synth import SynthSpec, generate_graph
from gnncore.train import NodeTrainConfig
from gnncore.usage import STAGE_MARGIN, MemoryBudgetError, current_rss_bytes

CONFIG = NodeTrainConfig(mode="hierbatching", hidden=32, fanouts=(5, 5), batch_size=128)
MIB = 1 << 20


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> PartitionedStore:
    """4,000 generated nodes x 512 features (7.8 MiB) in 8 partitions."""
    root = tmp_path_factory.mktemp("sized")
    spec = SynthSpec(num_nodes=4000, avg_degree=4, num_classes=4, num_features=512, seed=2)
    generate_graph(root / "g", spec, memory_budget=None)
    partition_graph(root / "g", root / "part", method="metis", parts=8, seed=0)
    return write_partitioned_store(root / "g", root / "part", root / "store", static_fraction=0.01)


def _need(store: PartitionedStore, n_d: int, depth: int = CONFIG.prefetch_depth) -> int:
    """What ``n_d`` partitions per mega-batch with ``depth`` mini-batches prepared
    ahead take beyond the process and the margin."""
    payload = mega_batch_payload(store, n_d, static_internal_edges(store))
    config = dataclasses.replace(CONFIG, prefetch_depth=depth)
    return max(payload + working_bytes(store, config, n_d), apart_bytes(store, config))


def test_without_a_budget_or_with_fixed_parts_nothing_is_sized(store):
    assert sized_parts(store, CONFIG) == 1  # an eighth of 8 partitions
    fixed = NodeTrainConfig(mode="hierbatching", mega_batch_parts=3, memory_budget="1KiB")
    assert sized_parts(store, fixed) == 3


def test_the_parts_are_the_most_whose_mega_batches_and_working_set_fit(store):
    # A budget with 1 MiB of room beyond what 3 partitions per mega-batch need: 3
    # (the next partition needs more than 1 MiB, RSS drifting less than that).
    assert _need(store, 4) - _need(store, 3) > 2 * MIB
    budget = current_rss_bytes() + STAGE_MARGIN + _need(store, 3) + MIB
    assert sized_parts(store, dataclasses.replace(CONFIG, memory_budget=str(budget))) == 3
    roomy = dataclasses.replace(CONFIG, memory_budget="64GiB")
    assert sized_parts(store, roomy) == store.parts


def test_a_budget_below_one_partition_is_refused_naming_the_minimum(store):
    held = current_rss_bytes()
    budget = held + STAGE_MARGIN + _need(store, 1, depth=1) // 2
    with pytest.raises(MemoryBudgetError) as refused:
        sized_parts(store, dataclasses.replace(CONFIG, memory_budget=str(budget)))
    message = str(refused.value)
    assert "hierbatching needs" in message and "this process holds" in message
    assert "working set" in message and "raise the budget to at least" in message
    minimum = int(message.split("raise the budget to at least ")[1].split("(")[1].split()[0])
    # The minimum is what the process holds, the margin and one partition's need
    # with one mini-batch prepared ahead.
    assert minimum == pytest.approx(held + STAGE_MARGIN + _need(store, 1, depth=1), abs=2 * MIB)
    assert minimum > budget


def test_reach_and_the_working_set_grow_with_the_mega_batch(store):
    shares = [reach(store, n_d) for n_d in range(1, store.parts + 1)]
    assert shares == sorted(shares) and 0 < shares[0] < 1 and shares[-1] == 1.0
    # Fewer sources held, fewer sampled nodes: the working set grows with N_d.
    assert working_bytes(store, CONFIG, 1) < working_bytes(store, CONFIG, store.parts)


@pytest.fixture(scope="module")
def wide_store(tmp_path_factory: pytest.TempPathFactory) -> PartitionedStore:
    """16,000 generated nodes x 512 features (31 MiB) in 4 partitions: a
    mega-batch's mini-batches are several MiB each."""
    root = tmp_path_factory.mktemp("wide")
    spec = SynthSpec(num_nodes=16000, avg_degree=4, num_classes=4, num_features=512, seed=3)
    generate_graph(root / "g", spec, memory_budget=None)
    partition_graph(root / "g", root / "part", method="metis", parts=4, seed=0)
    return write_partitioned_store(root / "g", root / "part", root / "store", static_fraction=0.01)


def test_fewer_batches_are_prepared_ahead_before_a_tight_budget_is_refused(wide_store):
    # Room for one partition with 2 batches prepared ahead, not with 3 (the
    # default is 4): the same training with a shallower prefetch, not a refusal.
    config = NodeTrainConfig(
        mode="hierbatching", hidden=32, fanouts=(5, 5), batch_size=1024,
        eval_fanouts=(2, 2), eval_batch_size=64,
    )  # fmt: skip
    assert config.prefetch_depth == 4

    def need(n_d: int, depth: int) -> int:
        payload = mega_batch_payload(wide_store, n_d, static_internal_edges(wide_store))
        sized = dataclasses.replace(config, prefetch_depth=depth)
        return max(payload + working_bytes(wide_store, sized, n_d), apart_bytes(wide_store, sized))

    assert need(1, 3) - need(1, 2) > 2 * MIB and need(2, 2) - need(1, 2) > 2 * MIB
    budget = current_rss_bytes() + STAGE_MARGIN + need(1, 2) + MIB
    tight = dataclasses.replace(config, memory_budget=str(budget))
    assert sized_mega_batches(wide_store, tight) == (1, 2)
    roomy = dataclasses.replace(config, memory_budget="64GiB")
    assert sized_mega_batches(wide_store, roomy) == (wide_store.parts, 4)


def test_a_stores_static_set_takes_an_eighth_of_the_budget_at_most():
    # Heavy-tailed in-degrees: 0.1% of 1M nodes hold 100,000 in-edges each (800 KB
    # of ids), the rest 20. Wanted: 1% static. An eighth of 2 GiB holds about 335 hubs'
    # in-lists and feature rows (1 KiB), not the 10,000 that 1% would take.
    degree = np.full(1_000_000, 20, dtype=np.int64)
    degree[:1000] = 100_000
    budget = 2 << 30
    fraction = budget_static_fraction(0.01, degree, 1024, budget)
    count = round(fraction * len(degree))
    assert 300 < count < 340
    assert count * (8 * 100_000 + 1024 + STATIC_NODE_BYTES) <= STATIC_SHARE * budget
    assert (count + 2) * (8 * 100_000 + 1024 + STATIC_NODE_BYTES) > STATIC_SHARE * budget
    assert budget_static_fraction(0.01, degree, 1024, 64 << 30) == 0.01  # room: as wanted
    assert budget_static_fraction(0.01, degree, 1024, None) == 0.01
    # The r_s·data bound it replaces allowed the whole 1% (1,000 hubs, 800 MB of ids).
    data = 1_000_000 * 1024 + 16 * int(degree.sum())
    assert STATIC_SHARE * budget * LOAD_SHARE / (2 * data) > 0.01


def test_the_static_cache_is_counted_at_its_real_size(store):
    static = StaticCache.read(store)
    assert static_cache_bytes(store) == static.nbytes
    internal = static_internal_edges(store, chunk=5)
    static_set = set(static.nodes.tolist())
    assert internal == sum(int(v) in static_set for v in static.indices.tolist())
    # The payload holds the cache once and grows with the partitions per mega-batch.
    one, two = (mega_batch_payload(store, n_d, internal) for n_d in (1, 2))
    assert static.nbytes < one < two


def test_exact_evaluation_counts_its_row_lists(store):
    # Layer-wise over the whole graph: the joint pass's rows, one int64 per node
    # and layer, beside the mega-batches; validation's, test's and their union
    # while it is set up, before any mega-batch loads.
    assert CONFIG.eval_fanouts is None and CONFIG.num_layers == 2
    rows = exact_rows_bytes(store.num_nodes, 2)
    assert rows == 8 * store.num_nodes * 2
    setup = setup_bytes(store, CONFIG)
    assert setup == static_cache_bytes(store) + RESIDENT_NODE_BYTES * store.num_nodes + (
        EXACT_ROW_COPIES * rows
    )
    sampled = dataclasses.replace(CONFIG, eval_fanouts=(5, 5))
    assert working_bytes(store, CONFIG, 1) >= rows
    # Exact evaluation runs between epochs, no mega-batch in memory: beside the
    # static cache, not stacked on the mega-batches (sampled evaluation is).
    assert apart_bytes(store, CONFIG) > setup
    assert apart_bytes(store, sampled) == setup_bytes(store, sampled) < setup
