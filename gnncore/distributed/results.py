r"""What a distributed run returns: rank 0's result on machine 0, the ranks'
reports elsewhere.

On machine 0 the result is the single-process loop's
(:class:`~gnncore.train.NodeTrainResult`,
:class:`~gnncore.train.link.loop.LinkTrainResult`) of rank 0, the model loaded
with rank 0's best weights, plus the world size, the rank-data directory and
what every rank reported (:class:`DistNodeTrainResult`,
:class:`DistLinkTrainResult`). On the other machines (``node_rank > 0``) it is
the reduced metrics and this machine's ranks' reports (:class:`RanksResult`:
:class:`DistNodeRanksResult`, :class:`DistLinkRanksResult`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gnncore.train.link.loop import LinkTrainResult
from gnncore.train.node.loop import NodeTrainResult

#: What each rank's report shows of its share in the summaries.
RANK_FIGURES = ("rank", "train_ids", "batches_per_epoch", "peak_rss_mb")


def rank_figures(report: dict[str, Any]) -> dict[str, Any]:
    """A rank's :data:`RANK_FIGURES` out of what its rank runner returned
    (:func:`~gnncore.distributed.rank.rank_report`)."""
    return {k: report[k] for k in RANK_FIGURES}


def distributed_summary(
    result: Any, test_metric: Callable[[dict[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    """The distributed part of a machine-0 result's summary: world size, rank
    data and per rank its figures, ``test_metric(fields)`` of its own result,
    its remote-row share and SANCUS counters when it has them."""
    return {
        "world_size": result.world_size,
        "ranks_dir": result.ranks_dir,
        "per_rank": [
            rank_figures(r)
            | test_metric(r["fields"])
            | {"remote_share": r["store"]["remote_share"]}
            | ({"sancus": r["sancus"]} if "sancus" in r else {})
            for r in result.per_rank
        ],
    }


@dataclass(kw_only=True)
class DistNodeTrainResult(NodeTrainResult):
    """:class:`~gnncore.train.NodeTrainResult` of rank 0 (every rank has the same
    reduced metrics), with the world size, the rank-data directory and what each
    rank reported (``train_ids``, ``batches_per_epoch``, ``peak_rss_mb``, its
    feature store's counters and its own copy of the metrics)."""

    world_size: int = 1
    ranks_dir: str = ""
    per_rank: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            **super().summary(),
            **distributed_summary(self, lambda f: {"test_accuracy": f["test_accuracy"]}),
        }


@dataclass
class RanksResult:
    """What a distributed run returns on a machine other than the first
    (``node_rank > 0``): rank 0, its model and the MLflow run live on machine 0;
    here are the reduced metrics (the same on every rank, ``metrics`` of the
    task's subclass) and this machine's ranks' reports."""

    world_size: int
    node_rank: int
    ranks_dir: str
    per_rank: list[dict[str, Any]]
    restarts: int = 0

    def metrics(self, fields: dict[str, Any]) -> dict[str, Any]:
        """The task's reduced metrics out of a rank's result ``fields``."""
        raise NotImplementedError

    def summary(self) -> dict[str, Any]:
        fields = self.per_rank[0]["fields"]
        return {
            "world_size": self.world_size,
            "node_rank": self.node_rank,
            "ranks": [r["rank"] for r in self.per_rank],
            "ranks_dir": self.ranks_dir,
            "restarts": self.restarts,
            "stopped_epoch": fields["stopped_epoch"],
            "best_epoch": fields["best_epoch"],
            **self.metrics(fields),
            "resumed_from_epoch": fields["resumed_from_epoch"],
            "per_rank": [rank_figures(r) for r in self.per_rank],
        }


@dataclass
class DistNodeRanksResult(RanksResult):
    """:class:`RanksResult` of node classification: accuracy and macro-F1."""

    def metrics(self, fields: dict[str, Any]) -> dict[str, Any]:
        return {
            "val_accuracy": fields["best_val_accuracy"],
            "test_accuracy": fields["test_accuracy"],
            "test_macro_f1": fields["test_macro_f1"],
        }


@dataclass(kw_only=True)
class DistLinkTrainResult(LinkTrainResult):
    """:class:`~gnncore.train.link.loop.LinkTrainResult` of rank 0 (every rank
    has the same reduced metrics), with the world size, the rank-data directory
    and what each rank reported (``train_ids``: its training triples,
    ``batches_per_epoch``, ``peak_rss_mb``, its feature store's counters)."""

    world_size: int = 1
    ranks_dir: str = ""
    per_rank: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            **super().summary(),
            **distributed_summary(self, lambda f: {"test_mrr": f["test"].mrr}),
        }


@dataclass
class DistLinkRanksResult(RanksResult):
    """:class:`RanksResult` of link prediction:
    validation MRR and the test ranking metrics."""

    def metrics(self, fields: dict[str, Any]) -> dict[str, Any]:
        return {"val_mrr": fields["best_val_mrr"], **fields["test"].as_dict("test_")}


__all__ = [
    "DistLinkRanksResult",
    "DistLinkTrainResult",
    "DistNodeRanksResult",
    "DistNodeTrainResult",
    "RANK_FIGURES",
    "RanksResult",
    "distributed_summary",
    "rank_figures",
]
