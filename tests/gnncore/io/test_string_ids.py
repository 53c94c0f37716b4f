"""Bounded-memory ingestion of string ids: the in-memory path's graph directory, byte for byte."""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import gnncore.io.bounded.name_lookup as name_lookup
import gnncore.io.bounded.names as names_module
import gnncore.io.bounded.string_ids as string_ids
import gnncore.usage as usage_module
from gnncore.errors import InputError
from gnncore.io import ingest
from gnncore.io.bounded.names import NameCollector, SortedNames, merge_name_runs, write_name_run
from gnncore.io.canonical import node_id_table
from gnncore.store import GraphDir
from gnncore.store.writer import PARQUET_OPTIONS

TINY = 64 << 10  # names spilled in many runs, many ranges of names: many passes
NAMES = ["é", "ñandú", "日本", "Zoë", "a b", "10", "9", "x,y", "", "🙂"]


def digests(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.iterdir()}


def random_names(seed: int, count: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [f"user_{i}" for i in rng.choice(10**7, count, replace=False)] + NAMES


def random_edges(seed: int, names: list[str], num_edges: int) -> list[tuple[str, str]]:
    """Edges with repeats, reversed repeats and self-loops."""
    rng = np.random.default_rng(seed)
    pick = [n for n in names if n]  # an empty id is an error
    src = rng.integers(0, len(pick), num_edges)
    dst = rng.integers(0, len(pick), num_edges)
    k = num_edges // 10
    src[:k], dst[:k] = dst[k : 2 * k], src[k : 2 * k]
    dst[2 * k : 3 * k] = src[2 * k : 3 * k]
    return [(pick[a], pick[b]) for a, b in zip(src, dst)]


def csv_field(name: str, quote: bool) -> str:
    return f'"{name}"' if quote or "," in name else name


def write_csv(path: Path, edges: list[tuple[str, str]], header: bool = True) -> Path:
    lines = ["src,dst"] if header else []
    lines += [f"{csv_field(a, i % 3 == 0)},{csv_field(b, False)}" for i, (a, b) in
              enumerate(edges)]  # fmt: skip
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def both(tmp_path: Path, source: Path, budget: int = TINY, **kwargs):
    """Ingest in memory and in bounded memory; the directories must be the same."""
    mem = ingest(source, tmp_path / "mem", memory_budget=None, **kwargs)
    ext = ingest(source, tmp_path / "ext", memory_budget=budget, **kwargs)
    assert digests(tmp_path / "ext") == digests(tmp_path / "mem")
    GraphDir.open(tmp_path / "ext").validate(checksums=True)
    for field in ("num_nodes", "num_input_edges", "self_loops_removed", "duplicates_removed",
                  "num_canonical_edges", "num_edges", "directed", "details"):  # fmt: skip
        assert getattr(mem, field) == getattr(ext, field), field
    assert ext.memory_budget == budget and mem.details["id_type"] == "string"
    return mem, ext


class Spy:
    """Counts the merges of runs of names and the ranges of the remap passes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.merged: list[int] = []  # the runs of each merge
        self.ranges: list[int] = []
        merge, ranges = names_module.merge_name_runs, SortedNames.ranges

        def counted_merge(runs, *args, **kwargs):
            self.merged.append(len(runs))
            return merge(runs, *args, **kwargs)

        def counted_ranges(names, budget):
            found = ranges(names, budget)
            self.ranges.append(len(found))
            return found

        monkeypatch.setattr(names_module, "merge_name_runs", counted_merge)
        monkeypatch.setattr(SortedNames, "ranges", counted_ranges)


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("id_type", ["string", "auto"])
def test_spilled_names_same_directory(tmp_path, monkeypatch, directed, id_type):
    spy = Spy(monkeypatch)
    source = write_csv(tmp_path / "g.csv", random_edges(1, random_names(1, 3000), 12000))
    mem, ext = both(tmp_path, source, id_type=id_type, directed=directed, seed=5)
    assert ext.num_nodes > 2500 and ext.self_loops_removed > 0
    assert spy.merged[0] >= 3 and spy.ranges[0] >= 3  # several runs and ranges: a pass each
    names = GraphDir.open(tmp_path / "ext").node_ids()["raw_id"].to_list()
    assert names == sorted(names, key=lambda s: s.encode()) and "x,y" in names
    # nothing left beside the output: no scratch, no temporary directories
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ext", "g.csv", "mem"]


def test_multi_pass_merge(tmp_path, monkeypatch):
    from gnncore.io.bounded.text_ingest import ingest_edgelist_external

    spy = Spy(monkeypatch)
    source = write_csv(tmp_path / "g.csv", random_edges(2, random_names(2, 4000), 9000))
    ingest(source, tmp_path / "mem", memory_budget=None)
    ingest_edgelist_external(source, tmp_path / "ext", memory_budget=TINY, max_fan_in=2)
    assert digests(tmp_path / "ext") == digests(tmp_path / "mem")
    assert len(spy.merged) > 4 and set(spy.merged) == {2}  # merges of merged runs


def test_names_in_memory_one_range(tmp_path, monkeypatch):
    spy = Spy(monkeypatch)
    source = write_csv(tmp_path / "g.csv", random_edges(3, random_names(3, 500), 3000))
    both(tmp_path, source, budget=1 << 30, id_type="string")
    assert spy.merged == [] and spy.ranges == [1]


def test_layouts_gzip_comments_weights(tmp_path):
    text = (
        "# a SNAP comment\n\nalice  bob 0.5\n bob\tcarol  1\ncarol alice 2\n\n# mid\n"
        "dave dave 1\nerin   alice 3\nbob alice 1\n日本 bob 2\n"
    )
    source = tmp_path / "g.txt.gz"
    source.write_bytes(gzip.compress(text.encode()))
    mem, ext = both(tmp_path, source)
    assert ext.details["ignored_weight_column"] is True
    assert ext.num_input_edges == 7 and ext.self_loops_removed == 1


def test_odd_quote_in_a_comment_mid_file(tmp_path):
    edges = random_edges(11, random_names(11, 400), 3000)
    lines = ["src,dst"] + [f"{csv_field(a, i % 3 == 0)},{csv_field(b, False)}" for i, (a, b) in
                           enumerate(edges)]  # fmt: skip
    lines.insert(1500, '# a comment with one " quote')  # the blocks run on past it
    source = tmp_path / "g.csv"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    mem, ext = both(tmp_path, source)
    assert ext.num_input_edges == 3000


@pytest.mark.parametrize("sep", ["\t", " "])
def test_tab_and_space_without_header(tmp_path, sep):
    plain = [n for n in random_names(4, 800) if " " not in n and "," not in n]
    edges = random_edges(4, plain, 4000)
    source = tmp_path / "g.txt"
    source.write_text("".join(f"{a}{sep}{b}\n" for a, b in edges), encoding="utf-8")
    mem, ext = both(tmp_path, source, id_type="string")
    assert ext.details["header"] is False


def test_auto_ids_that_are_not_all_integers(tmp_path):
    # 64-bit overflow and a word: the in-memory path reads every id as a string
    source = tmp_path / "g.csv"
    source.write_text("1,2\n2,10\n99999999999999999999,1\n9,x9\n")
    mem, ext = both(tmp_path, source)
    assert GraphDir.open(tmp_path / "ext").node_ids()["raw_id"].to_list() == [
        "1", "10", "2", "9", "99999999999999999999", "x9"
    ]  # fmt: skip


def test_name_collector_and_merge_against_python(tmp_path):
    rng = np.random.default_rng(5)
    collector = NameCollector(tmp_path, 8 << 10, max_fan_in=3)
    seen: set[str] = set()
    for _ in range(30):
        batch = [f"n{v}" for v in rng.integers(0, 5000, 400)] + ["ü", "日"]
        collector.add(pl.Series(batch))
        seen.update(batch)
    assert collector.runs_written > 3
    names = collector.finish()
    assert collector.merge_passes >= 2 and len(collector.runs) == 1
    expected = sorted(seen, key=lambda s: s.encode())
    assert pl.concat(list(names.chunks())).to_list() == expected
    assert names.count == len(expected) == sum(rows for rows, _ in names.batches)
    # the ranges cover the names once, in order, each within its budget
    ranges = names.ranges(2 << 10)
    assert len(ranges) > 3
    tables = [names.range_table(*r) for r in ranges]
    assert pl.concat(tables)["name"].to_list() == expected
    assert pl.concat(tables)["id"].to_list() == list(range(len(expected)))


def test_names_held_in_memory_fit_one_range(tmp_path):
    budget = 64 << 10
    collector = NameCollector(tmp_path, budget)
    for start in range(0, 1200, 100):  # about half the budget in all
        collector.add(pl.Series([f"name-{i}" for i in range(start, start + 100)] * 2))
    names = collector.finish()
    assert collector.runs_written == 0 and names.series is not None and names.count == 1200
    assert names_module.names_cost(names.series) <= budget
    assert names.ranges(budget) == [(0, 0, 1)]


def test_merge_of_overlapping_runs(tmp_path):
    rng = np.random.default_rng(6)
    runs, everything = [], set()
    for i in range(4):
        values = sorted({f"{v:05d}" for v in rng.integers(0, 3000, 700)})
        everything.update(values)
        runs.append(tmp_path / f"r{i}.arrow")
        chunks = [pl.Series(values[j : j + 50]) for j in range(0, len(values), 50)]
        write_name_run(runs[-1], chunks)
    batches = merge_name_runs(runs, tmp_path / "out.arrow", batch_bytes=1000)
    got = pl.concat(list(names_module.read_name_run(tmp_path / "out.arrow")))
    assert got.to_list() == sorted(everything)
    assert sum(rows for rows, _ in batches) == len(everything) and len(batches) > 10


@pytest.mark.parametrize("by_hash", [True, False])
@pytest.mark.parametrize("whole", [True, False])
def test_range_lookup_against_a_dict(by_hash, whole):
    names = sorted({f"n{v}" for v in range(0, 3000, 3)} | {"ü", "日本"}, key=str.encode)
    first, end = (0, len(names)) if whole else (200, 700)
    table = pl.DataFrame({"name": names[first:end], "id": range(first, end)})
    lookup = name_lookup.RangeLookup(table, whole, by_hash=by_hash)
    assert lookup.by_hash == by_hash
    rng = np.random.default_rng(9)
    queries = [names[i] for i in rng.integers(0, len(names), 5000)]
    position = {name: i for i, name in enumerate(names)}
    expected = [position[q] if first <= position[q] < end else -1 for q in queries]
    assert lookup.ids(pl.Series(queries)).tolist() == expected


@pytest.mark.parametrize("block_bytes", [1, 7, 64, 1000])
def test_text_blocks_end_at_line_ends_outside_quotes(tmp_path, block_bytes):
    lines = ["# head", "src,dst"] + [
        f'"a{i}\nb{i}","x ""{i}"""' if i % 4 == 0 else f"a{i},b{i}" for i in range(300)
    ]
    path = tmp_path / "g.csv"
    path.write_bytes("\r\n".join(lines).encode())  # no final line end
    blocks = list(string_ids.text_blocks(path, block_bytes, 2, quoted=True))
    assert b"".join(blocks) == "\r\n".join(lines[2:]).encode()
    assert all(b.endswith(b"\n") and b.count(b'"') % 2 == 0 for b in blocks[:-1])
    plain = list(string_ids.text_blocks(path, block_bytes, 0, quoted=False))
    assert b"".join(plain) == path.read_bytes() and all(b.endswith(b"\n") for b in plain[:-1])


