"""The C++ integer edge-list reader against a plain Python reference and against Polars."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import numpy as np
import pytest

from conftest import opens_direct
from gnncore.io.readers.edge_layout import Layout
from gnncore.io.readers.edge_text import Declined, read_int_edge_blocks
from gnncore.io.readers.edgelist import read_edges

SEPARATORS = [",", "\t", " ", None]


def reference(data: bytes, layout: Layout) -> tuple[list[int], list[int]] | int:
    """What the reader should give, by plain per-line rules: the ids, or the
    1-based line it must decline."""
    sep = layout.separator
    gap = rb"[ \t]+" if sep is None else re.escape(sep.encode())
    ident = rb"(\d{1,18})"
    weight = rb"[!#-+\--~]+" if sep == "," else rb"[!#-~]+"  # printable, no '"', no separator
    edge = ident + gap + ident + ((gap + weight) if layout.ncols == 3 else b"")
    if sep is None:
        edge = rb"[ \t]*" + edge + rb"[ \t]*"
    comment = rb"#[ !#-~\t]*" if sep == "," else rb"#[ -~\t]*"
    blank = rb"[ \t]*" if sep is None else b""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the file ends with a line end
    src: list[int] = []
    dst: list[int] = []
    for number, line in enumerate(lines, 1):
        if number <= layout.skip_lines:
            continue
        if line.endswith(b"\r"):
            line = line[:-1]
        if re.fullmatch(comment, line) or re.fullmatch(blank, line):
            continue
        m = re.fullmatch(edge, line)
        if m is None:
            return number
        src.append(int(m.group(1)))
        dst.append(int(m.group(2)))
    return src, dst


def native(path: Path, layout: Layout, rows: int, block: int | None, threads: int = 2):
    """The reader's ids, concatenated, or the line it declined."""
    src: list[np.ndarray] = []
    dst: list[np.ndarray] = []
    try:
        for s, d, top in read_int_edge_blocks(path, layout, rows, threads=threads,
                                              block_size=block):  # fmt: skip
            assert 1 <= len(s) <= rows and top == max(s.max(), d.max())
            src.append(s.copy())
            dst.append(d.copy())
    except Declined as declined:
        assert declined.path == path and declined.reason
        return declined.line
    if not src:
        return [], []
    return np.concatenate(src).tolist(), np.concatenate(dst).tolist()


def random_text(rng: np.random.Generator, layout: Layout, lines: int, header: bool) -> bytes:
    """Valid lines: ids with leading zeros and up to 18 digits, LF and CRLF ends,
    blank and comment lines, runs of whitespace, weights; sometimes no final line end."""
    sep = layout.separator
    out = [b"src,dst" if sep == "," else b"src dst"] if header else []
    for _ in range(lines):
        kind = rng.random()
        if kind < 0.05:
            out.append(b"# a comment, with\tpunctuation!")
        elif kind < 0.1:
            out.append(b"" if sep is not None else b" \t ")
        else:
            digits = int(rng.integers(1, 19))
            a = str(int(rng.integers(0, 10**digits))).zfill(int(rng.integers(1, digits + 1)))
            b = str(int(rng.integers(0, 1000)))
            if sep is None:
                cells = [a, b] + (["0.5e3"] if layout.ncols == 3 else [])
                text = " " * int(rng.integers(0, 2)) + "\t  ".join(cells) + " " * int(
                    rng.integers(0, 3))  # fmt: skip
            else:
                text = sep.join([a, b] + (["1.25"] if layout.ncols == 3 else []))
            out.append(text.encode())
    ends = [b"\r\n" if rng.random() < 0.3 else b"\n" for _ in out]
    data = b"".join(line + end for line, end in zip(out, ends))
    if rng.random() < 0.5:  # no final line end, or a lone "\r" (read as one by Polars)
        data = data[: -1 if rng.random() < 0.5 else -len(ends[-1])]
    return data


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize("ncols", [2, 3])
def test_random_files_match_reference_and_polars_at_any_block_size(tmp_path, sep, ncols):
    rng = np.random.default_rng(len(str(sep)) * 10 + ncols)
    for trial in range(4):
        header = trial % 2 == 1
        layout = Layout(sep, header, ncols, 1 if header else 0)
        data = random_text(rng, layout, 300, header)
        path = tmp_path / f"g{trial}.txt"
        path.write_bytes(data)
        expected = reference(data, layout)
        assert isinstance(expected, tuple) and len(expected[0]) > 200
        # block boundaries fall inside numbers, separators, CRLF pairs, comments
        for block, rows in [(1, 1), (3, 2), (7, 5), (16, 3), (61, 1000), (None, 1 << 20)]:
            for threads in (1, 2):
                assert native(path, layout, rows, block, threads) == expected, (block, rows)
        polars = read_edges(path, id_type="int", layout=layout, native=False)
        assert (polars.src.tolist(), polars.dst.tolist()) == expected


