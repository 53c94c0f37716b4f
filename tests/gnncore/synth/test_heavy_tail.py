"""The heavy-tailed generators (gnncore.synth.heavy_tail): powerlaw and bipartite."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gnncore import synth
from gnncore.cli.main import main
from gnncore.store import GraphDir
from gnncore.synth.dataset import dataset_stage_key, spec_dict
from gnncore.synth.heavy_tail import side_sizes

NODES = 20_000


def spec(model: str = "bipartite", **kw) -> synth.SynthSpec:
    values = dict(num_nodes=NODES, avg_degree=8, num_classes=4, num_features=4, seed=5)
    return synth.SynthSpec(**{**values, "model": model, **kw})


def edges(s: synth.SynthSpec, chunk: int = 4_000_000) -> tuple[np.ndarray, np.ndarray]:
    chunks = list(synth.iter_edge_chunks(s, chunk))
    return np.concatenate([a for a, _ in chunks]), np.concatenate([b for _, b in chunks])


def degrees(s: synth.SynthSpec, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    return np.bincount(src, minlength=s.num_nodes) + np.bincount(dst, minlength=s.num_nodes)


def tail_slope(deg: np.ndarray) -> float:
    """Log-log slope of the rank against the degree over the hubs (ranks 5 to 500):
    about ``-(gamma - 1)`` for degrees ``P(d) ~ d ** -gamma``."""
    ordered = np.sort(deg)[::-1][5:500].astype(np.float64)
    ranks = np.arange(6, 501, dtype=np.float64)
    return float(np.polyfit(np.log(ordered), np.log(ranks), 1)[0])


@pytest.mark.parametrize("exponent", [2.2, 2.8])
def test_powerlaw_degrees_are_heavy_tailed(exponent):
    s = spec("powerlaw", power_law_exponent=exponent)
    src, dst = edges(s)
    assert len(src) == s.num_edges and src.min() >= 0 and max(src.max(), dst.max()) < NODES
    deg = degrees(s, src, dst)
    assert deg.mean() == pytest.approx(8.0)
    assert deg.max() > 25 * deg.mean()  # hubs
    assert np.median(deg) < deg.mean()  # and a long tail of small degrees
    assert tail_slope(deg) == pytest.approx(-(exponent - 1.0), abs=0.35)


def test_bipartite_has_no_edge_inside_a_side_and_zipf_on_both():
    s = spec("bipartite", power_law_exponent=2.3, right_exponent=2.9, left_fraction=0.3)
    left, right = side_sizes(NODES, 0.3)
    assert (left, right) == (6_000, 14_000)
    src, dst = edges(s)
    assert (src < left).all() and (dst >= left).all() and (dst < NODES).all()
    deg = degrees(s, src, dst)
    for side, exponent in ((deg[:left], 2.3), (deg[left:], 2.9)):
        assert side.max() > 20 * side.mean()
        assert tail_slope(side) == pytest.approx(-(exponent - 1.0), abs=0.35)


@pytest.mark.parametrize("model", ["powerlaw", "bipartite"])
def test_deterministic_for_a_seed_whatever_the_chunks(model):
    s = spec(model)
    src, dst = edges(s)
    src2, dst2 = edges(s, chunk=7_777)  # chunks straddling the generator's blocks
    assert np.array_equal(src, src2) and np.array_equal(dst, dst2)
    other, _ = edges(spec(model, seed=6))
    assert not np.array_equal(src, other)
    y = synth.node_labels(s)
    assert np.array_equal(y, synth.node_labels(s)) and set(np.unique(y)) == {0, 1, 2, 3}


def test_planted_records_and_stage_keys_do_not_name_the_new_fields():
    planted = spec("planted")
    assert not {"model", "right_exponent", "left_fraction"} & set(spec_dict(planted))
    assert spec_dict(spec("bipartite"))["model"] == "bipartite"
    assert dataset_stage_key(planted) != dataset_stage_key(spec("powerlaw"))


@pytest.mark.parametrize(
    "bad",
    [{"model": "er"}, {"right_exponent": 2.0}, {"left_fraction": 0.0}, {"left_fraction": 1.0}],
)
def test_bad_settings_are_refused(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        spec(**{"model": "bipartite", **bad})


def test_cli_writes_a_bipartite_graph_directory(tmp_path):
    out, summary = tmp_path / "g", tmp_path / "summary.json"
    args = ["synth", str(out), "--model", "bipartite", "--nodes", "3000", "--avg-degree", "6",
            "--classes", "3", "--features", "4", "--exponent", "2.4", "--left-fraction", "0.4",
            "--memory-budget", "64KiB", "--no-progress", "--json", str(summary)]  # fmt: skip
    assert main(args) == 0
    report = json.loads(summary.read_text())
    assert 0 < report["num_canonical_edges"] < 9_000 and report["duplicates_removed"] > 0
    graph = GraphDir.open(out)
    graph.validate(checksums=True)
    assert graph.manifest.stats["synth_spec"]["model"] == "bipartite"
    indptr, indices = np.asarray(graph.indptr), np.asarray(graph.indices)
    rows = np.repeat(np.arange(3000), np.diff(indptr))
    assert ((rows < 1200) != (indices < 1200)).all()  # every edge joins the two sides
