"""Test helper: ``gnncore train`` that SIGKILLs itself while a mega-batch is loading.

Usage: ``python kill_during_load.py EPOCH LOAD MARKER <gnncore train arguments...>``.

The process dies in epoch ``EPOCH`` of training, in its ``LOAD``-th training
mega-batch load (1-based; from the second on, a prefetch that runs while the
previous mega-batch trains): from inside the loader thread, halfway through
reading the first partition's features, after the partitions' in-edges were
read. Before the kill it writes ``MARKER`` (JSON: the thread, epoch, load,
partitions and rows read). ``EPOCH = 0`` never kills (the run ends normally
and writes its ``--json``). ``SIGKILL`` lets no ``finally`` block, ``atexit``
hook or MLflow run end run, as with the OOM killer.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def main(argv: list[str]) -> int:
    import gnncore.outofcore.hierbatching as hb
    from gnncore.cli.main import verb_parser, write_json
    from gnncore.outofcore.store import PartitionedStore

    kill_epoch, kill_load, marker = int(argv[0]), int(argv[1]), argv[2]
    parser, module = verb_parser("train")
    args = parser.parse_args(argv[3:])

    # Written by the main thread before it submits a load, read by the loader thread.
    state: dict[str, Any] = {"epoch": 0, "training": False, "loads": 0}
    armed = threading.local()

    start_epoch = hb.HierBatchSource.start_epoch
    train_batches = hb.HierBatchSource.batches
    load_mega_batch = hb.load_mega_batch
    read_rows = PartitionedStore.read_rows

    def on_start_epoch(self: Any, epoch: int) -> None:
        state.update(epoch=epoch, loads=0)
        start_epoch(self, epoch)

    @contextmanager
    def on_batches(self: Any) -> Iterator[Any]:
        state["training"] = True
        try:
            with train_batches(self) as batches:
                yield batches
        finally:
            state["training"] = False

    def on_load(store: Any, parts: Any, *rest: Any, **kwargs: Any) -> Any:
        if state["training"]:
            state["loads"] += 1
            if state["epoch"] == kill_epoch and state["loads"] == kill_load:
                armed.parts = tuple(sorted(int(p) for p in parts))
        return load_mega_batch(store, parts, *rest, **kwargs)

    def on_read_rows(self: Any, name: str, ranges: Any, out: Any = None) -> Any:
        parts = getattr(armed, "parts", None)
        if parts is None or name != "features":
            return read_rows(self, name, ranges, out)
        (lo, hi), *_ = ranges
        half = lo + (hi - lo) // 2
        read_rows(self, name, [(lo, half)], None if out is None else out[: half - lo])
        report = {
            "thread": threading.current_thread().name,
            "epoch": state["epoch"],
            "load": state["loads"],
            "parts": list(parts),
            "rows": [lo, half, hi],
        }
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, json.dumps(report).encode())
        os.fsync(fd)
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable: SIGKILL was sent")

    hb.HierBatchSource.start_epoch = on_start_epoch  # type: ignore[method-assign]
    hb.HierBatchSource.batches = on_batches  # type: ignore[method-assign,assignment]
    hb.load_mega_batch = on_load  # type: ignore[assignment]
    PartitionedStore.read_rows = on_read_rows  # type: ignore[method-assign]

    summary = module.run(args)
    if args.json is not None:
        write_json(args.json, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