def test_two_threads_split_large_blocks(tmp_path):
    rng = np.random.default_rng(1)
    layout = Layout(",", False, 2, 0)
    data = random_text(rng, layout, 60_000, header=False)  # ~0.6 MB: the block is split
    path = tmp_path / "big.csv"
    path.write_bytes(data)
    expected = reference(data, layout)
    for threads in (1, 2):
        assert native(path, layout, 1 << 20, None, threads) == expected
        assert native(path, layout, 70_000, 1 << 20, threads) == expected
    # a line the reader declines in the second half of a split block: its line number
    lines = data.split(b"\n")
    bad = len(lines) * 3 // 4
    lines[bad] = b"+12,3"
    path.write_bytes(b"\n".join(lines))
    for threads in (1, 2):
        assert native(path, layout, 1 << 20, None, threads) == bad + 1


ADVERSARIAL = [
    (",", b"+5,3"),
    (",", b"-1,2"),
    (",", b"1, 2"),
    (",", b" 1,2"),
    (",", b"1,2 "),
    (",", b"1,2,"),
    (",", b"1;2"),
    (",", b"1"),
    (",", b","),
    (",", b"1,2\r\r"),
    (",", b"1\t2"),
    (",", b"1234567890123456789,1"),  # 19 digits: left to Polars
    (",", b"1,0x10"),
    (",", b'# a "quoted comment'),
    (",", "# caf\u00e9".encode()),
    (",", b"  "),
    ("\t", b"1 2"),
    ("\t", b"1\t\t2"),
    (" ", b"1  2"),
    (" ", b"1\t2"),
    (None, b"1"),
    (None, b"1 2 3"),
    (None, b"  # indented comment"),
    (None, b"1 2\x0b"),
]


@pytest.mark.parametrize(("sep", "line"), ADVERSARIAL)
def test_declines_lines_outside_the_subset_at_their_number(tmp_path, sep, line):
    layout = Layout(sep, False, 2, 0)
    good = [b"1,2" if sep == "," else (b"1\t2" if sep == "\t" else b"1 2")] * 30
    for at in (0, 13, 29):
        lines = list(good)
        lines[at] = line
        data = b"\r\n".join(lines) + b"\r\n"
        path = tmp_path / "bad.txt"
        path.write_bytes(data)
        assert reference(data, layout) == at + 1
        for block in (2, 5, None):
            assert native(path, layout, 4, block) == at + 1, block


def test_skip_lines_long_lines_and_empty_files(tmp_path):
    layout = Layout(",", True, 2, 3)
    path = tmp_path / "g.csv"
    long_comment = b"# " + b"x" * 5000
    path.write_bytes(b"# head\n" + long_comment + b"\nsrc,dst\n1,2\n" + long_comment + b"\n3,4")
    for block in (8, 100, None):
        assert native(path, layout, 2, block) == ([1, 3], [2, 4])
    path.write_bytes(b"# only\n# comments\n")
    assert native(path, Layout(",", False, 2, 0), 2, 4) == ([], [])
    path.write_bytes(b"")
    assert native(path, Layout(",", False, 2, 5), 2, 4) == ([], [])


def test_bad_arguments():
    from gnncore import _C

    with pytest.raises(ValueError, match="separator"):
        _C.EdgeTextReader("x", ";")
    with pytest.raises(ValueError, match="columns"):
        _C.EdgeTextReader("x", ",", columns=4)
    with pytest.raises(RuntimeError, match="cannot open"):
        _C.EdgeTextReader("/nonexistent/edges.csv", ",")


