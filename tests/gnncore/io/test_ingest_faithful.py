"""Parsing never silently changes the data (issue 25, item 4).

A UTF-8 byte order mark is skipped (it used to turn the first edge into a
dropped header); ``id_type="auto"`` warns, naming the file and line, when one
id sends the whole file to string ids, and the report says why; a ``.gz`` name
without gzip data is refused; the separator is the file's majority, so a
stray line is the one blamed. Each case runs in memory (``memory_budget=None``)
and on the bounded path (``"auto"``, the default for text edge lists).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import polars as pl
import pytest

from gnncore.errors import InputError
from gnncore.io import ingest
from gnncore.io.readers.edge_layout import Layout, sniff, sniff_separator
from gnncore.io.readers.edge_problems import StringIdsWarning
from gnncore.io.readers.edge_text import read_int_edges
from gnncore.store import GraphDir

PATHS = pytest.mark.parametrize("budget", [None, "auto"], ids=["memory", "bounded"])
BOM = b"\xef\xbb\xbf"


def write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def run(src: Path, out: Path, budget: str | None, **kwargs):
    report = ingest(src, out, memory_budget=budget, **kwargs)
    assert (report.memory_budget is None) == (budget is None)  # the path asked for
    return report


def raw_edges(out: Path) -> set[tuple]:
    """The graph's canonical edges as pairs of raw ids."""
    ids = pl.read_parquet(out / "node_ids.parquet").sort("node_id")["raw_id"].to_list()
    edges = pl.read_parquet(out / "edges.parquet")
    return {(ids[u], ids[v]) for u, v in edges.select("src", "dst").iter_rows()}


def refuse(src: Path, out: Path, budget: str | None, line: int | None, pattern: str, **kw) -> str:
    with pytest.raises(InputError) as info:
        ingest(src, out, memory_budget=budget, **kw)
    message = str(info.value)
    prefix = f"{src}:{line}: " if line is not None else f"{src}: "
    assert message.startswith(prefix), message
    assert re.search(pattern, message), message
    assert "\n" not in message
    assert info.value.line == line
    assert not out.exists()
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")] == []
    return message


# A UTF-8 byte order mark ----------------------------------------------------------------


@PATHS
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_bom_keeps_the_first_edge(tmp_path, budget, gz):
    import gzip

    data = BOM + b"1,2\n2,3\n3,4\n"
    src = write(tmp_path / ("g.csv.gz" if gz else "g.csv"), gzip.compress(data) if gz else data)
    report = run(src, tmp_path / "out", budget)
    assert report.num_input_edges == 3 and report.details["header"] is False
    assert report.details["id_type"] == "int"
    assert raw_edges(tmp_path / "out") == {(1, 2), (2, 3), (3, 4)}


@PATHS
def test_bom_before_a_header_and_string_ids(tmp_path, budget):
    src = write(tmp_path / "g.tsv", BOM + b"src\tdst\nann\tbob\nbob\tcid\n")
    report = run(src, tmp_path / "out", budget)
    assert report.num_input_edges == 2 and report.details["header"] is True
    assert raw_edges(tmp_path / "out") == {("ann", "bob"), ("bob", "cid")}


@PATHS
def test_bom_string_ids_without_header_keep_the_first_name(tmp_path, budget):
    src = write(tmp_path / "g.csv", BOM + b"ann,bob\nbob,cid\n")
    report = run(src, tmp_path / "out", budget, id_type="string")
    assert report.num_input_edges == 2
    assert raw_edges(tmp_path / "out") == {("ann", "bob"), ("bob", "cid")}  # not '\ufeffann'