def test_node_ids_streamed_in_polars_row_groups(tmp_path):
    names = pl.Series([f"user_{i:07d}" for i in range(250_000)])  # three row groups
    run = tmp_path / "names.arrow"
    batches = write_name_run(run, [names.slice(i, 7777) for i in range(0, len(names), 7777)])
    names_module.write_node_ids(tmp_path / "a.parquet", SortedNames(len(names), run=run,
                                                                  batches=batches))  # fmt: skip
    node_id_table(names).write_parquet(tmp_path / "b.parquet", **PARQUET_OPTIONS)
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()


# Errors: as the in-memory path words them, naming the file and line; no output


@pytest.mark.parametrize(
    ("bad", "line"),
    [("a,b,c,d", 2501), ("solo", 2501), ("x,", 2501), ("u,v,w", None), ('"open,q', None)],
)
def test_errors_as_the_in_memory_path(tmp_path, bad, line):
    edges = random_edges(7, random_names(7, 600), 3000)
    lines = ["src,dst"] + [f"{a.replace(',', '')},{b.replace(',', '')}" for a, b in edges]
    lines[2500] = bad
    source = tmp_path / "bad.csv"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as in_memory:
        ingest(source, tmp_path / "mem", id_type="string", memory_budget=None)
    with pytest.raises(InputError) as bounded:
        ingest(source, tmp_path / "ext", id_type="string", memory_budget=TINY)
    assert str(bounded.value) == str(in_memory.value)
    assert bounded.value.path == source
    if line is not None:
        assert bounded.value.line == line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]


