"""The error-path line finder: the Polars pass and the Python fallback agree."""

from __future__ import annotations

import gzip

import pytest

import gnncore.io.readers.edge_problems as edge_problems
from gnncore.errors import InputError
from gnncore.io.readers.edge_layout import Layout, sniff
from gnncore.io.readers.edge_problems import locate_problem
from gnncore.io.readers.kg import locate_triple_problem
from gnncore.io.readers.ogb import locate_numeric

CASES = [
    # (text, id as int, expected line, message part)
    ("\n# c\r\nsrc dst\r\n\r\n1 2\r\n# x\r\n\r\n3 -4\r\n5 6\r\n", True, 8, "negative node id -4"),
    ("# a\n# b\n1,2\n\n3,4\n5,x\n", True, 6, "'x' is not an integer"),
    ("1\t2\n3\t4\t5\t6\n", False, 2, "found 4"),
    ("a  b\n c d \ne\n", False, 3, "found 1"),
    ("1,2\n3,99999999999999999999\n", True, 2, "does not fit in 64 bits"),
    ("1,2\n, 4\n", False, 2, "empty node id"),
]


def fallback_only(monkeypatch):
    monkeypatch.setattr(edge_problems, "MAX_SUSPECTS", 0)  # Polars pass answers nothing


def no_fallback(monkeypatch):
    def boom(path):
        raise AssertionError("the Python fallback scan ran")

    monkeypatch.setattr(edge_problems, "iter_lines", boom)


@pytest.mark.parametrize("mode", ["polars", "python"])
@pytest.mark.parametrize(("text", "as_int", "line", "part"), CASES)
def test_locate_edges(tmp_path, monkeypatch, mode, text, as_int, line, part):
    path = tmp_path / "e.txt"
    path.write_bytes(text.encode())
    layout = sniff(path)
    if layout.separator in ("\t", " "):
        layout = Layout(None, layout.header, layout.ncols, layout.skip_lines)
    (fallback_only if mode == "python" else no_fallback)(monkeypatch)
    with pytest.raises(InputError) as info:
        locate_problem(path, layout, as_int=as_int)
    assert info.value.line == line and part in info.value.problem


@pytest.mark.parametrize("mode", ["polars", "python"])
def test_locate_max_id_in_gzip(tmp_path, monkeypatch, mode):
    path = tmp_path / "e.csv.gz"
    path.write_bytes(gzip.compress(b"0,1\n1,2\n2,17\n"))
    (fallback_only if mode == "python" else no_fallback)(monkeypatch)
    with pytest.raises(InputError) as info:
        locate_problem(path, Layout(",", False, 2, 0), as_int=True, max_id=9)
    assert info.value.line == 3 and "17 is out of range (at most 9)" in info.value.problem


def test_locate_clean_file_returns(tmp_path, monkeypatch):
    path = tmp_path / "e.txt"
    path.write_text("# c\n1 2\n3 4\n")
    layout = sniff(path)
    no_fallback(monkeypatch)
    assert locate_problem(path, layout, as_int=True) is None


@pytest.mark.parametrize("mode", ["polars", "python"])
def test_locate_numeric_and_triples(tmp_path, monkeypatch, mode):
    (fallback_only if mode == "python" else no_fallback)(monkeypatch)
    feats = tmp_path / "f.csv"
    feats.write_text("1,2.5,-3e-2\n.5,1.,7\n1,inf,2\n")
    with pytest.raises(InputError) as info:
        locate_numeric(feats, 3, integer=False, what="feature value")
    assert info.value.line == 3 and "NaN or inf" in info.value.problem
    labels = tmp_path / "y.csv"
    labels.write_text("1\n2\n\n3\n")
    with pytest.raises(InputError) as info:
        locate_numeric(labels, 1, integer=True, what="label")
    assert info.value.line == 3 and "blank line" in info.value.problem
    kg = tmp_path / "t.txt"
    kg.write_bytes(b"a\tr\tb\r\n\r\nc\tr\t \r\n")
    with pytest.raises(InputError) as info:
        locate_triple_problem(kg)
    assert info.value.line == 3 and "empty tail" in info.value.problem


def test_fallback_ran_when_polars_saw_too_many_suspects(tmp_path, monkeypatch):
    # 19-digit ids that fit int64 are only suspects: the check clears them and the
    # Python pass takes over once more than MAX_SUSPECTS were flagged.
    monkeypatch.setattr(edge_problems, "MAX_SUSPECTS", 2)
    path = tmp_path / "e.txt"
    big = 1_000_000_000_000_000_000
    path.write_text("".join(f"{big + i} 1\n" for i in range(5)) + "1 -2\n")
    with pytest.raises(InputError) as info:
        locate_problem(path, sniff(path), as_int=True)
    assert info.value.line == 6
