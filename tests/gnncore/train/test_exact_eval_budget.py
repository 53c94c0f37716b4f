"""Exact evaluation is sized from the budget training got (issue 27, the chain beyond
memory): ``memory_budget``, the whole process's, decides whether the layer-wise
evaluation's hidden layers stay in memory or spill to disk, not the memory available."""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable

import pytest

from gnncore.heap import trim_heap
from gnncore.modes import train_graph_dir
from gnncore.store import GraphDir
from gnncore.synth import SynthSpec, generate_graph
from gnncore.train import NodeTrainConfig
from gnncore.train.node.exact import MIN_EVALUATION_ROOM, EvaluationCost, evaluation_room
from gnncore.usage import STAGE_MARGIN, held_bytes

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*torch.jit.script.* is deprecated:DeprecationWarning"
)

HIDDEN = 256
CODE_PAGE_SLACK = 1 << 20  # code pages the kernel may reclaim between readings
CONFIG = NodeTrainConfig(
    hidden=HIDDEN, fanouts=(5, 5), epochs=1, batch_size=256, device="cpu", seed=2, mode="in_memory"
)


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> GraphDir:
    """3,000 generated nodes: the held hidden layer is 3,000 x 256 float32 (2.9 MiB)."""
    out = tmp_path_factory.mktemp("eval-budget") / "g"
    spec = SynthSpec(num_nodes=3000, avg_degree=8, num_classes=5, num_features=24, seed=5)
    generate_graph(out, spec, memory_budget=None)
    return GraphDir.open(out)


def _room_left(budget: int, measure: Callable[[], int | None]) -> tuple[int, int, int]:
    """``(room, least, most)``: the room ``measure`` finds under ``budget``, and
    the bounds what this process held before and after the call give it. The
    held bytes move while the call runs (the collector, the allocator handing
    pages back), so the test reads them on both sides of it, not once before.
    The held bytes count the resident pages of shared libraries' code, which the
    kernel drops and faults back in on its own under other tests' load: a page
    less inside the call than on both sides of it was seen on a fresh clone's
    suite, so the upper bound allows ``CODE_PAGE_SLACK`` of that."""
    before = held_bytes()
    room = measure()
    after = held_bytes()
    assert room is not None
    room_of = budget - STAGE_MARGIN
    least = room_of - max(before, after) - (8 << 20)
    return room, least, room_of - min(before, after) + CODE_PAGE_SLACK


def test_the_room_is_what_the_budget_leaves_the_process():
    room, source = evaluation_room(CONFIG)
    assert source == "the memory available" and room is not None
    # Settled first: garbage of earlier tests freed while the room is measured
    # would move what this process holds between the readings.
    gc.collect()
    trim_heap()
    # What the process holds (not the pages of mapped files it read) comes off.
    budget = held_bytes() + STAGE_MARGIN + (80 << 20)
    config = dataclasses.replace(CONFIG, memory_budget=str(budget))
    sources: list[str] = []

    def measure() -> int | None:
        found, source = evaluation_room(config)
        sources.append(source)
        return found

    room, least, most = _room_left(budget, measure)
    assert least <= room <= most and most - least < 16 << 20
    assert "what the memory budget leaves" in sources[0] and "this process holds" in sources[0]
    # A pass measures it again, never below the least room it works in (a few
    # targets at a time is hours); the hidden layers spill below twice their size.
    cost = EvaluationCost(1, 2, 0, 0, budget=budget)
    room, least, most = _room_left(budget, cost.room_now)
    assert least <= room <= most
    assert EvaluationCost(1, 2, 0, 0, budget=1 << 20).room_now() == MIN_EVALUATION_ROOM
    assert EvaluationCost(1, 2, 0, 5 << 20).room_now() == 5 << 20  # no budget: as set up


def test_a_budget_too_small_for_the_hidden_layer_spills_with_identical_results(graph):
    layer_bytes = graph.manifest.num_nodes * HIDDEN * 4
    roomy = train_graph_dir(graph, dataclasses.replace(CONFIG, memory_budget="64GiB"))
    assert all(way.startswith("layer-wise (cost") for way in roomy.evaluation.values())
    # What this process holds, the margin and the layer itself: under half of the room
    # left when the evaluation is set up is less than the layer, so it goes to disk.
    tight = held_bytes() + STAGE_MARGIN + layer_bytes
    spilled = train_graph_dir(graph, dataclasses.replace(CONFIG, memory_budget=str(tight)))
    assert spilled.evaluation and all(
        way.startswith("layer-wise, hidden layers on disk") and "memory budget leaves" in way
        for way in spilled.evaluation.values()
    )
    assert spilled.train_loss == roomy.train_loss
    assert spilled.val_accuracy == roomy.val_accuracy
    assert spilled.test_accuracy == roomy.test_accuracy
