"""argparse value types shared by the verbs: bad values fail at parse time
with argparse's one-line usage error."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer; got {text!r}")
    return value


def add_overwrite_option(parser: argparse.ArgumentParser) -> None:
    """``--overwrite``: the verb may replace an output that gnncore did not write.

    Without it, a verb replaces OUT_DIR only when OUT_DIR holds what the same kind
    of verb wrote (:func:`gnncore.store.atomic.check_output_dir`); an input, the
    current and the home directory are refused even with it.
    """
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the output even when it is a non-empty directory (or a file) that "
        "gnncore did not write; inputs and the current directory are never replaced",
    )