def test_in_memory_read_edges_uses_the_reader_and_hands_declined_files_to_polars(
    tmp_path, monkeypatch
):
    import gnncore.io.readers.edgelist as edgelist

    path = tmp_path / "g.csv"
    path.write_bytes(b"# comment\nsrc,dst\r\n1,2\r\n30,4\r\n\r\n5,60")
    polars = read_edges(path, id_type="int", native=False)
    polars_parse = edgelist._parse
    monkeypatch.setattr(edgelist, "_parse", lambda *a: pytest.fail("Polars parsed the file"))
    fast = read_edges(path, id_type="int")
    assert fast.layout == polars.layout and fast.id_type == "int"
    np.testing.assert_array_equal(fast.src, polars.src)
    np.testing.assert_array_equal(fast.dst, polars.dst)
    assert fast.src.tolist() == [1, 30, 5] and fast.dst.tolist() == [2, 4, 60]
    monkeypatch.setattr(edgelist, "_parse", polars_parse)
    path.write_bytes(b"1,2\n+30,4\n")  # declined: Polars reads "+30" as 30
    assert read_edges(path, id_type="int").src.tolist() == [1, 30]
    path.write_bytes(b"a,b\nc,d\n")  # string ids: declined, then Polars' string pass
    assert read_edges(path).id_type == "string"


def test_read_int_edges_grows_its_arrays_for_short_lines(tmp_path):
    from gnncore.io.readers.edge_text import read_int_edges

    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 10, 9000), rng.integers(0, 10, 9000)
    path = tmp_path / "short.txt"  # 4 bytes an edge: more edges than the arrays first hold
    path.write_text("".join(f"{a} {b}\n" for a, b in zip(src, dst)))
    got = read_int_edges(path, Layout(" ", False, 2, 0))
    assert got[0].tolist() == src.tolist() and got[1].tolist() == dst.tolist()


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"+5,3", "starts with neither a digit nor '#'"),
        (b"1234567890123456789,1", "1 to 18 plain decimal digits"),
        (b"1;2", "columns and separator"),
        (b"1,2 ", "after the last column"),
        (b'# "quoted', "comment"),
    ],
)
def test_decline_reasons(tmp_path, line, reason):
    path = tmp_path / "g.csv"
    path.write_bytes(b"1,2\n3,4\n" + line + b"\n5,6\n")
    with pytest.raises(Declined) as info:
        list(read_int_edge_blocks(path, Layout(",", False, 2, 0), 16))
    assert info.value.line == 3 and reason in info.value.reason
    assert str(info.value) == f"{path}: line 3: {info.value.reason}"


def test_reading_ahead_gives_the_same_blocks_and_declines_alike(tmp_path):
    """``ahead=True`` (the next block parsed on a thread) yields the blocks, ids and
    largest ids of the plain reader, declines at the same line, and stops its
    thread when the caller leaves early."""
    layout = Layout(",", False, 2, 0)
    rng = np.random.default_rng(5)
    src, dst = rng.integers(0, 10**9, 5000), rng.integers(0, 10**9, 5000)
    path = tmp_path / "g.csv"
    path.write_text("".join(f"{a},{b}\n" for a, b in zip(src, dst, strict=True)))
    for rows, block in ((64, 200), (1000, None), (10_000, None)):
        plain = [
            (s.copy(), d.copy(), top)
            for s, d, top in read_int_edge_blocks(path, layout, rows, block_size=block)
        ]
        ahead = [
            (s.copy(), d.copy(), top)
            for s, d, top in read_int_edge_blocks(path, layout, rows, block_size=block, ahead=True)
        ]
        assert len(ahead) == len(plain) >= 1
        for (s1, d1, t1), (s2, d2, t2) in zip(plain, ahead, strict=True):
            assert t1 == t2
            np.testing.assert_array_equal(s1, s2)
            np.testing.assert_array_equal(d1, d2)
    bad = tmp_path / "bad.csv"
    bad.write_text("".join(f"{a},{b}\n" for a, b in zip(src, dst, strict=True)) + "1,x\n")
    with pytest.raises(Declined) as info:
        for _ in read_int_edge_blocks(bad, layout, 64, block_size=200, ahead=True):
            pass
    assert info.value.line == 5001
    blocks = read_int_edge_blocks(path, layout, 64, block_size=200, ahead=True)
    next(blocks)
    blocks.close()  # the reading thread ends
    assert not [t for t in threading.enumerate() if t.name == "gnncore-edge-text"]


def _write_uncached(path: Path, data: bytes) -> None:
    """``data`` written to ``path`` and dropped from the page cache (a file just
    written is cached, and the direct reader reads a mostly cached file buffered)."""
    import os

    from gnncore import _C

    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    _C.evict(str(path))


