"""The command reference (docs/CLI.md), made from the argparse definitions so
it cannot drift from them: every verb's and subcommand's ``--help``.

    python -m gnncore.cli.reference > docs/CLI.md
    python -m gnncore.cli.reference --check docs/CLI.md    # exit 1 when stale
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gnncore.cli.main import VERBS, build_parser, verb_parser

#: Help is wrapped at this width whatever the terminal, so the file is stable.
WIDTH = 100
COMMAND = "python -m gnncore.cli.reference > docs/CLI.md"


@contextmanager
def _fixed_width() -> Iterator[None]:
    """argparse wraps at ``$COLUMNS``; pin it while the help is formatted."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(WIDTH)
    try:
        yield
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommand parsers of ``parser`` by name (empty for a plain verb)."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:  # argparse keeps its actions here, no public accessor
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def _section(level: str, title: str, parser: argparse.ArgumentParser) -> list[str]:
    return [f"{level} `{title}`", "", "```text", parser.format_help().rstrip(), "```", ""]


def reference() -> str:
    """docs/CLI.md: the overview, then each verb's help and its subcommands'."""
    with _fixed_width():
        lines = [
            "# Command reference",
            "",
            "Every verb of the `gnncore` command with its options, as `--help` prints",
            f"them. Generated from the argparse definitions (`{COMMAND}`);",
            "`tests/gnncore/test_cli_reference.py` fails when this file is stale.",
            'README.md\'s "Command line" section shows the common invocations.',
            "",
            "| verb | what it does |",
            "|---|---|",
            *(f"| [`{verb}`](#gnncore-{verb}) | {text} |" for verb, text in VERBS.items()),
            "",
            *_section("##", "gnncore", build_parser()),
        ]
        for verb in VERBS:
            parser, _ = verb_parser(verb)
            lines += _section("##", f"gnncore {verb}", parser)
            for name, sub in _subcommands(parser).items():
                lines += _section("###", f"gnncore {verb} {name}", sub)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gnncore.cli.reference")
    parser.add_argument("--check", type=Path, metavar="PATH", help="exit 1 if PATH is stale")
    args = parser.parse_args(argv)
    text = reference()
    if args.check is None:
        sys.stdout.write(text)
        return 0
    if args.check.read_text(encoding="utf-8") != text:
        print(f"{args.check} is stale: run `{COMMAND}`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
