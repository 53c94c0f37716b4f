"""The distributed feature store on 2 real gloo processes over 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import planted_graph
from gnncore.distributed.launch import RankFailed, spawn_local
from gnncore.distributed.rank_data import RankData
from gnncore.distributed.rank_write import write_rank_data
from gnncore.partition.run import partition_graph
from gnncore.partition.store import PartitionDir
from gnncore.store import GraphDir

TIMEOUT = 60.0


def _requests(rank: int, data, rng: np.random.Generator) -> list[tuple[list[str], list]]:
    """Each rank's gathers, as many on every rank: (attributes, one index per attribute)."""
    n = data.num_nodes
    lo, hi = data.core_range
    other = np.setdiff1d(np.arange(n), np.arange(lo, hi))
    mixed = rng.integers(0, n, 60)
    mixed[:5] = mixed[5:10]  # repeats
    return [
        (["x", "y"], [mixed, mixed]),
        # An empty request on rank 1 while rank 0 asks for rank 1's rows.
        (["x", "y"], [other[:7], other[:7]] if rank == 0 else [np.zeros(0, np.int64)] * 2),
        (["x"], [rng.choice(other, 20)]),  # remote only, one attribute
        (["y"] if rank == 0 else ["x", "y"], [np.arange(lo, hi)] * (1 if rank == 0 else 2)),
        (["x", "y"], [rng.integers(0, n, 30), rng.integers(0, n, 11)]),  # different indices
    ]


def _worker(rank: int, world: int, out: str, seed: int) -> dict:
    import torch
    from torch_geometric.data import TensorAttr

    from gnncore.distributed.feature_store import DistFeatureStore
    from gnncore.distributed.rank_data import RankData

    data = RankData.open(out, rank)
    store = DistFeatureStore(data)
    rng = np.random.default_rng([seed, rank])
    answers = []
    for names, indices in _requests(rank, data, rng):
        attrs = [TensorAttr(None, n, torch.as_tensor(i)) for n, i in zip(names, indices)]
        rows = store.multi_get_tensor(attrs)
        answers.append([(n, np.asarray(i), r.numpy()) for n, i, r in zip(names, indices, rows)])
    single = store.get_tensor(TensorAttr(None, "x", torch.tensor([0, data.num_nodes - 1])))
    return {
        "answers": answers,
        "single": single.numpy(),
        "stats": store.all_stats(),
        "replica": _with_replica(rank, out),
    }


@pytest.fixture(scope="module")
def rank_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, np.ndarray]:
    root = tmp_path_factory.mktemp("dfs")
    graph = planted_graph(root / "g", num_nodes=300, features=7)  # odd: rows of 36 bytes
    partition_graph(graph, root / "p", method="metis", parts=2)
    out = write_rank_data(graph, root / "p", root / "r")
    g = GraphDir.open(graph)
    old = np.asarray(PartitionDir.open(root / "p", g).array("relabel_old_of_new"))
    return out, np.asarray(g.features())[old], np.asarray(g.labels())[old]


@pytest.fixture(scope="module")
def gathered(rank_dir) -> list[dict]:
    """One run of 2 gloo ranks (starting them dominates the time) for the tests below."""
    return spawn_local(_worker, 2, (str(rank_dir[0]), 7), timeout=TIMEOUT, run_timeout=TIMEOUT)


def test_gather_returns_the_rows_of_the_whole_matrix(rank_dir, gathered) -> None:
    out, x, y = rank_dir
    whole = {"x": x, "y": y}
    results = gathered
    offsets = RankData.open(out, 0).offsets
    for result in results:
        for answer in result["answers"]:
            for name, index, rows in answer:
                np.testing.assert_array_equal(rows, whole[name][index])
        np.testing.assert_array_equal(result["single"], x[[0, len(x) - 1]])
    stats = results[0]["stats"]
    assert stats == results[1]["stats"]  # all_stats: every rank sees every rank's
    for rank, s in enumerate(stats):
        assert s["gathers"] == 6
        # Per gather, the distinct ids split into local and remote rows.
        expected_local = expected_remote = 0
        for answer in results[rank]["answers"]:
            ids = np.unique(np.concatenate([a[1] for a in answer]))
            mine = (ids >= offsets[rank]) & (ids < offsets[rank + 1])
            expected_local += int(mine.sum())
            expected_remote += int((~mine).sum())
        expected_local += 1  # the single get_tensor: ids 0 and N - 1, one on each rank
        expected_remote += 1
        assert (s["local_rows"], s["remote_rows"]) == (expected_local, expected_remote)
        assert s["replica_rows"] == 0
    # What one rank fetched, the other served, row for row and byte for byte.
    assert stats[0]["remote_rows"] == stats[1]["served_rows"] > 0
    assert stats[1]["remote_rows"] == stats[0]["served_rows"] > 0
    assert stats[0]["remote_bytes"] == stats[1]["served_bytes"]
    assert stats[1]["remote_bytes"] == stats[0]["served_bytes"]
    assert 0 < stats[0]["remote_share"] < 1


def _with_replica(rank: int, out: str) -> dict:
    """Rank ``r`` keeps the first 5 rows of the other rank and asks for its first 8."""
    import torch

    from gnncore.distributed.feature_store import DistFeatureStore, Replica
    from gnncore.distributed.rank_data import RankData

    data = RankData.open(out, rank)
    peer = RankData.open(out, 1 - rank)  # the test's shortcut to the peer's rows
    lo, _ = peer.core_range
    ids = torch.arange(lo, lo + 5)
    replica = Replica(ids, {"x": torch.from_numpy(np.array(peer.array("features")[:5]))})
    store = DistFeatureStore(data, replica=replica)
    want = torch.arange(lo, lo + 8)  # 5 replicated, 3 fetched
    rows = store.get_tensor(None, "x", want)
    labels = store.get_tensor(None, "y", want)  # the replica has no labels: all 8 fetched
    return {
        "rows": rows.numpy(),
        "labels": labels.numpy(),
        "ids": want.numpy(),
        "stats": store.stats.as_dict(),
    }


def test_replicated_rows_are_served_locally(rank_dir, gathered) -> None:
    _, x, y = rank_dir
    for result in (r["replica"] for r in gathered):
        np.testing.assert_array_equal(result["rows"], x[result["ids"]])
        np.testing.assert_array_equal(result["labels"], y[result["ids"]])
        s = result["stats"]
        assert (s["replica_rows"], s["local_rows"], s["remote_rows"]) == (5, 5, 3 + 8)
        assert s["served_rows"] == 3 + 8


def _lonely_worker(rank: int, world: int, out: str) -> None:
    import datetime
    import time

    import torch
    import torch.distributed as dist

    from gnncore.distributed.feature_store import DistFeatureStore
    from gnncore.distributed.rank_data import RankData

    # A group of its own with a short collective timeout (the default group's
    # also bounds the start-up rendezvous, which a loaded machine may slow down).
    group = dist.new_group(timeout=datetime.timedelta(seconds=2))
    store = DistFeatureStore(RankData.open(out, rank), group=group)
    if rank == 0:
        store.get_tensor(None, "x", torch.tensor([0]))
    else:  # alive, but never joins the gather
        time.sleep(30)


def test_an_unmatched_gather_fails_instead_of_hanging(rank_dir) -> None:
    out, _, _ = rank_dir
    with pytest.raises(RankFailed, match=r"rank 0 of 2 failed:\n(.|\n)*all_to_all_single"):
        spawn_local(_lonely_worker, 2, (str(out),), timeout=TIMEOUT, run_timeout=TIMEOUT)
