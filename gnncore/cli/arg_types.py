"""argparse value types shared by the verbs: bad values fail at parse time
with argparse's one-line usage error."""

from __future__ import annotations

import argparse
from typing import Any

from gnncore.sizes import parse_size


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer; got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0; got {text!r}")
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


def memory_budget(text: str) -> int | str | None:
    """``--memory-budget``: ``auto`` (kept as ``"auto"``: the stage resolves it
    against what this process may take), ``none`` (``None``: unbounded) or a size
    (``1GiB``, ``512MiB``, bytes) as a positive ``int``."""
    if text in ("auto", "none"):
        return None if text == "none" else text
    try:
        value = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a memory budget must be positive; got {text!r}")
    return value


def add_memory_budget_option(
    parser: argparse.ArgumentParser, what: str, default: str | None = "auto"
) -> None:
    """``--memory-budget {auto,none,SIZE}``, one spelling for every verb; ``what``
    says what the verb sizes from it."""
    shown = "none" if default is None else default
    parser.add_argument(
        "--memory-budget",
        type=memory_budget,
        default=memory_budget(shown),
        metavar="{auto,none,SIZE}",
        help=f"{what} (default: {shown})",
    )


def with_memory_figures(summary: dict[str, Any], budget: int | None) -> dict[str, Any]:
    """``summary`` with the figures every budgeted verb prints: ``memory_budget_bytes``
    (the budget the stage ran under, ``None``: unbounded) and ``peak_rss_bytes``
    (this process's peak), each kept where the stage's own summary has it, and
    ``peak_rss_of_budget`` (the peak as a fraction of the budget; above 1 the
    process went past it) when there is a budget (:func:`gnncore.usage.budget_figures`
    of the two kept; the summary's own ratio wins too)."""
    from gnncore.usage import budget_figures, peak_rss_bytes

    out = {"memory_budget_bytes": budget, "peak_rss_bytes": peak_rss_bytes(), **summary}
    figures = budget_figures(out["peak_rss_bytes"], out["memory_budget_bytes"])
    if "peak_rss_of_budget" in figures:
        out.setdefault("peak_rss_of_budget", figures["peak_rss_of_budget"])
    return out
