"""`gnncore bench partition`: one process per run, JSON + Markdown + chart."""

from __future__ import annotations

import json

from gnncore.cli.main import main


def test_bench_runs_each_method_and_part_count(small_graph, tmp_path, capsys):
    out = tmp_path / "bench"
    code = main(
        [
            "bench",
            "partition",
            str(small_graph),
            "--parts",
            "2,3",
            "--methods",
            "metis,metis-recursive",
            "--out",
            str(out),
            "--json",
            str(tmp_path / "bench.json"),
        ]
    )
    assert code == 0
    result = json.loads((out / "bench.json").read_text())
    assert json.loads((tmp_path / "bench.json").read_text())["rows"] == result["rows"]
    runs = {(r["method"], r["parts"]) for r in result["rows"]}
    assert runs == {("metis", 2), ("metis", 3), ("metis-recursive", 2), ("metis-recursive", 3)}
    for row in result["rows"]:
        assert 0 < row["edge_cut_fraction"] < 0.5
        assert row["peak_rss_bytes"] > 20 * 2**20  # a whole Python process, measured alone
    table = (out / "bench.md").read_text()
    runs_table = table.split("Edge cut % (median")[0]
    assert runs_table.count("| metis |") == 2 and "peak RSS MiB" in runs_table
    # the same runs pivoted: one row per method, one column per p, per measure
    metis = {(r["parts"]): r for r in result["rows"] if r["method"] == "metis"}
    cuts = (
        f"| metis | {100 * metis[2]['edge_cut_fraction']:.2f} | "
        f"{100 * metis[3]['edge_cut_fraction']:.2f} |"
    )
    assert "| method | p=2 | p=3 |" in table and cuts in table
    assert "Seconds (median over shuffles)" in table and "Peak RSS MiB (median" in table
    assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_rejects_unknown_methods(small_graph, tmp_path, capsys):
    code = main(
        [
            "bench",
            "partition",
            str(small_graph),
            "--methods",
            "metis,nope",
            "--out",
            str(tmp_path / "b"),
        ]
    )
    assert code == 1
    assert "unknown methods ['nope']" in capsys.readouterr().err
