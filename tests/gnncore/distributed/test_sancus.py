"""SANCUS full-graph training (``mode="sancus"``) on 2 gloo ranks.

The ranks start once for the module (:func:`_in_one_group` runs every
scenario in the same process group); the CLI test starts its own.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from conftest import planted_graph
from gnncore.partition.run import partition_graph
from gnncore.train import NodeTrainConfig
from gnncore.train.node.staleness import NEVER, Staleness, relative_change

EPOCHS = 6
CONFIG = NodeTrainConfig(
    model="gcn",
    mode="sancus",
    hidden=16,
    dropout=0.0,
    lr=0.05,
    epochs=EPOCHS,
    patience=0,
    seed=0,
    device="cpu",
)
POLICIES = {
    "always": CONFIG,
    "epoch-fixed": replace(CONFIG, staleness="epoch-fixed", staleness_bound=2),
    "epoch-adaptive": replace(CONFIG, staleness="epoch-adaptive", staleness_bound=1),
    "variation": replace(CONFIG, staleness="variation", staleness_bound=0.5, dropout=0.5),
}


# Pure policies --------------------------------------------------------------------


def _schedule(policy: Staleness, epochs: int, changes: list[float] | None = None) -> list[int]:
    """The epochs in which an owner sends, replaying its own bookkeeping."""
    last, sent = NEVER, []
    for epoch in range(1, epochs + 1):
        change = None if changes is None else changes[epoch - 1]
        if policy.owner_sends(epoch, last, change):
            last = epoch
            sent.append(epoch)
    return sent


def test_staleness_policies_send_when_their_bound_is_passed() -> None:
    assert _schedule(Staleness.of("always"), 5) == [1, 2, 3, 4, 5]
    assert _schedule(Staleness.of("epoch-fixed"), 6) == [1, 3, 5]  # default bound: 1 epoch
    assert _schedule(Staleness.of("epoch-fixed", 2), 8) == [1, 4, 7]
    # Variation: the first epoch always sends (nothing cached), then past the bound only.
    changes = [9.0, 0.01, 0.2, 0.04, 0.06, 0.0]
    assert _schedule(Staleness.of("variation", 0.05), 6, changes) == [1, 3, 5]
    adaptive = Staleness.of("epoch-adaptive", 2)
    assert adaptive.receiver_driven and not Staleness.of("epoch-fixed").receiver_driven
    assert [adaptive.receiver_asks(e, 1) for e in range(1, 6)] == [False] * 3 + [True] * 2
    assert adaptive.receiver_asks(5, NEVER)
    assert relative_change(0.25, 1.0) == 0.5
    assert relative_change(0.0, 0.0) == 0.0 and relative_change(1.0, 0.0) == float("inf")


@pytest.mark.parametrize(
    "policy,bound,message",
    [
        ("sometimes", 1, "choose one of"),
        ("epoch-fixed", 1.5, "whole epochs"),
        ("epoch-adaptive", -1, "whole epochs"),
        ("variation", -0.1, "must be > 0"),
    ],
)
def test_bad_staleness_is_refused(policy: str, bound: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Staleness.of(policy, bound)


def test_config_checks_mode_sancus() -> None:
    from gnncore.train.node.config import ConfigError

    with pytest.raises(ConfigError, match="sancus trains model 'gcn'"):
        NodeTrainConfig(mode="sancus").validate()  # default model: sage
    with pytest.raises(ConfigError, match="mode 'sancus' only"):
        NodeTrainConfig(model="gcn", staleness="variation").validate()
    with pytest.raises(ConfigError, match="staleness_bound"):
        replace(CONFIG, staleness="epoch-fixed", staleness_bound=0.5).validate()


# The slow reference -----------------------------------------------------------------


def _reference(graph_dir: Path, config: NodeTrainConfig) -> tuple[list[float], list[dict]]:
    """Full-graph GCN in plain dense torch on the whole graph: ``Â`` built entry by
    entry, the same initial weights as the loop (``manual_seed``, then the model),
    the mean loss over all training nodes. Returns the validation accuracy and
    the weights after each epoch."""
    from gnncore.store import GraphDir
    from gnncore.train.core.models import build_model

    graph = GraphDir.open(graph_dir)
    n = graph.num_nodes
    indptr, indices = np.asarray(graph.indptr), np.asarray(graph.indices)
    adjacency = torch.zeros((n, n), dtype=torch.float64)
    for target in range(n):
        for source in indices[indptr[target] : indptr[target + 1]]:
            if source != target:
                adjacency[target, source] += 1.0
    adjacency += torch.eye(n, dtype=torch.float64)
    inv_sqrt = adjacency.sum(dim=1) ** -0.5
    a_hat = (inv_sqrt[:, None] * adjacency * inv_sqrt[None, :]).float()
    x = torch.from_numpy(np.array(graph.features()))
    y = torch.from_numpy(np.array(graph.labels(), dtype=np.int64))
    train, val = (torch.from_numpy(graph.split(s).astype(np.int64)) for s in ("train", "val"))

    torch.manual_seed(config.seed)
    model = build_model("gcn", x.shape[1], config.hidden, int(y.max()) + 1, 2, 0.0)
    weights = [(conv.lin.weight, conv.bias) for conv in model.convs]
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)

    def forward() -> torch.Tensor:
        h = x
        for i, (w, b) in enumerate(weights):
            h = a_hat @ (h @ w.T) + b
            if i < len(weights) - 1:
                h = torch.relu(h)
        return h

    accuracy, states = [], []
    for _ in range(config.epochs):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(forward()[train], y[train]).backward()
        optimizer.step()
        with torch.no_grad():
            accuracy.append(int((forward()[val].argmax(-1) == y[val]).sum()) / len(val))
        states.append({k: v.detach().clone() for k, v in model.state_dict().items()})
    return accuracy, states


# Two real ranks ---------------------------------------------------------------------


def _in_one_group(rank: int, world: int, ranks_dir: str, ckpt: str) -> dict[str, Any]:
    """Every scenario of this module in one process group (spawned rank)."""
    from gnncore.distributed.rank import RankRun, run_node_rank

    out: dict[str, Any] = {"rank": rank, "exchange": _uneven_exchange(ranks_dir)}
    for name, config in POLICIES.items():
        out[name] = run_node_rank(rank, world, RankRun(ranks_dir, config))
    short = replace(CONFIG, epochs=3)
    out["first"] = run_node_rank(rank, world, RankRun(ranks_dir, short, ckpt))
    out["resumed"] = run_node_rank(rank, world, RankRun(ranks_dir, CONFIG, ckpt, resume=True))
    return out


def _uneven_exchange(ranks_dir: str) -> dict[str, Any]:
    """Training exchanges whose decisions differ between the ranks (variation, a
    bound of 0.5): rank 0's rows change by 100% every epoch, rank 1's by 1%, so
    rank 0 sends every epoch and rank 1 only in the first. Returns what this rank
    received each epoch, what it expected, its counters and the gradients its
    own rows got back."""
    import torch.distributed as dist

    from gnncore.distributed.rank_data import RankData
    from gnncore.distributed.sancus import HaloExchange, build_halo_plan

    rank = dist.get_rank()
    data = RankData.open(ranks_dir, rank)
    features = torch.from_numpy(np.array(data.array("features")))
    plan = build_halo_plan(data, features)
    halo = HaloExchange(plan, Staleness.of("variation", 0.5), torch.device("cpu"))
    lo = data.core_range[0]
    ids = torch.arange(lo, lo + plan.num_core, dtype=torch.float32)
    got, fresh = [], []
    for epoch in range(1, 4):
        halo.epoch = epoch
        # Row v of owner r at epoch e: (global id + 1) * factor(r, e), two columns.
        factor = 2.0**epoch if rank == 0 else 1.0 + 0.01 * epoch
        own = torch.stack([ids + 1, -(ids + 1)], dim=1) * factor
        own.requires_grad_(True)
        rows = halo.training_rows(1, own)
        got.append(rows.detach().clone())
        fresh.append(halo.fresh_rows(own.detach()))
        # The gradient of sum(rows * w) w.r.t. halo row j is w_j: owners get it back.
        weight = torch.from_numpy(plan.halo_ids.astype(np.float32))[:, None].repeat(1, 2)
        (rows * weight).sum().backward()
        assert own.grad is not None
        grad = own.grad.clone()
    return {  # NumPy: spawned ranks return plain values
        "got": [g.numpy() for g in got],
        "fresh": [f.numpy() for f in fresh],
        "halo_ids": plan.halo_ids,
        "counters": halo.counters.as_dict(),
        "grad": grad.numpy(),
        "core": (lo, lo + plan.num_core),
    }


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("sancus")
    g = planted_graph(root / "g", num_nodes=300, degree=6)
    partition_graph(g, root / "p", method="random", parts=2)
    return g, root / "p"


@pytest.fixture(scope="module")
def ranks(graph, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    from gnncore.distributed.launch import spawn_local
    from gnncore.distributed.rank_write import write_rank_data

    g, part = graph
    out = tmp_path_factory.mktemp("ranks") / "r"
    write_rank_data(g, part, out)
    ckpt = tmp_path_factory.mktemp("ckpt")
    return spawn_local(_in_one_group, 2, (str(out), str(ckpt)), run_timeout=240)


def test_always_matches_the_single_process_full_graph_gcn(ranks, graph) -> None:
    accuracy, states = _reference(graph[0], CONFIG)
    runs = [r["always"] for r in ranks]
    for run in runs:  # every rank reduces the same metrics
        assert run["fields"]["val_accuracy"] == pytest.approx(accuracy, abs=1e-9)
    best = runs[0]["fields"]["best_epoch"]
    assert best == int(np.argmax(accuracy)) + 1
    weights = runs[0]["state_dict"]
    assert set(weights) == set(states[best - 1])
    for name, value in states[best - 1].items():
        np.testing.assert_allclose(weights[name], value.numpy(), atol=2e-5, err_msg=name)
    assert runs[0]["fields"]["test_accuracy"] > 0.5  # 4 classes


def test_always_sends_every_halo_row_every_epoch(ranks) -> None:
    for r in ranks:
        sancus = r["always"]["sancus"]
        row_bytes = CONFIG.hidden * 4
        assert sancus["skips"] == 0 and sancus["sends"] == EPOCHS  # one peer, one hidden layer
        assert sancus["broadcast_bytes"] == sancus["always_bytes"]
        # Each epoch: every row this rank's peer reads, and their gradients back.
        other = ranks[1 - r["rank"]]["always"]["sancus"]
        assert sancus["broadcast_bytes"] == EPOCHS * other["halo_rows"] * row_bytes
        assert sancus["grad_bytes"] == EPOCHS * sancus["halo_rows"] * row_bytes


def test_epoch_policies_skip_on_their_schedule(ranks) -> None:
    for name, schedule in (("epoch-fixed", [1, 4]), ("epoch-adaptive", [1, 3, 5])):
        for r in ranks:
            throughput = r[name]["fields"]["throughput"]
            sends = [e[f"rank{r['rank']}_sends"] for e in throughput]
            assert sends == [1.0 if e in schedule else 0.0 for e in range(1, EPOCHS + 1)], name
            total = r[name]["sancus"]
            assert total["sends"] == len(schedule) and total["skips"] == EPOCHS - len(schedule)
            assert total["broadcast_bytes"] == total["always_bytes"] * len(schedule) / EPOCHS
            # Gradients are never skipped.
            assert total["grad_bytes"] == r["always"]["sancus"]["grad_bytes"]
            assert throughput[-1]["dist_broadcast_saving"] == (0.0 if EPOCHS in schedule else 1.0)


def test_variation_training_finishes_and_saves_bytes(ranks) -> None:
    for r in ranks:
        total = r["variation"]["sancus"]
        assert total["sends"] + total["skips"] == EPOCHS and total["sends"] >= 1
        assert total["skips"] >= 1 and total["broadcast_bytes"] < total["always_bytes"]
    assert ranks[0]["variation"]["fields"]["test_accuracy"] > 0.5


def test_uneven_decisions_neither_deadlock_nor_mix_up_rows(ranks) -> None:
    # Rank 0 sends every epoch; rank 1 sends in epoch 1 only, then rank 0 reads its cache.
    for r in ranks:
        ex = r["exchange"]
        counters = ex["counters"]
        expected_sends = 3 if r["rank"] == 0 else 1
        assert counters["sends"] == expected_sends and counters["skips"] == 3 - expected_sends
        for epoch, (got, fresh) in enumerate(zip(ex["got"], ex["fresh"]), start=1):
            if r["rank"] == 1:  # from rank 0: always fresh
                np.testing.assert_allclose(got, fresh)
            else:  # from rank 1: epoch 1's rows, whatever rank 1 holds now
                ids = ex["halo_ids"].astype(np.float32)
                np.testing.assert_allclose(got, np.stack([ids + 1, -(ids + 1)], axis=1) * 1.01)
                if epoch > 1:
                    assert not np.allclose(got, fresh)
    # Gradients come back whatever was sent: rank r's row v gets the peer's weight,
    # its global id, once per peer reading it (one peer here).
    for r in ranks:
        ex = r["exchange"]
        lo, hi = ex["core"]
        peer = ranks[1 - r["rank"]]["exchange"]
        read = np.isin(np.arange(lo, hi), peer["halo_ids"])
        want = np.where(read, np.arange(lo, hi), 0).astype(np.float32)
        np.testing.assert_array_equal(ex["grad"], np.stack([want, want], axis=1))


def test_resume_continues_from_the_checkpoint_in_every_rank(ranks) -> None:
    for r in ranks:
        first, resumed = r["first"]["fields"], r["resumed"]["fields"]
        assert resumed["resumed_from_epoch"] == 3 and resumed["stopped_epoch"] == EPOCHS
        # The same weights and data: the same curve as the uninterrupted run.
        assert resumed["val_accuracy"][:3] == first["val_accuracy"]
        assert resumed["val_accuracy"] == pytest.approx(
            r["always"]["fields"]["val_accuracy"], abs=1e-9
        )


def test_cli_mode_sancus_with_two_ranks(graph, tmp_path) -> None:
    import json

    import mlflow

    from gnncore.cli.main import main

    g, part = graph
    out = tmp_path / "run.json"
    argv = ["train", str(g), "--task", "node", "--model", "gcn", "--mode", "sancus",
            "--staleness", "epoch-fixed", "--staleness-bound", "1", "--epochs", "3",
            "--nproc", "2", "--partition", str(part), "--no-progress", "--json", str(out),
            "--data-root", str(tmp_path / "data")]  # fmt: skip
    assert main(argv) == 0
    summary = json.loads(out.read_text())
    assert summary["world_size"] == 2
    assert [r["sancus"]["sends"] for r in summary["per_rank"]] == [2.0, 2.0]  # epochs 1, 3
    client = mlflow.MlflowClient(summary["mlflow_tracking_uri"])
    run = client.get_run(summary["mlflow_run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.params["mode"] == "sancus" and run.data.params["staleness"] == "epoch-fixed"
    saving = client.get_metric_history(run.info.run_id, "dist_broadcast_saving")
    assert [(m.step, m.value) for m in saving] == [(1, 0.0), (2, 1.0), (3, 0.0)]
    for name in ("rank0_broadcast_bytes", "rank1_grad_bytes", "dist_always_bytes"):
        assert [m.step for m in client.get_metric_history(run.info.run_id, name)] == [1, 2, 3]


def test_single_process_mode_sancus_is_refused(graph) -> None:
    from gnncore.modes import RunRecording, train_graph_dir
    from gnncore.train.node.config import ConfigError

    with pytest.raises(ConfigError, match="--nproc N --partition DIR"):
        train_graph_dir(graph[0], CONFIG, recording=RunRecording(progress=False))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
