"""``make demo`` prints each gnncore line once: Dagster prints the captured
``gnncore`` logger's records itself, so the root handler the demo installs
leaves them out, while other libraries' warnings still reach the terminal."""

from __future__ import annotations

import logging

import pytest

from pipelines.demo import configure_root_logger


def test_gnncore_lines_are_not_printed_again_by_the_root_logger(
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = logging.getLogger()
    saved = list(root.handlers)
    root.handlers = []  # as in `python -m pipelines.demo` (pytest adds its own in the call)
    gnncore = logging.getLogger("gnncore.train.node.exact")
    gnncore.setLevel(logging.INFO)  # as Dagster's managed python_logs set it
    try:
        configure_root_logger(["gnncore"])  # dagster.yaml's managed_python_loggers
        logging.info("a library's module-level call")  # would run logging.basicConfig
        gnncore.info("validation evaluation of 2000 nodes")
        gnncore.warning("a gnncore warning")
        logging.getLogger("sqlalchemy.pool").warning("a pool warning")
        handlers = list(root.handlers)
    finally:
        root.handlers = saved
        gnncore.setLevel(logging.NOTSET)
    err = capsys.readouterr().err
    assert "gnncore" not in err
    assert "module-level call" not in err  # INFO: below the handler's level
    assert "WARNING:sqlalchemy.pool:a pool warning" in err
    assert len(handlers) == 1  # logging.info found the demo's and installed none