@pytest.mark.parametrize("threads", [1, 2])
def test_direct_reads_give_the_blocks_of_buffered_reads(tmp_path, threads):
    """``direct=True`` (``O_DIRECT`` chunks read ahead on a thread) yields the
    blocks of buffered reads (their edges, after a byte order mark): lines across
    the chunks' seams (chunks of one block: 4 KiB ones wrap the ring of three many times), a
    comment longer than the block (the buffer grows), a last line without its
    end, a size that is no multiple of the alignment; it declines alike, and a
    reader left early stops its thread. A file mostly in the page cache is read
    from there."""
    from gnncore import _C

    layout = Layout(",", False, 2, 0)
    rng = np.random.default_rng(8)
    ids = zip(rng.integers(0, 10**12, 30_000), rng.integers(0, 9, 30_000), strict=True)
    lines = [f"{a},{b}\n" for a, b in ids]
    lines[7000] = "# " + "y" * 20_000 + "\r\n"  # five blocks of 4 KiB long
    lines[-1] = lines[-1].rstrip("\n")
    path = tmp_path / "g.csv"

    def blocks_of(path: Path, block: int | None, direct: bool) -> list:
        if direct:
            _C.evict(str(path))  # the buffered read before cached it
        blocks = read_int_edge_blocks(
            path, layout, 3000, threads=threads, block_size=block, direct=direct
        )
        return [(s.copy(), d.copy(), top) for s, d, top in blocks]

    for bom in (b"", b"\xef\xbb\xbf"):
        _write_uncached(path, bom + "".join(lines).encode())
        assert path.stat().st_size % 4096 != 0
        for block in (4096, 12_288, 100_000, None):
            blocks = [blocks_of(path, block, direct) for direct in (False, True)]
            if bom:  # the buffered reads start after it, the direct ones at 0: other blocks
                blocks = [
                    [(np.concatenate([b[0] for b in got]), np.concatenate([b[1] for b in got]),
                      max(b[2] for b in got))]
                    for got in blocks
                ]  # fmt: skip
            assert len(blocks[0]) == len(blocks[1]) >= 1, block
            assert sum(len(s) for s, _, _ in blocks[1]) == 29_999
            for (s1, d1, t1), (s2, d2, t2) in zip(*blocks, strict=True):
                assert t1 == t2
                np.testing.assert_array_equal(s1, s2)
                np.testing.assert_array_equal(d1, d2)
    _C.evict(str(path))
    reader = _C.EdgeTextReader(str(path), ",", block_bytes=4096, direct=True)
    assert reader.reading_direct == opens_direct(tmp_path)
    assert not _C.EdgeTextReader(str(path), ",").reading_direct
    path.read_bytes()  # cached now: read from the page cache, not the device again
    assert not _C.EdgeTextReader(str(path), ",", direct=True).reading_direct
    bad = tmp_path / "bad.csv"
    _write_uncached(bad, "".join(lines[:20_000]).encode() + b"1,-2\n")
    for direct in (True, False):
        with pytest.raises(Declined) as info:
            for _ in read_int_edge_blocks(bad, layout, 3000, block_size=4096, direct=direct):
                pass
        assert info.value.line == 20_001
    for _ in range(20):  # dropped after a block, its reading thread mid-file
        reader = _C.EdgeTextReader(str(path), ",", block_bytes=4096, direct=True)
        assert reader.read(np.empty(100, np.int64), np.empty(100, np.int64)) >= 1
        del reader


def test_direct_reads_fall_back_where_the_file_system_refuses_them(tmp_path):
    """On a file system without ``O_DIRECT`` (tmpfs) the reader reads buffered."""
    from gnncore import _C

    shm = Path("/dev/shm")
    if not shm.is_dir() or opens_direct(shm):
        pytest.skip("needs a /dev/shm that refuses O_DIRECT (tmpfs)")
    path = shm / f"gnncore-direct-{threading.get_ident()}.csv"
    path.write_text("".join(f"{i},{i + 1}\n" for i in range(5000)))
    try:
        reader = _C.EdgeTextReader(str(path), ",", direct=True)
        assert not reader.reading_direct
        blocks = list(read_int_edge_blocks(path, Layout(",", False, 2, 0), 10_000, direct=True))
        assert len(blocks) == 1 and blocks[0][0].tolist() == list(range(5000))
    finally:
        path.unlink()
