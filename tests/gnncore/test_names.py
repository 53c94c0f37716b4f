"""gnncore.names.safe_name: the one check of every name that becomes a path, and
the ``--name`` of ``gnncore ingest`` / ``gnncore synth`` refused before any work."""

from __future__ import annotations

from pathlib import Path

import pytest

from gnncore.cli.main import main
from gnncore.errors import InputError
from gnncore.names import MAX_NAME_LENGTH, is_safe_name, safe_name

REFUSED = {
    "parent escape": "../../../escape",
    "separator": "a/b",
    "backslash": "a\\b",
    "trailing newline": "cora\n",
    "dot dot": "..",
    "dot": ".",
    "dot dot inside": "a..b",
    "hidden": ".hidden",
    "leading dash": "-rf",
    "NUL": "a\x00b",
    "tab": "a\tb",
    "escape char": "a\x1b[31m",
    "DEL": "a\x7f",
    "right-to-left override": "a\u202eb",
    "line separator": "a\u2028b",
    "too long": "x" * 200,
    "empty": "",
    "leading space": " cora",
    "trailing space": "cora ",
}


@pytest.mark.parametrize("name", REFUSED.values(), ids=REFUSED.keys())
def test_safe_name_refuses(name: str) -> None:
    assert not is_safe_name(name)
    with pytest.raises(InputError) as info:
        safe_name(name, what="dataset name")
    message = str(info.value)
    assert "\n" not in message and "dataset name" in message


@pytest.mark.parametrize(
    "name",
    ["cora", "ogbn-arxiv", "Email-Enron", "com-lj.ungraph", "my edges (1)", "réseau", "x" * 128],
)
def test_safe_name_accepts_plain_names(name: str) -> None:
    assert safe_name(name) == name and is_safe_name(name)


def test_the_whole_string_is_checked_and_the_message_names_the_file() -> None:
    # A pattern ending in '$' used with .match accepts a trailing newline.
    expected = r"^g/manifest\.json: graph name 'cora\\n' holds a control"
    with pytest.raises(InputError, match=expected):
        safe_name("cora\n", what="graph name", where=Path("g/manifest.json"))
    with pytest.raises(InputError, match=f"at most {MAX_NAME_LENGTH}"):
        safe_name("x" * (MAX_NAME_LENGTH + 1))
    with pytest.raises(InputError, match="not a string"):
        safe_name(5)  # type: ignore[arg-type]


@pytest.mark.parametrize("verb", ["ingest", "synth"])
@pytest.mark.parametrize("name", ["../x", "cora\n", ".hidden"])
def test_cli_name_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], verb: str, name: str
) -> None:
    """``gnncore ingest/synth --name ../x``: exit 1, one line naming --name, and
    nothing written (neither the output nor anything beside it)."""
    source = tmp_path / "in" / "edges.csv"
    source.parent.mkdir()
    source.write_text("src,dst\n1,2\n2,3\n")
    out = tmp_path / "work" / "graph"
    out.parent.mkdir()
    source_args = [str(source)] if verb == "ingest" else []
    extra = [] if verb == "ingest" else ["--nodes", "50", "--features", "4"]
    code = main([verb, *source_args, str(out), "--name", name, "--no-progress", *extra])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith(f"gnncore {verb}: error: --name: {name!r} ") and err.count("\n") == 1
    assert list(out.parent.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "work"]
