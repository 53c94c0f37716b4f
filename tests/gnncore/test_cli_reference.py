"""docs/CLI.md is the argparse definitions' help, regenerated: a changed option
without a regenerated reference fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from gnncore.cli.main import VERBS
from gnncore.cli.reference import COMMAND, main, reference

DOC = Path(__file__).resolve().parents[2] / "docs" / "CLI.md"


def test_docs_cli_md_is_the_generated_reference() -> None:
    assert DOC.read_text(encoding="utf-8") == reference(), f"docs/CLI.md is stale: run `{COMMAND}`"


def test_the_reference_holds_every_verb_and_subcommand() -> None:
    text = reference()
    for verb in VERBS:
        assert f"## `gnncore {verb}`" in text
        assert f"usage: gnncore {verb} " in text
    for sub in ("plan placement", "plan replication", "bench partition", "bench scale"):
        assert f"### `gnncore {sub}`" in text


def test_check_reports_a_stale_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "CLI.md"
    stale.write_text(reference().replace("--memory-budget", "--memory-bucket"), encoding="utf-8")
    assert main(["--check", str(stale)]) == 1
    assert "is stale" in capsys.readouterr().err
    stale.write_text(reference(), encoding="utf-8")
    assert main(["--check", str(stale)]) == 0