def test_gzip_errors_name_the_source(tmp_path):
    source = tmp_path / "g.csv.gz"
    source.write_bytes(gzip.compress(b"a,b\nb,c\nc,d,e,f\n"))
    with pytest.raises(InputError) as info:
        ingest(source, tmp_path / "out", id_type="string", memory_budget=TINY)
    assert info.value.path == source and info.value.line == 3
    truncated = tmp_path / "t.csv.gz"
    truncated.write_bytes(gzip.compress(("a,b\n" * 5000).encode())[:-30])
    with pytest.raises(InputError, match="gzip") as info:
        ingest(truncated, tmp_path / "out", id_type="string", memory_budget=TINY)
    assert info.value.path == truncated
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.csv.gz", "t.csv.gz"]


@pytest.mark.parametrize("text", ["# only a comment\n\n", "src,dst\n"])
def test_empty_inputs(tmp_path, text):
    source = tmp_path / "g.csv"
    source.write_text(text)
    with pytest.raises(InputError) as in_memory:
        ingest(source, tmp_path / "mem", id_type="string", memory_budget=None)
    with pytest.raises(InputError) as bounded:
        ingest(source, tmp_path / "ext", id_type="string", memory_budget=TINY)
    assert str(bounded.value) == str(in_memory.value)


def test_existing_output_kept_on_error(tmp_path):
    good = write_csv(tmp_path / "good.csv", [("a", "b"), ("b", "c")])
    ingest(good, tmp_path / "out", memory_budget=TINY)
    before = digests(tmp_path / "out")
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\nb\n")
    with pytest.raises(InputError):
        ingest(bad, tmp_path / "out", memory_budget=TINY)
    assert digests(tmp_path / "out") == before


