"""Stage progress: what a long ingestion reports, and how the bar shows it."""

from __future__ import annotations

from gnncore.io import ingest
from gnncore.progress import StageBar, reporting, stage


def test_ingestion_reports_its_stages_in_order(tmp_path):
    edges = tmp_path / "e.csv"
    edges.write_text("src,dst\na,b\nb,c\n")
    nodes = tmp_path / "n.csv"
    nodes.write_text("node_id,x\na,1\nb,2\nc,3\n")
    seen: list[str] = []
    ingest(edges, tmp_path / "g", nodes=nodes, progress=seen.append)
    assert seen == [
        "reading the node table",
        "reading edges",
        "remapping ids",
        "canonical edges",
        "node data",
        "writing CSR",
        "checksums and manifest",
    ]
    # No reporter: stages go nowhere, and a reporter does not leak out of its block.
    with reporting(seen.append):
        pass
    stage("outside")
    assert seen[-1] == "checksums and manifest"


def test_stage_bar_shows_stages_on_a_terminal_and_nothing_elsewhere(capsys):
    with StageBar("ingest", enabled=True) as bar:
        bar("reading edges")
        bar("writing CSR")
    shown = capsys.readouterr().err
    assert "ingest" in shown and "writing CSR" in shown and "2stage" in shown
    with StageBar("ingest") as quiet:  # stderr is not a terminal under pytest
        quiet("reading edges")
    assert capsys.readouterr().err == ""
