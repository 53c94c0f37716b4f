"""HierBatching's mega-batches are sized from the whole process's budget (issue 27, the
chain beyond memory): what the process holds, the margin and the working set come off
``memory_budget`` first, and a budget that leaves no room for one partition is refused
before training, naming the minimum the process needs."""

from __future__ import annotations

import dataclasses

import pytest

from gnncore.outofcore.megabatch import data_bytes
from gnncore.outofcore.store import PartitionedStore, write_partitioned_store
from gnncore.outofcore.training import LOAD_SHARE, reach, sized_parts, working_bytes
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


def _need(store: PartitionedStore, n_d: int) -> int:
    """What ``n_d`` partitions per mega-batch take beyond the process and the margin."""
    r_s = store.num_static / store.num_nodes
    payload = int(2 * (r_s + n_d / store.parts) * data_bytes(store) / LOAD_SHARE)
    return payload + working_bytes(store, CONFIG, n_d)


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
    budget = held + STAGE_MARGIN + _need(store, 1) // 2
    with pytest.raises(MemoryBudgetError) as refused:
        sized_parts(store, dataclasses.replace(CONFIG, memory_budget=str(budget)))
    message = str(refused.value)
    assert "hierbatching needs" in message and "this process holds" in message
    assert "working set" in message and "raise the budget to at least" in message
    minimum = int(message.split("raise the budget to at least ")[1].split("(")[1].split()[0])
    # The minimum is what the process holds, the margin and one partition's need.
    assert minimum == pytest.approx(held + STAGE_MARGIN + _need(store, 1), abs=2 * MIB)
    assert minimum > budget


def test_reach_and_the_working_set_grow_with_the_mega_batch(store):
    shares = [reach(store, n_d) for n_d in range(1, store.parts + 1)]
    assert shares == sorted(shares) and 0 < shares[0] < 1 and shares[-1] == 1.0
    # Fewer sources held, fewer sampled nodes: the working set grows with N_d.
    assert working_bytes(store, CONFIG, 1) < working_bytes(store, CONFIG, store.parts)
