"""Planning stages between partitioning and training.

* :mod:`~gnncore.plan.estimators` -- how often training reads each node;
* :mod:`~gnncore.plan.placement` -- which nodes' features each device caches
  (Song & Jiang), with per-device sorted lookups (:mod:`~gnncore.plan.lookup`);
* :mod:`~gnncore.plan.memory` -- the planners' memory estimates and budget check;
* :mod:`~gnncore.plan.replication` -- HDR: which high-degree nodes' neighbour
  lists every partition replicates (HyDRA);
* :mod:`~gnncore.plan.simulate` -- replays the real sampler over virtual
  devices / partitions and counts feature reads and neighbour-id traffic;
* :mod:`~gnncore.plan.store` -- the plan directory format.
"""

from gnncore.plan.estimators import ESTIMATORS, estimate_access
from gnncore.plan.placement import (
    TOPOLOGIES,
    Placement,
    PlacementPlan,
    PlacementSettings,
    compute_placement,
    plan_placement,
)
from gnncore.plan.replication import (
    Replication,
    ReplicationPlan,
    ReplicationSettings,
    compute_replication,
    plan_replication,
)
from gnncore.plan.store import PlanDir, PlanError, PlanReport

__all__ = [
    "ESTIMATORS",
    "TOPOLOGIES",
    "Placement",
    "PlacementPlan",
    "PlacementSettings",
    "PlanDir",
    "PlanError",
    "PlanReport",
    "Replication",
    "ReplicationPlan",
    "ReplicationSettings",
    "compute_placement",
    "compute_replication",
    "estimate_access",
    "plan_placement",
    "plan_replication",
]