def test_native_reader_skips_the_bom(tmp_path):
    """The C++ reader parses a BOM file itself (it used to decline it at line 1),
    with or without a header."""
    src = write(tmp_path / "g.csv", BOM + b"7,8\n9,10\n")
    src_ids, dst_ids = read_int_edges(src, Layout(",", False, 2, 0))
    assert src_ids.tolist() == [7, 9] and dst_ids.tolist() == [8, 10]
    assert sniff(src) == Layout(",", False, 2, 0)
    headed = write(tmp_path / "h.csv", BOM + b"src,dst\n7,8\n")
    assert sniff(headed) == Layout(",", True, 2, 1)
    src_ids, dst_ids = read_int_edges(headed, Layout(",", True, 2, 1))
    assert src_ids.tolist() == [7] and dst_ids.tolist() == [8]


@PATHS
def test_utf16_is_refused_on_line_1(tmp_path, budget):
    src = write(tmp_path / "g.csv", "1,2\n2,3\n".encode("utf-16"))
    refuse(src, tmp_path / "out", budget, 1, "UTF-16 text")


# id_type="auto" falling back to strings ------------------------------------------------

FALLBACK = pytest.mark.parametrize(
    ("token", "problem"),
    [("x7", r"node id 'x7' is not an integer"), (str(2**63), rf"node id {2**63} does not fit")],
    ids=["word", "2**63"],
)


@PATHS
@FALLBACK
def test_auto_fallback_to_strings_warns_with_file_and_line(tmp_path, budget, token, problem):
    rows = "".join(f"{i},{i + 1}\n" for i in range(40))
    src = write(tmp_path / "g.csv", "# ids\n" + rows + f"5,{token}\n" + rows)
    with pytest.warns(StringIdsWarning) as caught:
        report = run(src, tmp_path / "out", budget)
    messages = [str(w.message) for w in caught if w.category is StringIdsWarning]
    assert len(messages) == 1
    assert messages[0].startswith(f"{src}:42: ") and re.search(problem, messages[0])
    assert "--id-type string" in messages[0]
    assert report.details["id_type"] == "string"
    assert re.fullmatch(rf"g\.csv:42: {problem}.*", report.details["id_type_reason"])
    manifest = GraphDir.open(tmp_path / "out").manifest
    assert manifest.stats["id_type_reason"] == report.details["id_type_reason"]


@PATHS
@pytest.mark.parametrize("id_type", ["auto", "string"])
def test_no_warning_when_nothing_falls_back(tmp_path, budget, id_type):
    ints = write(tmp_path / "i.csv", "1,2\n2,3\n")
    names = write(tmp_path / "s.csv", "a,b\nb,c\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error", StringIdsWarning)
        assert "id_type_reason" not in run(ints, tmp_path / "a", budget).details
        report = run(names, tmp_path / "b", budget, id_type="string")
    assert report.details["id_type"] == "string" and "id_type_reason" not in report.details


