"""`gnncore bench partition --external NAME=CMD`: an outside partitioner, run as a
command on a METIS file the bench writes, measured beside the built-in methods."""

from __future__ import annotations

import json
import shlex
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from gnncore.cli.main import main
from gnncore.errors import InputError
from gnncore_bench.external import read_partition, write_metis_graph
from gnncore_bench.external_spec import parse_external

# A partitioner a user could have written: reads the METIS header, puts node i
# in part i % k, writes one part id per line to OUTPUT, or (no OUTPUT given) to
# GRAPH.part.K as gpmetis does. MODE breaks it on purpose.
SCRIPT = textwrap.dedent(
    """
    import sys
    graph, k, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    output = sys.argv[4] if len(sys.argv) > 4 else f"{graph}.part.{k}"
    with open(graph) as f:
        n = int(f.readline().split()[0])
    if mode == "fail":
        print("out of coffee", file=sys.stderr)
        sys.exit(3)
    if mode == "sleep":
        import time
        time.sleep(60)
    ids = [i % k for i in range(n)]
    if mode == "short":
        ids = ids[:-1]
    if mode == "range":
        ids[7] = k
    with open(output, "w") as out:
        out.write("".join(f"{i}\\n" for i in ids))
    """
)


@pytest.fixture
def script(tmp_path: Path) -> str:
    path = tmp_path / "modk.py"
    path.write_text(SCRIPT)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(path))}"


def _bench(graph: Path, out: Path, *args: str) -> int:
    return main(["bench", "partition", str(graph), "--out", str(out), *args])


def _expected(graph: Path, parts: int) -> tuple[float, float]:
    """Cut fraction and max part / (N/p) of i % parts, from the graph's own edge list."""
    pairs = np.load(graph / "edges_shuffled.npy")
    n = len(np.load(graph / "indptr.npy")) - 1
    assignment = np.arange(n) % parts
    cut = np.count_nonzero(assignment[pairs[:, 0]] != assignment[pairs[:, 1]]) / len(pairs)
    return cut, np.bincount(assignment).max() / (n / parts)


def test_external_rows_beside_a_builtin_method(small_graph, tmp_path, script, capsys):
    out = tmp_path / "bench"
    code = _bench(
        small_graph,
        out,
        "--parts",
        "2,3",
        "--methods",
        "random",
        "--external",
        f"modk={script} {{metis_graph}} {{parts}} ok {{output}}",
        "--external",
        f"gpstyle={script} {{metis_graph}} {{parts}} ok",  # writes {metis_graph}.part.{parts}
    )
    assert code == 0, capsys.readouterr().err
    result = json.loads((out / "bench.json").read_text())
    rows = {(r["method"], r["parts"]): r for r in result["rows"]}
    assert set(rows) == {(m, p) for m in ("random", "modk", "gpstyle") for p in (2, 3)}
    for p in (2, 3):
        cut, balance = _expected(small_graph, p)
        for name in ("modk", "gpstyle"):
            row = rows[(name, p)]
            assert row["edge_cut_fraction"] == pytest.approx(cut)
            assert row["max_part_ratio"] == pytest.approx(balance)
            assert row["external"] is True and row["seconds"] > 0
            # a whole Python interpreter, measured alone (not this large test process)
            assert 5 * 2**20 < row["peak_rss_bytes"] < 200 * 2**20
            assert row["peak_rss_bytes"] == row["process_peak_rss_bytes"]
        assert "external" not in rows[("random", p)]
    assert Path(rows[("gpstyle", 2)]["partition_file"]).name == "graph.metis.part.2"
    assert result["externals"]["modk"].startswith(script)
    assert result["metis_graph"]["seconds"] > 0 and result["failed"] == []
    table = (out / "bench.md").read_text()
    runs, pivots = table.split("Edge cut % (median")
    assert runs.count("| modk | ") == 2 and "| modk | " in pivots
    assert "METIS graph for the external partitioners" in table


def test_metis_file_is_the_undirected_simple_graph(small_graph, tmp_path):
    path = tmp_path / "g.metis"
    info = write_metis_graph(small_graph, path, chunk=100)  # many small blocks
    lines = path.read_text().split("\n")
    n, m = map(int, lines[0].split())
    pairs = np.load(small_graph / "edges_shuffled.npy")
    assert (n, m) == (info["nodes"], info["edges"]) == (400, len(pairs))
    from_file = {
        (min(i, int(j) - 1), max(i, int(j) - 1))
        for i, line in enumerate(lines[1 : n + 1])
        for j in line.split()
    }
    assert from_file == {(int(u), int(v)) for u, v in pairs}
    assert sum(len(line.split()) for line in lines[1 : n + 1]) == 2 * m
    assert info["bytes"] == path.stat().st_size and info["self_loops_dropped"] == 0


