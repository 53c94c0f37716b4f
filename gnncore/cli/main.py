"""Entry point of the ``gnncore`` console script.

Each verb lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> dict``; only the chosen verb's module is imported, so
``gnncore --help`` stays fast. Every verb takes ``--json PATH`` and writes its
summary object there. Errors exit non-zero with one line naming the file, the
line or row, and the problem.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

VERBS: dict[str, str] = {
    "synth": "generate the built-in planted-partition graph",
    "ingest": "ingest an edge list / OGB / Planetoid / KG dataset into a graph directory",
    "validate": "check a graph directory against its manifest (sizes, bounds, checksums)",
    "partition": "partition a graph directory",
    "plan": "replication (HDR) and feature placement plans of a graph",
    "store": "lay a graph out for out-of-core training (partitions, edge buckets, static set)",
    "ranks": "write per-rank data for distributed training (one folder per partition)",
    "train": "train a GNN on a graph directory and log it to MLflow",
    "predict": "write a trained model's prediction for every node as Parquet",
    "bench": "benchmarks: `bench partition` runs partitioners side by side",
}


#: Verbs whose NumPy work is element-wise (no BLAS): their process starts
#: OpenBLAS without its thread pool, whose threads spin for about 0.1 CPU s
#: after NumPy's import, on a core the verb's own threads want (on 2 cores:
#: the 20M-edge ingestion's startup and parse, docs/BENCHMARKS.md).
SERIAL_BLAS_VERBS = frozenset({"ingest", "validate"})


def serial_blas(verb: str) -> None:
    """Ask OpenBLAS for one thread when ``verb`` needs none and NumPy is not
    imported yet (a fresh ``gnncore`` process; an ``OPENBLAS_NUM_THREADS`` the
    user set wins)."""
    if verb in SERIAL_BLAS_VERBS and "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gnncore",
        description="From a raw edge list to a trained graph neural network, stage by stage.",
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for verb, help_text in VERBS.items():
        sub.add_parser(verb, help=help_text, add_help=False)
    return parser


def json_option() -> argparse.ArgumentParser:
    """A parent parser holding ``--json PATH`` (verbs with subcommands give it to each)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="PATH",
        help="write the summary object to PATH as JSON",
    )
    return parent


def verb_parser(verb: str) -> tuple[argparse.ArgumentParser, Any]:
    module = importlib.import_module(f"gnncore.cli.{verb}")
    has_subcommands = getattr(module, "HAS_SUBCOMMANDS", False)
    parser = argparse.ArgumentParser(
        prog=f"gnncore {verb}",
        description=VERBS[verb],
        parents=[] if has_subcommands else [json_option()],
    )
    module.add_arguments(parser)
    return parser, module


def write_json(path: Path, summary: dict[str, Any]) -> None:
    """Write ``summary`` atomically (temp file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as fh:
        json.dump(summary, fh, indent=2, sort_keys=True, default=str)
        fh.write("\n")
    os.replace(tmp, path)


@contextmanager
def one_line_warnings(verb: str) -> Iterator[None]:
    """Within the block, a warning prints as one line on stderr,
    ``gnncore VERB: warning: Category: message``, instead of Python's two lines
    (the message, then the source line that raised it). Only the format is
    replaced, so ``warnings.catch_warnings(record=True)`` still records them."""

    def one_line(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        line: str | None = None,
    ) -> str:
        text = " ".join(str(message).split("\n"))
        return f"gnncore {verb}: warning: {category.__name__}: {text}\n"

    previous = warnings.formatwarning
    warnings.formatwarning = one_line
    try:
        yield
    finally:
        warnings.formatwarning = previous


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in VERBS:
        build_parser().parse_args(argv)  # prints usage / errors and exits
        return 2
    serial_blas(argv[0])
    parser, module = verb_parser(argv[0])
    args = parser.parse_args(argv[1:])
    from gnncore.errors import GnnCoreError
    from gnncore.store.atomic import overwrite_allowed

    try:
        with (
            one_line_warnings(argv[0]),
            overwrite_allowed(bool(getattr(args, "overwrite", False))),
        ):
            summary = module.run(args)
    except (
        GnnCoreError,
        FileNotFoundError,
        NotADirectoryError,
        IsADirectoryError,
        PermissionError,
    ) as exc:
        print(f"gnncore {argv[0]}: error: {exc}", file=sys.stderr)
        return 1
    if args.json is not None:
        write_json(args.json, summary)
    # A verb may shorten what it prints (the JSON file keeps everything).
    brief = getattr(module, "brief", None)
    print(json.dumps(brief(summary) if brief else summary, sort_keys=True, default=str))
    # A verb that ran to the end but whose outcome failed (a benchmark's run) says so.
    return 1 if summary.get("failed") is True else 0


if __name__ == "__main__":
    sys.exit(main())
