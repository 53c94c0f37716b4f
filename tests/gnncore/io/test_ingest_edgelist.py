"""Text edge lists: layouts, id remapping and the exact counts."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

from gnncore.io import ingest
from gnncore.io.readers.edge_layout import sniff
from gnncore.io.readers.edgelist import read_edges
from gnncore.store import GraphDir


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def check_dir(out: Path) -> GraphDir:
    graph = GraphDir.open(out)
    graph.validate(checksums=True)
    return graph


def edges_of(graph: GraphDir) -> list[tuple[int, int]]:
    return [tuple(r) for r in graph.edges().select("src", "dst").rows()]


def test_snap_tab_crlf_counts_and_remap(tmp_path):
    src = write(
        tmp_path / "g.txt",
        "# Directed graph: g.txt\r\n# Nodes: 5 Edges: 7\r\n"
        "10\t20\r\n20\t10\r\n30\t30\r\n10\t20\r\n40\t10\r\n# mid comment\r\n"
        "20\t40\r\n7\t10\r\n",
    )
    out = tmp_path / "out"
    report = ingest(src, out)
    assert report.format == "edgelist"
    assert report.num_input_edges == 7
    assert report.self_loops_removed == 1  # 30-30
    assert report.duplicates_removed == 2  # 20-10 and the second 10-20
    assert report.num_canonical_edges == 4
    assert report.num_edges == 8
    assert report.num_nodes == 5  # 30 is kept although only in a self-loop
    assert report.directed is False
    assert report.details["separator"] == "tab" and report.details["header"] is False
    graph = check_dir(out)
    ids = graph.node_ids()
    assert ids["raw_id"].to_list() == [7, 10, 20, 30, 40]
    assert ids["node_id"].to_list() == [0, 1, 2, 3, 4]
    # 10-20 -> (1,2); 40-10 -> (1,4); 20-40 -> (2,4); 7-10 -> (0,1)
    assert edges_of(graph) == [(0, 1), (1, 2), (1, 4), (2, 4)]
    assert sorted(map(tuple, np.asarray(graph.array("edges_shuffled")))) == edges_of(graph)
    stats = json.loads((out / "manifest.json").read_text())["stats"]
    assert stats["num_input_edges"] == 7
    assert stats["self_loops_removed"] == 1
    assert stats["duplicates_removed"] == 2
    assert stats["format"] == "edgelist"


def test_directed_keeps_reverse_edges(tmp_path):
    src = write(tmp_path / "g.txt", "1 2\n2 1\n1 2\n3 3\n2 3\n")
    report = ingest(src, tmp_path / "out", directed=True)
    assert (
        report.num_input_edges,
        report.self_loops_removed,
        report.duplicates_removed,
        report.num_canonical_edges,
        report.num_edges,
    ) == (5, 1, 1, 3, 3)
    assert report.directed is True
    graph = check_dir(tmp_path / "out")
    assert edges_of(graph) == [(0, 1), (1, 0), (1, 2)]
    assert graph.manifest.directed


def test_csv_header_detected_after_comments(tmp_path):
    src = write(tmp_path / "g.csv", "# made by hand\nsource,target\n5,6\n6,7\n")
    report = ingest(src, tmp_path / "out")
    assert report.details["header"] is True and report.details["separator"] == "comma"
    assert report.num_input_edges == 2 and report.num_nodes == 3
    assert check_dir(tmp_path / "out").node_ids()["raw_id"].to_list() == [5, 6, 7]


def test_header_override(tmp_path):
    # Looks like data (numeric), but the caller says line 1 is a header.
    src = write(tmp_path / "g.txt", "1 2\n3 4\n5 6\n")
    report = ingest(src, tmp_path / "out", header=True)
    assert report.num_input_edges == 2 and report.num_nodes == 4
    # String ids everywhere: no header is detected; --no-header keeps line 1 too.
    src2 = write(tmp_path / "s.txt", "a b\nb c\n")
    assert sniff(src2).header is False
    assert ingest(src2, tmp_path / "o2", header=False).num_input_edges == 2


def test_irregular_whitespace_blank_lines_and_trailing_spaces(tmp_path):
    src = write(tmp_path / "g.txt", "  1   2 \n\n3\t 4\r\n\n5 6   \n")
    report = ingest(src, tmp_path / "out")
    assert report.details["separator"] == "whitespace"
    assert (report.num_input_edges, report.num_nodes, report.num_canonical_edges) == (3, 6, 3)
    check_dir(tmp_path / "out")


def test_space_separated_falls_back_to_whitespace_later_in_file(tmp_path):
    lines = [f"{i} {i + 1}" for i in range(60)] + ["60  61", "61 62 "]
    src = write(tmp_path / "g.txt", "\n".join(lines) + "\n")
    report = ingest(src, tmp_path / "out")
    assert report.num_input_edges == 62 and report.num_nodes == 63
    assert report.details["separator"] == "whitespace"  # sniffed "space"; the parse fell back


def test_gzip_input(tmp_path):
    src = tmp_path / "g.txt.gz"
    src.write_bytes(gzip.compress(b"# c\n0 1\n1 2\n2 0\n2 0\n"))
    report = ingest(src, tmp_path / "out")
    assert (report.num_input_edges, report.duplicates_removed, report.num_canonical_edges) == (
        4,
        1,
        3,
    )
    assert check_dir(tmp_path / "out").manifest.name == "g"


def test_three_columns_weight_is_ignored(tmp_path):
    src = write(tmp_path / "w.tsv", "1\t2\t0.5\n2\t3\t1e-3\n3\t1\t7\n")
    report = ingest(src, tmp_path / "out")
    assert report.details["ignored_weight_column"] is True
    assert report.num_canonical_edges == 3


def test_string_ids_sorted_remap(tmp_path):
    src = write(tmp_path / "g.txt", "bob alice\nalice carol\ncarol bob\nbob bob\ndave bob\n")
    report = ingest(src, tmp_path / "out")
    assert report.details["id_type"] == "string"
    assert (report.self_loops_removed, report.duplicates_removed, report.num_nodes) == (1, 0, 4)
    graph = check_dir(tmp_path / "out")
    assert graph.node_ids()["raw_id"].to_list() == ["alice", "bob", "carol", "dave"]
    assert edges_of(graph) == [(0, 1), (0, 2), (1, 2), (1, 3)]


def test_auto_ids_become_strings_when_one_is_not_an_integer(tmp_path):
    lines = [f"{i} {i + 1}" for i in range(100)] + ["100 x7"]
    src = write(tmp_path / "g.txt", "\n".join(lines) + "\n")
    report = ingest(src, tmp_path / "out")
    assert report.details["id_type"] == "string"
    raw = check_dir(tmp_path / "out").node_ids()["raw_id"].to_list()
    assert raw[:3] == ["0", "1", "10"]  # lexicographic order for string ids
    assert report.num_nodes == 102


def test_id_type_string_keeps_leading_zeros_apart(tmp_path):
    src = write(tmp_path / "g.txt", "01 1\n1 2\n")
    assert ingest(src, tmp_path / "a", id_type="string").num_nodes == 3
    assert ingest(src, tmp_path / "b", id_type="int").num_nodes == 2


def test_sparse_large_ids_remap(tmp_path):
    big = 9_000_000_000_000
    src = write(tmp_path / "g.txt", f"{big} 5\n5 {big + 1}\n")
    report = ingest(src, tmp_path / "out")
    ids = check_dir(tmp_path / "out").node_ids()["raw_id"].to_list()
    assert ids == [5, big, big + 1] and report.num_canonical_edges == 2


def test_rerun_replaces_output(tmp_path):
    src = write(tmp_path / "g.txt", "0 1\n1 2\n")
    out = tmp_path / "out"
    ingest(src, out)
    write(src, "0 1\n1 2\n2 3\n3 4\n")
    report = ingest(src, out, seed=3)
    assert report.num_canonical_edges == 4
    graph = check_dir(out)
    assert graph.manifest.num_canonical_edges == 4
    assert graph.manifest.stats["shuffle_seed"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.txt", "out"]


def test_read_edges_layout(tmp_path):
    src = write(tmp_path / "g.csv", "a,b\n1,2\n")
    parsed = read_edges(src)
    assert parsed.layout.header and parsed.id_type == "int"
    assert parsed.src.tolist() == [1] and parsed.dst.tolist() == [2]