def test_failure_in_the_remap_pass_leaves_nothing(tmp_path, monkeypatch):
    source = write_csv(tmp_path / "g.csv", random_edges(10, random_names(10, 2000), 6000))
    calls = []
    original = name_lookup.RangeLookup.ids

    def failing(self, names):
        calls.append(len(names))
        if len(calls) == 10:  # a later range's pass (6 batches a pass): id files exist
            raise OSError("disk full")
        return original(self, names)

    monkeypatch.setattr(name_lookup.RangeLookup, "ids", failing)
    with pytest.raises(OSError, match="disk full"):
        ingest(source, tmp_path / "out", id_type="string", memory_budget=TINY)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.csv"]


# Choosing the path


def test_auto_budget_takes_string_ids_bounded(tmp_path, monkeypatch):
    source = write_csv(tmp_path / "g.csv", random_edges(8, random_names(8, 300), 3000))
    ingest(source, tmp_path / "mem", memory_budget=None)
    monkeypatch.setattr(usage_module, "default_memory_budget", lambda: TINY)  # < the estimate
    report = ingest(source, tmp_path / "auto")
    assert report.memory_budget == TINY and report.details["id_type"] == "string"
    assert digests(tmp_path / "auto") == digests(tmp_path / "mem")
    monkeypatch.setattr(usage_module, "default_memory_budget", lambda: 1 << 30)  # it fits,
    assert ingest(source, tmp_path / "fits").memory_budget == 1 << 30  # and still goes bounded


def test_cli_memory_budget_with_string_ids(tmp_path):
    source = write_csv(tmp_path / "g.csv", random_edges(9, random_names(9, 200), 1500))
    summary = tmp_path / "summary.json"
    cmd = [sys.executable, "-m", "gnncore.cli.main", "ingest", str(source), str(tmp_path / "ext"),
           "--memory-budget", "64KiB", "--id-type", "string", "--no-progress",
           "--json", str(summary)]  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    report = json.loads(summary.read_text())
    assert report["memory_budget"] == TINY and report["details"]["id_type"] == "string"
    # the same settings: auto would add why it read strings (stats.id_type_reason)
    ingest(source, tmp_path / "mem", id_type="string", memory_budget=None)
    assert digests(tmp_path / "ext") == digests(tmp_path / "mem")