@FALLBACK
def test_cli_prints_the_fallback_warning_and_reason(tmp_path, token, problem):
    src = write(tmp_path / "g.txt", f"1 2\n2 3\n3 {token}\n")
    result = subprocess.run(
        [sys.executable, "-m", "gnncore.cli.main", "ingest", str(src), str(tmp_path / "out"),
         "--no-progress"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    warning = rf"gnncore ingest: warning: StringIdsWarning: {re.escape(str(src))}:3: {problem}"
    assert re.search(warning, result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr  # one line, no source
    summary = json.loads(result.stdout)
    assert summary["details"]["id_type_reason"].startswith("g.txt:3: ")


# A .gz name without gzip data -------------------------------------------------------------


@PATHS
def test_gz_name_without_gzip_data_is_refused(tmp_path, budget):
    src = write(tmp_path / "g.csv.gz", "1,2\n2,3\n")
    refuse(src, tmp_path / "out", budget, None, r"ends in \.gz but the file is not gzip data")


@PATHS
def test_gzip_data_without_gz_name_is_still_read(tmp_path, budget):
    import gzip

    src = write(tmp_path / "g.csv", gzip.compress(b"1,2\n2,3\n"))
    assert run(src, tmp_path / "out", budget).num_input_edges == 2


# The separator: sniffed per file, the odd line blamed --------------------------------------


@PATHS
@pytest.mark.parametrize("id_type", ["auto", "int", "string"])
def test_comma_file_with_a_tab_line_is_blamed_on_that_line(tmp_path, budget, id_type):
    src = write(tmp_path / "g.csv", "1,2\n2,3\n3,4\n4\t5\n5,6\n")
    message = refuse(
        src,
        tmp_path / "out",
        budget,
        4,
        r"expected 2 columns \(src dst\), found 1",
        id_type=id_type,
    )
    assert "holds a tab" in message and "separator" in message and "is a comma" in message


@PATHS
def test_tab_file_with_a_comma_line_is_blamed_on_that_line(tmp_path, budget):
    src = write(tmp_path / "g.tsv", "a\tb\nb\tc\nc,d\nd\te\n")
    message = refuse(src, tmp_path / "out", budget, 3, "found 1")
    assert "holds a comma" in message


@PATHS
def test_odd_first_line_is_blamed_not_dropped_as_a_header(tmp_path, budget):
    """A tab line opening a comma file used to decide the separator (every other
    line was then blamed on line 1); it must not become a header either."""
    src = write(tmp_path / "g.csv", "1\t2\n2,3\n3,4\n4,5\n")
    message = refuse(src, tmp_path / "out", budget, 1, "found 1")
    assert "holds a tab" in message


@PATHS
def test_mixed_tabs_and_spaces_still_read_as_whitespace(tmp_path, budget):
    src = write(tmp_path / "g.txt", "1\t2\n2 3\n3\t4\n4 5\n")
    assert run(src, tmp_path / "out", budget).num_input_edges == 4


def test_sniff_separator_votes():
    assert sniff_separator(["1,2", "3,4", "5\t6"]) == ","
    assert sniff_separator(["1\t2", "3,4", "5\t6"]) == "\t"
    assert sniff_separator(["1,2", "3\t4"]) == ","  # a tie: the first line's
    assert sniff_separator(["1 2", "3,4"]) == " "
    assert sniff_separator(["a,b\tc", "d\te"]) == "\t"  # a tab line holding a comma
    assert sniff_separator(["1\t2", "3\t4", "5,6"]) == "\t"
    assert sniff_separator(["1 2", "3\t4", "5,6"]) == " "  # mixed: sniff makes it runs


@PATHS
def test_spaces_first_then_tabs_read_as_runs_of_whitespace(tmp_path, budget):
    """A space line first and tab lines after used to sniff as tab-separated, and
    the first line was then refused as one column."""
    src = write(tmp_path / "g.txt", "0 1\n1\t2\n2\t3\n")
    assert sniff(src).separator is None
    assert run(src, tmp_path / "out", budget).num_input_edges == 3


# Found by the fuzz suite: errors that named no line, first lines dropped as headers ----------


@PATHS
@pytest.mark.parametrize(
    ("data", "line", "pattern"),
    [
        (b"a,b\nb,c\nc\xff\xfe,d\nd,e\n", 3, "not UTF-8"),  # was: no line
        (b"a,b\nb,c\n" + b"x,y\n" * 60 + b"c\xff,d\n", 63, "not UTF-8"),  # past the sniffed lines
        (b'1,2\n2,3\n"3,4\n4,5\n', 3, "unbalanced"),  # was: no line
        (b"\x80 a\n1 2\n2 3\n", 1, "not UTF-8"),  # was: junk taken for a header, dropped
        (b"1,\n2,3\n3,4\n", 1, "empty node id"),  # was: taken for a header, dropped
        (b'"1,2\n2,3\n3,4\n', 1, "unbalanced"),  # was: taken for a header, dropped
    ],
    ids=["not-utf8", "not-utf8-late", "quote", "junk-header", "empty-header", "quote-header"],
)
def test_bad_lines_are_named_not_dropped(tmp_path, budget, data, line, pattern):
    src = write(tmp_path / "g.csv", data)
    refuse(src, tmp_path / "out", budget, line, pattern)
