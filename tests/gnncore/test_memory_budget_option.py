"""--memory-budget, one spelling for every verb: auto, none or a size."""

from __future__ import annotations

import argparse

import pytest

from gnncore.cli.arg_types import add_memory_budget_option, memory_budget


def test_values() -> None:
    assert memory_budget("auto") == "auto"
    assert memory_budget("none") is None
    assert memory_budget("1GiB") == 1 << 30
    assert memory_budget("512MiB") == 512 << 20
    assert memory_budget("4096") == 4096


@pytest.mark.parametrize("bad", ["0", "0KiB", "lots", "1.5XB"])
def test_bad_values_fail_at_parse_time(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="gnncore x")
    add_memory_budget_option(parser, "what x sizes from it")
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(["--memory-budget", bad])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--memory-budget" in err and bad in err


def test_default_and_help() -> None:
    parser = argparse.ArgumentParser(prog="gnncore x")
    add_memory_budget_option(parser, "what x sizes from it")
    assert parser.parse_args([]).memory_budget == "auto"
    assert "what x sizes from it (default: auto)" in " ".join(parser.format_help().split())
    other = argparse.ArgumentParser(prog="gnncore y")
    add_memory_budget_option(other, "y", default=None)
    assert other.parse_args([]).memory_budget is None
