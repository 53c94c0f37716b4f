"""Bounded-memory ingestion: the same graph directory, byte for byte, as in memory."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gnncore.errors import InputError
from gnncore.io import ingest
from gnncore.io.bounded.edges_parquet import parquet_row_groups
from gnncore.io.bounded.ids import IdCollector, dense_lookup
from gnncore.io.bounded.phases import PHASES
from gnncore.io.bounded.text_ingest import ingest_edgelist_external
from gnncore.store import GraphDir

TINY = 64 << 10  # forces many parse batches, sort runs and the memory-mapped permutation


def write_edges(path: Path, src, dst, *, sep: str = ",", header: str | None = "src,dst") -> Path:
    lines = [] if header is None else [header]
    lines += [f"{a}{sep}{b}" for a, b in zip(src, dst)]
    path.write_text("\n".join(lines) + "\n")
    return path


def random_edges(seed: int, num_edges: int, num_ids: int, id_space: int):
    rng = np.random.default_rng(seed)
    ids = rng.choice(id_space, num_ids, replace=False)
    src = ids[rng.integers(0, num_ids, num_edges)]
    dst = ids[rng.integers(0, num_ids, num_edges)]
    # repeats, reversed repeats and self-loops on purpose
    k = num_edges // 10
    src[:k], dst[:k] = dst[k : 2 * k], src[k : 2 * k]
    dst[2 * k : 2 * k + k // 2] = src[2 * k : 2 * k + k // 2]
    return src, dst


def assert_same_dir(a: Path, b: Path) -> None:
    names_a = sorted(p.name for p in a.iterdir())
    names_b = sorted(p.name for p in b.iterdir())
    assert names_a == names_b
    for name in names_a:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def both(tmp_path: Path, source: Path, budget: int = TINY, **kwargs):
    mem = ingest(source, tmp_path / "mem", memory_budget=None, **kwargs)
    ext = ingest(source, tmp_path / "ext", memory_budget=budget, **kwargs)
    assert_same_dir(tmp_path / "mem", tmp_path / "ext")
    GraphDir.open(tmp_path / "ext").validate(checksums=True)
    for field in ("num_nodes", "num_input_edges", "self_loops_removed", "duplicates_removed",
                  "num_canonical_edges", "num_edges", "directed", "details"):  # fmt: skip
        assert getattr(mem, field) == getattr(ext, field), field
    return mem, ext


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize(
    ("num_edges", "num_ids", "id_space"),
    [
        (9000, 700, 2000),  # dense ids with gaps: the lookup table
        (9000, 3000, 1 << 32),  # sparse ids below 2**32: packed keys, binary search
        (60000, 70000, 80000),  # past the presence array's limit, dense: a lookup table
        (9000, 3000, 10**15),  # wider ids: the general path (parsed again), sorted id runs
        (300, 40, 60),  # many repeats
    ],
)
@pytest.mark.parametrize("budget", [TINY, 1 << 30])
def test_same_directory_as_in_memory(tmp_path, directed, num_edges, num_ids, id_space, budget):
    src, dst = random_edges(num_edges + num_ids, num_edges, num_ids, id_space)
    source = write_edges(tmp_path / "g.csv", src, dst)
    mem, ext = both(tmp_path, source, budget, directed=directed, id_type="int", seed=7)
    assert ext.memory_budget == budget
    assert set(ext.phases) == set(PHASES)
    assert ext.peak_rss_bytes and ext.peak_rss_bytes > 0
    assert mem.memory_budget is None
    # nothing left beside the output: no scratch, no temporary directories
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ext", "g.csv", "mem"]


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("budget", [TINY, 1 << 30])
def test_more_nodes_than_a_key_holds_same_directory(tmp_path, monkeypatch, directed, budget):
    """Past ``2**32`` nodes the ids do not fit a packed key and the stream writer
    sorts int64 pairs instead (:mod:`gnncore.io.bounded.pair_graph`): the same
    directory, byte for byte. The key limit is lowered so a small graph takes it."""
    import gnncore.io.bounded.parse as parse
    import gnncore.io.bounded.stream as stream

    monkeypatch.setattr(parse, "MAX_KEY_ID", 0)
    monkeypatch.setattr(stream, "MAX_KEY_ID", 0)
    src, dst = random_edges(21, 6000, 700, 5000)
    source = write_edges(tmp_path / "g.csv", src, dst)
    both(tmp_path, source, budget, directed=directed, id_type="int", seed=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ext", "g.csv", "mem"]


def test_multi_pass_merge_and_auto_ids(tmp_path):
    src, dst = random_edges(3, 20000, 5000, 10**12)
    source = write_edges(tmp_path / "g.txt", src, dst, sep="\t", header=None)
    mem = ingest(source, tmp_path / "mem", memory_budget=None)
    ext = ingest_edgelist_external(source, tmp_path / "ext", memory_budget=TINY, max_fan_in=2)
    assert_same_dir(tmp_path / "mem", tmp_path / "ext")
    assert ext.details == mem.details


def test_layouts_gzip_comments_weights(tmp_path):
    text = "# a SNAP comment\n\n1  2 0.5\n 2\t3  1\n3 1 2\n\n# mid\n4 4 1\n5   1 3\n2 1 1\n"
    source = tmp_path / "g.txt.gz"
    source.write_bytes(gzip.compress(text.encode()))
    mem, ext = both(tmp_path, source)
    assert ext.details["ignored_weight_column"] is True
    assert ext.num_input_edges == 6 and ext.self_loops_removed == 1


def test_single_edge_and_only_self_loops(tmp_path):
    one = write_edges(tmp_path / "one.csv", [5], [9])
    both(tmp_path, one)
    loops = write_edges(tmp_path / "loops.csv", [3, 4, 3], [3, 4, 3])
    for d in ("mem", "ext"):
        (tmp_path / d).rename(tmp_path / f"{d}-one")
    mem, ext = both(tmp_path, loops, directed=True)
    assert ext.num_canonical_edges == 0 and ext.num_nodes == 2


def test_row_groups_follow_polars():
    assert parquet_row_groups(0) == []
    assert parquet_row_groups(10) == [10]
    groups = parquet_row_groups(1_100_000)
    assert sum(groups) == 1_100_000 and len(groups) > 1


def test_id_collector_switches_to_runs(tmp_path):
    ids = IdCollector(tmp_path, 2048, max_fan_in=2)  # dense limit 65536, capacity 1024
    rng = np.random.default_rng(0)
    seen = []
    for _ in range(20):
        a = rng.integers(0, 10**6, 300)
        b = rng.integers(0, 100, 300)
        ids.add(a, b)
        seen += [a, b]
    raw, lut = ids.finish()
    assert lut is None
    np.testing.assert_array_equal(raw, np.unique(np.concatenate(seen)))


def test_ids_past_the_presence_limit_that_fill_their_range_get_a_lookup_table(tmp_path):
    rng = np.random.default_rng(1)
    ids = IdCollector(tmp_path, 2048, max_fan_in=2)  # dense limit 65536, capacity 1024
    seen = []
    for _ in range(40):  # ids below 200,000, about half of them present
        a, b = rng.integers(0, 200_000, 3000), rng.integers(0, 200_000, 3000)
        ids.add(a, b)
        seen += [a, b]
    raw, lut = ids.finish()
    np.testing.assert_array_equal(raw, np.unique(np.concatenate(seen)))
    assert lut is not None and lut.dtype == np.int32 and len(lut) == raw[-1] + 1
    np.testing.assert_array_equal(lut[raw], np.arange(len(raw)))
    assert (lut >= 0).sum() == len(raw)  # absent ids: -1
    assert dense_lookup(np.array([0, 5, 10**6])) is None  # under a quarter: binary search
    assert dense_lookup(np.array([1 << 32])) is None  # beyond packed keys


def test_bad_line_names_file_and_line_and_leaves_nothing(tmp_path):
    src, dst = random_edges(1, 5000, 500, 10**6)
    lines = ["src,dst"] + [f"{a},{b}" for a, b in zip(src, dst)]
    lines[4000] = "17,x9"  # far past the first parse batches
    source = tmp_path / "bad.csv"
    source.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as info:
        ingest(source, tmp_path / "out", memory_budget=TINY, id_type="int")
    assert info.value.path == source and info.value.line == 4001
    assert "'x9' is not an integer" in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]
    # auto ids: strings, as in memory (gnncore.io.bounded.string_ids)
    both(tmp_path, source)


def test_errors_in_gzip_name_the_source(tmp_path):
    source = tmp_path / "g.csv.gz"
    source.write_bytes(gzip.compress(b"1,2\n2,3\n3,-4\n"))
    with pytest.raises(InputError) as info:
        ingest(source, tmp_path / "out", memory_budget=TINY, id_type="int")
    assert info.value.path == source and info.value.line == 3
    assert "negative" in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.csv.gz"]


def test_existing_output_kept_on_error(tmp_path):
    good = write_edges(tmp_path / "good.csv", [1, 2], [2, 3])
    ingest(good, tmp_path / "out", memory_budget=TINY)
    before = (tmp_path / "out" / "manifest.json").read_bytes()
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2\n2\n")
    with pytest.raises(InputError):
        ingest(bad, tmp_path / "out", memory_budget=TINY)
    assert (tmp_path / "out" / "manifest.json").read_bytes() == before


def test_refusals(tmp_path):
    source = write_edges(tmp_path / "g.csv", ["a", "b"], ["b", "c"])
    table = tmp_path / "nodes.csv"
    table.write_text("node_id,x\na,1\n")
    with pytest.raises(ValueError, match="node table"):
        ingest(source, tmp_path / "out", memory_budget="1GiB", nodes=table)
    with pytest.raises(ValueError, match="at least"):
        ingest(source, tmp_path / "out", memory_budget=100)


def test_next_run_removes_what_a_killed_run_left(tmp_path):
    source = write_edges(tmp_path / "g.csv", [1, 2], [2, 3])
    dead = 2**22 + 12345  # above the default pid_max: no such process
    stale = [tmp_path / f".out.ingest-{dead}-0badc0de", tmp_path / f".out.tmp-{dead}-0badc0de"]
    for path in stale:
        path.mkdir()
        (path / "run-000000.bin").write_bytes(b"x")
    mine = tmp_path / f".out.ingest-{os.getpid()}-feedface"  # a live process: kept
    mine.mkdir()
    ingest(source, tmp_path / "out", memory_budget=TINY)
    assert not any(p.exists() for p in stale)
    assert mine.exists()


def test_cli_memory_budget(tmp_path):
    src, dst = random_edges(5, 2000, 300, 10**6)
    source = write_edges(tmp_path / "g.csv", src, dst)
    summary = tmp_path / "summary.json"
    cmd = [sys.executable, "-m", "gnncore.cli.main", "ingest", str(source), str(tmp_path / "ext"),
           "--memory-budget", "64KiB", "--no-progress", "--json", str(summary)]  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    report = json.loads(summary.read_text())
    assert report["memory_budget"] == 64 << 10
    assert set(report["phases"]) == set(PHASES) and report["peak_rss_bytes"] > 0
    ingest(source, tmp_path / "mem", memory_budget=None)
    assert_same_dir(tmp_path / "mem", tmp_path / "ext")


def test_integer_ids_are_ingested_without_importing_polars(tmp_path):
    """The C++ reader parses integer ids and ``node_ids.parquet`` is written by
    the edge table's writer: the command does not pay Polars' import (0.13 s
    of every run's start-up), and the map reads back as the ids."""
    src, dst = random_edges(6, 500, 80, 10**6)
    source = write_edges(tmp_path / "g.csv", src, dst)
    code = (
        "import sys\nfrom gnncore.cli.main import main\n"
        f"sys.argv = ['gnncore', 'ingest', {str(source)!r}, {str(tmp_path / 'g')!r},"
        " '--memory-budget', '1MiB', '--no-progress']\n"
        "rc = main()\n"
        "assert 'polars' not in sys.modules, 'Polars was imported'\n"
        "sys.exit(rc)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, stdout=subprocess.DEVNULL)
    node_ids = GraphDir.open(tmp_path / "g").node_ids()
    assert node_ids is not None
    np.testing.assert_array_equal(node_ids["raw_id"].to_numpy(), np.unique(np.r_[src, dst]))
    np.testing.assert_array_equal(node_ids["node_id"].to_numpy(), np.arange(len(node_ids)))


# The C++ reader (gnncore.io.readers.edge_text) and the Polars path it hands declined files to


def _no_polars(*_args, **_kwargs):
    raise AssertionError("the Polars batches were read: the C++ reader declined")


def _lines(src, dst, fmt: str) -> list[str]:
    return [fmt.format(a, b) for a, b in zip(src, dst)]


NATIVE_LAYOUTS = {
    "header_crlf": lambda s, d: "src,dst\r\n" + "\r\n".join(_lines(s, d, "{},{}")) + "\r\n",
    "snap_comments_tabs": lambda s, d: (
        "# Directed graph\n# Nodes: x Edges: y\n"
        + "\n".join(_lines(s[:50], d[:50], "{}\t{}"))
        + "\n\n# a comment mid-file\n"
        + "\n".join(_lines(s[50:], d[50:], "{}\t{}"))
        + "\n"
    ),
    "spaces_no_final_newline": lambda s, d: "\n".join(_lines(s, d, "{} {}")),
    "whitespace_runs_weights": lambda s, d: (
        "\n".join(f" {a}\t {b}  {i % 7}.5" for i, (a, b) in enumerate(zip(s, d))) + "\n"
    ),
    "header_leading_zeros": lambda s, d: (
        "source,target,weight\n" + "\n".join(_lines(s, d, "{:06d},{},1")) + "\n"
    ),
}


@pytest.mark.parametrize("layout", sorted(NATIVE_LAYOUTS))
@pytest.mark.parametrize("block_size", [None, 13])
def test_native_reader_layouts_same_directory(tmp_path, monkeypatch, layout, block_size):
    from functools import partial

    import gnncore.io.bounded.parse as external

    src, dst = random_edges(11, 4000, 600, 5000)
    source = tmp_path / "g.txt"
    source.write_text(NATIVE_LAYOUTS[layout](src, dst))
    monkeypatch.setattr(external, "polars_batches", _no_polars)
    if block_size is not None:  # many blocks: boundaries inside ids, separators and CRLF
        reader = partial(external.read_int_edge_blocks, block_size=block_size)
        monkeypatch.setattr(external, "read_int_edge_blocks", reader)
    mem, ext = both(tmp_path, source, id_type="int")
    assert ext.num_input_edges == 4000


@pytest.mark.parametrize(
    ("odd", "wide"),
    [("+17,5", False), ("1000000000000000000,5", True), (",", False)],
)
def test_declined_files_go_to_polars_with_the_same_result(tmp_path, monkeypatch, odd, wide):
    import gnncore.io.bounded.parse as external

    src, dst = random_edges(12, 3000, 400, 5000)
    lines = ["src,dst"] + _lines(src, dst, "{},{}")
    lines[2500] = odd  # far past the first blocks: what was parsed is dropped
    source = tmp_path / "g.csv"
    source.write_text("\n".join(lines) + "\n")
    declined: list[int] = []
    original = external.read_int_edge_blocks

    def spy(*args, **kwargs):
        try:
            yield from original(*args, **kwargs)
        except external.Declined as exc:
            declined.append(exc.line)
            raise

    monkeypatch.setattr(external, "read_int_edge_blocks", spy)
    both(tmp_path, source, id_type="int")
    assert declined == ([2501, 2501] if wide else [2501])  # wide ids: parsed twice
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ext", "g.csv", "mem"]


@pytest.mark.parametrize(
    "bad",
    ["17,x9", "1,-2", "3", "1,2,3", "99999999999999999999,1", "4,", ",5"],
)
def test_errors_as_the_in_memory_path(tmp_path, bad):
    src, dst = random_edges(13, 3000, 400, 5000)
    lines = ["src,dst"] + _lines(src, dst, "{},{}")
    lines[2000] = bad
    source = tmp_path / "bad.csv"
    source.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as in_memory:
        ingest(source, tmp_path / "mem", id_type="int", memory_budget=None)
    with pytest.raises(InputError) as bounded:
        ingest(source, tmp_path / "ext", memory_budget=TINY, id_type="int")
    assert str(bounded.value) == str(in_memory.value)
    assert bounded.value.line == 2001
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]


@pytest.mark.parametrize("directed", [False, True])
def test_pairs_past_the_budget_take_the_bucket_shuffle(tmp_path, monkeypatch, directed):
    """Past half the budget (here: any size) the shuffled stream is the bounded
    bucket shuffle: the same pairs in another order, recorded in the manifest,
    reproducible; every other file as in memory."""
    from gnncore.io.bounded import shuffle

    monkeypatch.setattr(shuffle, "EXACT_SHUFFLE_BYTES", 0)
    src, dst = random_edges(4, 9000, 3000, 1 << 32)
    source = write_edges(tmp_path / "g.csv", src, dst)
    ingest(source, tmp_path / "mem", directed=directed, seed=3, memory_budget=None)
    for out in ("ext", "again"):
        ingest(source, tmp_path / out, memory_budget=TINY, directed=directed, seed=3)
    mem, ext = GraphDir.open(tmp_path / "mem"), GraphDir.open(tmp_path / "ext")
    ext.validate(checksums=True)
    assert ext.manifest.stats["shuffle_buckets"] == 2  # ~8,000 pairs, 4,096 a bucket
    assert "shuffle_buckets" not in mem.manifest.stats
    for name in sorted(p.name for p in mem.path.iterdir()):
        same = (mem.path / name).read_bytes() == (ext.path / name).read_bytes()
        assert same == (name not in ("edges_shuffled.npy", "manifest.json")), name
    shuffled = np.load(ext.path / "edges_shuffled.npy")
    reference = np.load(mem.path / "edges_shuffled.npy")
    assert shuffled.dtype == reference.dtype
    np.testing.assert_array_equal(np.unique(shuffled, axis=0), np.unique(reference, axis=0))
    assert len(np.unique(shuffled, axis=0)) == len(shuffled)
    assert not np.array_equal(np.unique(shuffled, axis=0), shuffled)  # not sorted
    assert_same_dir(tmp_path / "ext", tmp_path / "again")


def test_the_scatter_beside_the_csr_writes_the_graph_of_the_sequential_order(tmp_path, monkeypatch):
    """Undirected keys on disk: the bucket shuffle's scatter runs on a thread
    beside the CSR (its own reader of the run); the graph directory is the one
    written with the scatter after the CSR, byte for byte."""
    from gnncore.io.bounded import shuffle, stream

    monkeypatch.setattr(shuffle, "EXACT_SHUFFLE_BYTES", 0)
    src, dst = random_edges(5, 9000, 3000, 1 << 32)
    source = write_edges(tmp_path / "g.csv", src, dst)
    calls = []
    real = stream._draw_shuffle

    def spy(canon, job, beside=False):
        calls.append(beside)
        return real(canon, job, beside)

    monkeypatch.setattr(stream, "_draw_shuffle", spy)
    ingest(source, tmp_path / "beside", memory_budget=TINY, seed=4)
    assert calls == [True]
    monkeypatch.setattr(stream, "scatters_from_run", lambda *args: False)
    ingest(source, tmp_path / "after", memory_budget=TINY, seed=4)
    assert calls == [True, False]
    GraphDir.open(tmp_path / "beside").validate(checksums=True)
    assert_same_dir(tmp_path / "beside", tmp_path / "after")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["after", "beside", "g.csv"]
