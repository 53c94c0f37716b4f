"""Malformed edge lists: each error names the file and line, and leaves no output."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from gnncore.errors import InputError
from gnncore.io import ingest


def write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def assert_no_output(out: Path) -> None:
    assert not out.exists()
    leftovers = [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]
    assert leftovers == []


def expect_error(tmp_path: Path, src: Path, line: int | None, pattern: str, **kwargs) -> str:
    out = tmp_path / "out"
    with pytest.raises(InputError) as info:
        ingest(src, out, **kwargs)
    message = str(info.value)
    prefix = f"{src}:{line}: " if line is not None else f"{src}: "
    assert message.startswith(prefix), message
    assert re.search(pattern, message), message
    assert info.value.path == src and info.value.line == line
    assert_no_output(out)
    return message


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n# and another\n"])
def test_empty_file(tmp_path, text):
    src = write(tmp_path / "e.txt", text)
    expect_error(tmp_path, src, None, "empty file: no edges")


def test_header_only(tmp_path):
    src = write(tmp_path / "h.csv", "src,dst\n")
    expect_error(tmp_path, src, None, "no edges", header=True)


@pytest.mark.parametrize(
    ("text", "line", "found"),
    [
        ("1 2\n3 4\n5 6 7 8\n", 3, 4),  # extra columns (Polars parse fails)
        ("1 2\n3\n5 6\n", 2, 1),  # missing column (null in the parse)
        ("# c\n1,2\n3,4,5\n", 3, 3),  # comma separated, comment counted in lines
        ("1\t2\r\n3\t4\t9\t9\r\n", 2, 4),  # CRLF tabs
    ],
)
def test_wrong_column_count(tmp_path, text, line, found):
    src = write(tmp_path / "c.txt", text)
    expect_error(tmp_path, src, line, rf"expected 2 columns \(src dst\), found {found}")


def test_wrong_column_count_on_first_line(tmp_path):
    src = write(tmp_path / "c.txt", "# hdr\n1 2 3 4\n1 2 3 4\n")
    expect_error(tmp_path, src, 2, "found 4")


def test_three_columns_with_text_third_column(tmp_path):
    src = write(tmp_path / "kg.txt", "a\trel\tb\n")
    expect_error(tmp_path, src, 1, "use --format kg")


def test_non_numeric_id_with_int_ids(tmp_path):
    rows = "".join(f"{i}\t{i + 1}\n" for i in range(200))
    src = write(tmp_path / "n.tsv", "# snap\n" + rows + "7\tx9\n")
    expect_error(tmp_path, src, 202, r"node id 'x9' is not an integer", id_type="int")


def test_negative_id(tmp_path):
    src = write(tmp_path / "neg.csv", "src,dst\n1,2\n# note\n2,-5\n")
    expect_error(tmp_path, src, 4, "negative node id -5")
    expect_error(tmp_path, src, 4, "negative node id -5", id_type="int")


def test_truncated_gzip(tmp_path):
    data = gzip.compress("".join(f"{i} {i + 1}\n" for i in range(50_000)).encode())
    src = write(tmp_path / "t.txt.gz", data[: len(data) // 2])
    expect_error(tmp_path, src, None, "truncated or corrupt gzip")


def test_corrupt_gzip(tmp_path):
    data = bytearray(gzip.compress("".join(f"{i} {i + 1}\n" for i in range(50_000)).encode()))
    middle = len(data) // 2
    data[middle : middle + 64] = b"\xff" * 64
    src = write(tmp_path / "c.txt.gz", bytes(data))
    expect_error(tmp_path, src, None, "truncated or corrupt gzip")


def test_failure_keeps_previous_output(tmp_path):
    out = tmp_path / "out"
    good = write(tmp_path / "good.txt", "0 1\n")
    ingest(good, out)
    bad = write(tmp_path / "bad.txt", "0 1\n1 2 3 4\n")
    with pytest.raises(InputError):
        ingest(bad, out)
    assert (out / "manifest.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt", "good.txt", "out"]


def test_missing_source(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        ingest(tmp_path / "nope.txt", tmp_path / "out")
    assert_no_output(tmp_path / "out")
