"""The ``graph`` asset ingests a node table in bounded memory under the
deployment's budget (issue 27): the ``memory`` resource's size reaches
:func:`gnncore.io.ingest` as buffers, not only as a figure to report against."""

from __future__ import annotations

import numpy as np
import polars as pl

from assets import PIPELINE_ASSETS
from gnncore.store import GraphDir
from gnncore.usage import current_rss_bytes
from tests.assets.helpers import Materializer, metadata


def test_graph_takes_the_bounded_path_with_a_parquet_node_table(tmp_path) -> None:
    rng = np.random.default_rng(0)
    ids = rng.permutation(np.arange(10, 1210))
    edges = tmp_path / "edges.csv"
    src, dst = rng.choice(ids[:-20], 6000), rng.choice(ids[:-20], 6000)
    edges.write_text("src,dst\n" + "".join(f"{a},{b}\n" for a, b in zip(src, dst)))
    nodes = tmp_path / "nodes.parquet"
    x = rng.normal(size=(len(ids), 8)).astype(np.float32)
    pl.DataFrame(
        {
            "node_id": ids,
            "label": rng.integers(0, 3, len(ids)),
            **{f"f{i}": x[:, i] for i in range(8)},
        }
    ).write_parquet(nodes)
    materialize = Materializer(tmp_path / "root", "table", assets=PIPELINE_ASSETS)
    total_mib = (current_rss_bytes() >> 20) + 1024  # 1 GiB above what the process holds
    result = materialize(
        "raw_dataset",
        "graph",
        config={"raw_dataset": {"config": {"source": str(edges), "nodes": str(nodes)}}},
        budget=f"{total_mib}MiB",
    )
    meta = metadata(result, "graph")
    assert meta["memory_budget_bytes"] == total_mib << 20
    assert "| sort/dedup |" in meta["phases"]  # the bounded path took edges and table
    assert meta["num_features"] == 8 and meta["num_nodes"] == len(ids)
    graph = GraphDir.open(meta["path"])
    raw = graph.node_ids()["raw_id"].to_numpy()
    features = graph.features()
    assert features is not None
    assert np.array_equal(features[np.searchsorted(raw, ids)], x)
