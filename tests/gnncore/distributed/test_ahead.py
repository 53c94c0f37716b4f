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
        thread = batches._thread
    assert not thread.is_alive()
    with pytest.raises(ValueError, match="depth=0"):
        AheadBatches(lambda: iter(()), depth=0)
