"""Test helper: ``gnncore train`` that SIGKILLs itself right after checkpoint N.

Usage: ``python kill_after_checkpoint.py N <gnncore train arguments...>``.
``N = 0`` never kills (the run ends normally and writes its ``--json``); such a
run can go in the test's own process (:func:`run_in_process`). The
kill comes from the library's ``on_epoch_end`` callback, i.e. after epoch N's
metrics are logged and its checkpoint file is in place; no ``finally`` block,
``atexit`` hook or MLflow run end gets to run, as with the OOM killer.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from gnncore.cli.main import verb_parser, write_json

    kill_after = int(argv[0])
    parser, module = verb_parser("train")
    args = parser.parse_args(argv[1:])

    def on_epoch_end(epoch: int, checkpoint: Path | None) -> None:
        if epoch == kill_after:
            assert checkpoint is not None and checkpoint.is_file()
            os.kill(os.getpid(), signal.SIGKILL)

    summary = module.run(args, on_epoch_end=on_epoch_end)
    if args.json is not None:
        write_json(args.json, summary)
    return 0


def run_in_process(argv: list[str]) -> int:
    """``main(argv)`` with ``N = 0`` in the calling (test) process, at one intra-op
    thread as the subprocesses run, so the arithmetic is the same
    (:func:`conftest.one_intra_op_thread`)."""
    from conftest import one_intra_op_thread

    assert argv[0] == "0", "a run killed with SIGKILL needs a process of its own"
    with one_intra_op_thread():
        return main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
