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
    """``main(argv)`` with ``N = 0`` in the calling (test) process, with one intra-op
    thread as the subprocesses run (``OMP_NUM_THREADS=1``), so the arithmetic is the
    same: a run that is not killed needs no interpreter of its own, which would
    import torch, PyG and MLflow again (about 9 s CPU)."""
    import torch

    assert argv[0] == "0", "a run killed with SIGKILL needs a process of its own"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return main(argv)
    finally:
        torch.set_num_threads(threads)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
