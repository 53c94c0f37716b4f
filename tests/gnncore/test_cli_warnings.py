"""The CLI prints a warning as one line, and code that records warnings still gets them."""

from __future__ import annotations

import subprocess
import sys
import warnings

from gnncore.cli.main import one_line_warnings


def test_a_warning_is_one_line_naming_the_verb() -> None:
    # In a process of its own: pytest records the warnings of its tests instead of
    # printing them.
    script = (
        "import warnings\n"
        "from gnncore.cli.main import one_line_warnings\n"
        "with one_line_warnings('ingest'):\n"
        "    warnings.warn('g.csv:3: odd\\nsecond line', UserWarning)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "gnncore ingest: warning: UserWarning: g.csv:3: odd second line\n"


def test_recorded_warnings_are_still_recorded() -> None:
    with warnings.catch_warnings(record=True) as recorded:
        warnings.simplefilter("always")
        with one_line_warnings("ingest"):
            warnings.warn("g.csv:3: odd", UserWarning, stacklevel=1)
    assert [str(w.message) for w in recorded] == ["g.csv:3: odd"]
