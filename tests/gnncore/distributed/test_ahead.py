"""AheadBatches: a generator run in a thread ahead of its consumer (no ranks needed)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator

import pytest

from gnncore.distributed.source.ahead import AheadBatches


def test_yields_every_item_in_order_and_stays_at_most_depth_ahead() -> None:
    made: list[int] = []

    def make() -> Iterator[int]:
        for i in range(20):
            made.append(i)
            yield i

    with AheadBatches(make, depth=2) as batches:
        first = next(batches)
        threading.Event().wait(0.2)  # let the thread run as far as it may
        assert first == 0 and len(made) <= 1 + 2 + 1  # taken + queued + one in hand
        rest = list(batches)
    assert [first, *rest] == list(range(20)) and made == list(range(20))


def test_what_the_generator_raises_is_raised_at_its_batch() -> None:
    def make() -> Iterator[int]:
        yield 0
        yield 1
        raise ValueError("exchange failed")

    with AheadBatches(make, depth=4) as batches:
        assert next(batches) == 0 and next(batches) == 1
        with pytest.raises(ValueError, match="exchange failed") as raised:
            next(batches)
    assert any("next distributed batches" in note for note in raised.value.__notes__)


def test_leaving_early_stops_the_thread() -> None:
    with AheadBatches(lambda: iter(itertools.count()), depth=3) as batches:
        assert [next(batches) for _ in range(5)] == [0, 1, 2, 3, 4]
        (thread,) = batches._threads
    assert not thread.is_alive()
    with pytest.raises(ValueError, match="depth=0"):
        AheadBatches(lambda: iter(()), depth=0)


def lane_of(items: list[int], lane: int, lanes: int, made: list[int]) -> Iterator[int]:
    for item in items[lane::lanes]:
        made.append(item)
        yield item


def test_lanes_give_the_plan_order_back_with_uneven_shares() -> None:
    items = list(range(11))  # 3 lanes of 4, 4 and 3 items
    made: list[int] = []
    lanes = [lambda w=w: lane_of(items, w, 3, made) for w in range(3)]
    with AheadBatches(lanes, depth=3) as batches:
        assert list(batches) == items
        threads = batches._threads
    assert sorted(made) == items and len(threads) == 3
    assert not any(thread.is_alive() for thread in threads)


def test_lanes_run_at_once() -> None:
    # Each lane waits for the other at a barrier: one thread making every batch
    # in turn would never pass it.
    barrier = threading.Barrier(2, timeout=5)

    def lane(values: tuple[int, int]) -> Iterator[int]:
        for value in values:
            barrier.wait()
            yield value

    with AheadBatches([lambda: lane((0, 2)), lambda: lane((1, 3))], depth=2) as batches:
        assert list(batches) == [0, 1, 2, 3]


def test_a_failing_lane_is_raised_at_its_turn() -> None:
    def good() -> Iterator[int]:
        yield from (0, 2, 4)

    def bad() -> Iterator[int]:
        yield 1
        raise RuntimeError("lane 1 broke")

    with AheadBatches([good, bad], depth=4) as batches:
        assert [next(batches) for _ in range(3)] == [0, 1, 2]
        with pytest.raises(RuntimeError, match="lane 1 broke"):
            next(batches)
    with pytest.raises(ValueError, match="at least one lane"):
        AheadBatches([], depth=1)
