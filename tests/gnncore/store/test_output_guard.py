"""No verb deletes what it did not write (issue 25, item 1).

``gnncore ingest`` and ``gnncore synth`` used to delete any existing OUT_DIR: a
directory of unrelated files, the directory holding the input, the current
directory, the input file itself. Each case here runs the real CLI and checks
that it refuses with one line naming the path and that every file is still there.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gnncore.cli.main import main
from gnncore.errors import InputError
from gnncore.store import atomic
from gnncore.store.atomic import check_output_dir, recover_output

EDGES = "src,dst\n0,1\n1,2\n2,0\n2,3\n"
SYNTH = ["--nodes", "60", "--avg-degree", "4", "--classes", "2", "--features", "4"]


def _edges(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(EDGES)
    return path


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], named: Path | str) -> str:
    """Run the CLI, expect exit 1 and one line on stderr naming ``named``."""
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert str(named) in err, err
    return err


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("verb", ["ingest", "synth"])
def test_foreign_directory_is_refused_and_kept(tmp_path, capsys, verb):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "notes.txt").write_text("keep me")
    argv = (
        ["ingest", str(_edges(tmp_path / "edges.csv")), str(victim)]
        if verb == "ingest"
        else ["synth", str(victim), *SYNTH]
    )
    err = _refused(capsys, argv, victim)
    assert "--overwrite" in err
    assert (victim / "notes.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_directory_holding_the_input_is_refused(tmp_path, capsys):
    data = tmp_path / "data"
    source = _edges(data / "x.csv")
    _refused(capsys, ["ingest", str(source), str(data)], data)
    # --overwrite never deletes an input
    _refused(capsys, ["ingest", str(source), str(data), "--overwrite"], data)
    assert source.read_text() == EDGES


def test_input_file_itself_is_refused(tmp_path, capsys):
    source = _edges(tmp_path / "x.csv")
    _refused(capsys, ["ingest", str(source), str(source), "--overwrite"], source)
    assert source.read_text() == EDGES
    assert [p.name for p in tmp_path.iterdir()] == ["x.csv"]  # no hidden .x.csv.old-*


@pytest.mark.parametrize("verb", ["ingest", "synth"])
def test_current_directory_and_its_parents_are_refused(tmp_path, capsys, monkeypatch, verb):
    work = tmp_path / "home" / "work"  # '..' holds no input: refused as a parent of '.'
    source = _edges(tmp_path / "inputs" / "x.csv")
    (work / "keep.txt").parent.mkdir(parents=True)
    (work / "keep.txt").write_text("mine")
    monkeypatch.chdir(work)
    for out in (".", ".."):
        argv = ["ingest", str(source), out] if verb == "ingest" else ["synth", out, *SYNTH]
        err = _refused(capsys, [*argv, "--overwrite"], out)
        assert f"the current directory ({work})" in err, err
    assert (work / "keep.txt").read_text() == "mine"
    assert source.read_text() == EDGES


@pytest.mark.parametrize("verb", ["ingest", "synth"])
def test_an_existing_file_is_refused(tmp_path, capsys, verb):
    target = tmp_path / "report.txt"
    target.write_text("not a graph")
    argv = (
        ["ingest", str(_edges(tmp_path / "e.csv")), str(target), "--overwrite"]
        if verb == "ingest"
        else ["synth", str(target), *SYNTH, "--overwrite"]
    )
    _refused(capsys, argv, target)
    assert target.read_text() == "not a graph"


def test_own_output_is_replaced_and_overwrite_replaces_a_foreign_one(tmp_path, capsys):
    source = _edges(tmp_path / "e.csv")
    out = tmp_path / "g"
    assert main(["ingest", str(source), str(out), "--seed", "1"]) == 0
    first = _tree(out)
    assert main(["ingest", str(source), str(out), "--seed", "1"]) == 0  # idempotent
    assert _tree(out) == first
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "old.txt").write_text("replace me")
    assert main(["ingest", str(source), str(foreign), "--overwrite", "--seed", "1"]) == 0
    assert _tree(foreign) == first
    capsys.readouterr()
    # other verbs take the flag too
    part = tmp_path / "part"
    part.mkdir()
    (part / "x.txt").write_text("x")
    argv = ["partition", str(out), str(part), "--method", "random", "--parts", "2"]
    _refused(capsys, argv, part)
    assert main([*argv, "--overwrite"]) == 0
    assert (part / "manifest.json").is_file() and not (part / "x.txt").exists()


def test_synth_layouts_replace_only_their_own_output(tmp_path, capsys):
    csv = tmp_path / "edges.csv"
    assert main(["synth", str(csv), "--layout", "csv", *SYNTH]) == 0
    assert main(["synth", str(csv), "--layout", "csv", *SYNTH, "--seed", "3"]) == 0  # own file
    csv.write_text(csv.read_text() + "1,2\n")  # the user edited it: no longer synth's
    _refused(capsys, ["synth", str(csv), "--layout", "csv", *SYNTH], csv)
    assert csv.read_text().endswith("1,2\n")
    user_csv = _edges(tmp_path / "mine.csv")
    _refused(capsys, ["synth", str(user_csv), "--layout", "csv", *SYNTH], user_csv)
    assert user_csv.read_text() == EDGES
    ogb = tmp_path / "ogb"
    assert main(["synth", str(ogb), "--layout", "ogb", *SYNTH]) == 0
    assert main(["synth", str(ogb), "--layout", "ogb", *SYNTH]) == 0
    graph = tmp_path / "graph"
    assert main(["synth", str(graph), *SYNTH]) == 0
    capsys.readouterr()
    # a graph directory is not a generated OGB dataset, and the other way round
    _refused(capsys, ["synth", str(graph), "--layout", "ogb", *SYNTH], graph)
    _refused(capsys, ["synth", str(ogb), *SYNTH], ogb)
    assert (graph / "manifest.json").is_file() and (ogb / "raw").is_dir()


def test_versioned_stage_folder_replaced_by_other_files_is_refused(tmp_path):
    from gnncore.io import ingest_versioned

    source = _edges(tmp_path / "e.csv")
    first = ingest_versioned(source, tmp_path / "graphs", "edges", memory_budget=None)
    for path in first.path.iterdir():
        path.unlink()
    (first.path / "mine.txt").write_text("keep")
    with pytest.raises(InputError, match="holds no graph directory"):
        ingest_versioned(source, tmp_path / "graphs", "edges", memory_budget=None)
    assert (first.path / "mine.txt").read_text() == "keep"


# -- the crash-safe swap ------------------------------------------------------------

KILL_BETWEEN_RENAMES = textwrap.dedent(
    """
    import os, signal, sys
    from gnncore.store import atomic
    from gnncore.cli.main import main

    atomic.USE_EXCHANGE = {exchange}
    replace, calls = os.replace, []
    remove = atomic._remove

    def replace_then_die(src, dst):
        calls.append(dst)
        if not atomic.USE_EXCHANGE and len(calls) == 2:  # between the two renames
            os.kill(os.getpid(), signal.SIGKILL)
        return replace(src, dst)

    def remove_then_die(path):  # after the exchange, before the old one is removed
        os.kill(os.getpid(), signal.SIGKILL)

    atomic.os.replace = replace_then_die
    atomic._remove = remove_then_die if atomic.USE_EXCHANGE else remove
    sys.exit(main(sys.argv[1:]))
    """
)


def _killed_ingest(source: Path, out: Path, seed: int, exchange: bool) -> None:
    script = KILL_BETWEEN_RENAMES.format(exchange=exchange)
    argv = [sys.executable, "-c", script, "ingest", str(source), str(out), "--seed", str(seed)]
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ}, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr


def test_kill_between_the_two_renames_loses_nothing(tmp_path, capsys):
    source = _edges(tmp_path / "e.csv")
    out = tmp_path / "g"
    assert main(["ingest", str(source), str(out), "--seed", "1"]) == 0
    previous = _tree(out)
    _killed_ingest(source, out, seed=2, exchange=False)
    assert not out.exists()  # the window the fallback has: OUT_DIR renamed aside
    (old,) = tmp_path.glob(".g.old-*")
    assert _tree(old) == previous
    # the next run, even one that fails on its input, puts the previous output back
    bad = tmp_path / "bad.csv"
    bad.write_text("src,dst\n0,1\nx\n")
    assert main(["ingest", str(bad), str(out), "--id-type", "int"]) == 1
    assert _tree(out) == previous
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv", "e.csv", "g"]
    assert main(["ingest", str(source), str(out), "--seed", "2"]) == 0
    assert _tree(out) != previous
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv", "e.csv", "g"]


@pytest.mark.skipif(not atomic.USE_EXCHANGE, reason="renameat2(RENAME_EXCHANGE) unavailable")
def test_kill_after_the_atomic_exchange_leaves_the_new_output(tmp_path, capsys):
    source = _edges(tmp_path / "e.csv")
    out = tmp_path / "g"
    assert main(["ingest", str(source), str(out), "--seed", "1"]) == 0
    previous = _tree(out)
    _killed_ingest(source, out, seed=2, exchange=True)
    new = _tree(out)
    assert new != previous and json.loads(new["manifest.json"])["format"] == "gnncore.graph"
    (left,) = tmp_path.glob(".g.tmp-*")  # the old output under the dead run's name
    assert _tree(left) == previous
    assert left.absolute() in recover_output(out)  # and the killed run's scratch
    assert _tree(out) == new
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.csv", "g"]


def test_leftovers_of_dead_and_older_runs_are_removed(tmp_path):
    out = tmp_path / "g"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for name in (f".g.tmp-{dead.pid}-0badc0de", f".g.old-{dead.pid}-0badc0de", ".g.old-1234abcd"):
        (tmp_path / name).mkdir()
    alive = tmp_path / f".g.tmp-{os.getpid()}-0badc0de"  # a live writer's: kept
    alive.mkdir()
    check_output_dir(out, [], "gnncore.graph", "graph directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["g", alive.name])
