"""``gnncore ingest``: in-process and as a subprocess on a malformed file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gnncore.cli.main import main
from gnncore.store import GraphDir


def test_cli_ingest_json(tmp_path, capsys):
    src = tmp_path / "g.tsv"
    src.write_text("# c\nfrom\tto\n1\t2\n2\t3\n3\t1\n1\t2\n")
    out = tmp_path / "graph"
    summary_path = tmp_path / "summary.json"
    code = main(
        [
            "ingest",
            str(src),
            str(out),
            "--directed",
            "--seed",
            "5",
            "--name",
            "tri",
            "--json",
            str(summary_path),
        ]
    )
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    saved = json.loads(summary_path.read_text())
    assert printed == saved
    assert saved["num_canonical_edges"] == 3 and saved["duplicates_removed"] == 1
    assert saved["directed"] is True and saved["details"]["header"] is True
    graph = GraphDir.open(out)
    graph.validate(checksums=True)
    assert graph.manifest.name == "tri" and graph.manifest.stats["shuffle_seed"] == 5


def test_cli_header_flags_and_id_type(tmp_path, capsys):
    src = tmp_path / "g.txt"
    src.write_text("1 2\n2 3\n")
    assert main(["ingest", str(src), str(tmp_path / "a"), "--header"]) == 0
    assert json.loads(capsys.readouterr().out)["num_input_edges"] == 1
    assert (
        main(
            [
                "ingest",
                str(src),
                str(tmp_path / "b"),
                "--no-header",
                "--id-type",
                "string",
                "--format",
                "edgelist",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["details"]["id_type"] == "string"


def test_cli_error_in_process(tmp_path, capsys):
    src = tmp_path / "bad.txt"
    src.write_text("1 2\n2 x\n")
    assert main(["ingest", str(src), str(tmp_path / "o"), "--id-type", "int"]) == 1
    err = capsys.readouterr().err
    assert (
        err == f"gnncore ingest: error: {src}:2: node id 'x' is not an integer "
        "(ids are declared integers)\n"
    )


def test_cli_subprocess_malformed(tmp_path):
    src = tmp_path / "bad.csv"
    src.write_text("src,dst\n1,2\n3,4\n5,6,7\n")
    out = tmp_path / "parent" / "graph"
    exe = Path(sys.executable).parent / "gnncore"
    result = subprocess.run(
        [str(exe), "ingest", str(src), str(out)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"{src}:4:" in lines[0] and "expected 2 columns" in lines[0]
    assert result.stdout == ""
    assert not out.exists()
    assert not out.parent.exists() or list(out.parent.iterdir()) == []


def test_cli_header_flag_rejected_for_directories(tmp_path, capsys):
    kg = tmp_path / "kg"
    kg.mkdir()
    (kg / "train.txt").write_text("a\tr\tb\n")
    assert main(["ingest", str(kg), str(tmp_path / "o"), "--header"]) == 1
    assert "apply to edge lists, not to kg input" in capsys.readouterr().err
    assert main(["ingest", str(kg), str(tmp_path / "o")]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "kg"