def test_a_failing_command_fails_its_row_and_the_verb(small_graph, tmp_path, script, capsys):
    out = tmp_path / "bench"
    code = _bench(
        small_graph,
        out,
        "--parts",
        "2",
        "--methods",
        "random",
        "--external",
        f"broken={script} {{metis_graph}} {{parts}} fail {{output}}",
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "external partitioner broken p=2 exited 3" in err and "out of coffee" in err
    result = json.loads((out / "bench.json").read_text())  # the other rows are kept
    assert [r["method"] for r in result["rows"]] == ["random"]
    assert (
        result["failed"][0]["method"] == "broken"
        and "out of coffee" in (result["failed"][0]["error"])
    )
    assert "- broken p=2: external partitioner broken p=2 exited 3" in (
        (out / "bench.md").read_text()
    )


def test_relative_paths_and_the_timeout(small_graph, tmp_path, monkeypatch, capsys):
    (tmp_path / "modk.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)  # the command runs where the bench was started
    python = shlex.quote(sys.executable)
    ok = f"rel={python} modk.py {{metis_graph}} {{parts}} ok {{output}}"
    assert _bench(small_graph, Path("b1"), "--parts", "2", "--methods", "", "--external", ok) == 0
    assert json.loads((tmp_path / "b1" / "bench.json").read_text())["rows"][0]["method"] == "rel"
    slow = f"slow={python} modk.py {{metis_graph}} {{parts}} sleep"
    args = ["--parts", "2", "--methods", "", "--external", slow, "--external-timeout", "1"]
    started = time.monotonic()
    assert _bench(small_graph, Path("b2"), *args) == 1
    assert time.monotonic() - started < 30
    assert "external partitioner slow p=2 timed out after 1 s" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("mode", "problem"),
    [
        ("short", ":400: 399 lines for 400 nodes"),
        ("range", ":8: part id 2 is outside [0, 2)"),
    ],
)
def test_a_bad_partition_file_names_file_and_line(
    small_graph, tmp_path, script, capsys, mode, problem
):
    out = tmp_path / "bench"
    external = f"bad={script} {{metis_graph}} {{parts}} {mode} {{output}}"
    code = _bench(small_graph, out, "--parts", "2", "--methods", "", "--external", external)
    err = capsys.readouterr().err
    assert code == 1
    assert f"{out / 'partitions' / 'bad-p2' / 'partition.txt'}{problem}" in err


def test_read_partition_checks_every_line(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text("0\n1\n1\n0\n\n")  # a trailing blank line is fine
    assert read_partition(path, 4, 2).tolist() == [0, 1, 1, 0]
    path.write_text("0\nx\n1\n0\n")
    with pytest.raises(InputError, match=r"p\.txt:2: 'x' is not a part id"):
        read_partition(path, 4, 2)
    path.write_text("0\n1\n1\n0\n1\n")
    with pytest.raises(InputError, match=r"p\.txt:5: 5 lines for 4 nodes.*first extra"):
        read_partition(path, 4, 2)
    path.write_text("0\n1\n99999999999999999999999\n0\n")  # beyond int64
    with pytest.raises(InputError, match=r"p\.txt:3: part id 9+ is outside \[0, 2\)"):
        read_partition(path, 4, 2)
    path.write_text("0\n-1\n1\n0\n")
    with pytest.raises(InputError, match=r"p\.txt:2: part id -1 is outside \[0, 2\)"):
        read_partition(path, 4, 2)
    with pytest.raises(InputError, match="wrote no partition file"):
        read_partition(tmp_path / "none.txt", 4, 2)


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("x=tool {metis_graph} {k}", "unknown placeholder {k}"),
        ("x=tool graph.txt {parts}", "has no {metis_graph}"),
        ("=tool {metis_graph}", "the name before '=' is empty"),
        ("metis=gpmetis {metis_graph} {parts}", "--external metis: the name is a built-in"),
        ("x=", "the command after '=' is empty"),
        ("x=tool '{metis_graph}", "cannot split"),
        ("x=tool {metis_graph} {parts", "bad braces"),
        ("tool {metis_graph}", "expects NAME=CMD"),
    ],
)
def test_a_bad_template_is_refused_before_any_work(small_graph, tmp_path, capsys, spec, problem):
    out = tmp_path / "bench"
    with pytest.raises(SystemExit) as exit_:
        _bench(small_graph, out, "--methods", "random", "--external", spec)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument --external" in err and problem in err
    assert not out.exists()
    with pytest.raises(ValueError, match="--external"):
        parse_external(spec, reserved=("metis",))


def test_a_repeated_name_is_refused_before_any_work(small_graph, tmp_path, capsys):
    out = tmp_path / "bench"
    twice = ["--external", "x=tool {metis_graph}"] * 2
    assert _bench(small_graph, out, "--methods", "random", *twice) == 1
    assert "--external x: the name is given twice" in capsys.readouterr().err
    assert not out.exists()
