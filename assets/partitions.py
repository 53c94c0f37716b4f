"""One partition per dataset: the dynamic partitions every asset of the chain shares.

The partition key is the dataset name. It names the output directories
(``datasets/<name>-<stage key>``, ``graphs/<name>-<stage key>``, ...), the
registered models (``gnncore-<task>-<name>``) and the MLflow runs, so it must be
a safe directory name (:func:`resources.storage.check_safe_name`). Partitions are
added by the inbox sensor (one per dropped file), by ``make demo``
(``synthetic``), or in the Dagster UI (the *Materialize* dialog's *Add partition*,
the launchpad's *Add new partition*).
"""

from typing import Any

import dagster as dg

from resources.storage import check_safe_name

#: The name of the dynamic partitions (``instance.add_dynamic_partitions(PARTITIONS_NAME, [...])``).
PARTITIONS_NAME = "dataset"
DATASET_PARTITIONS = dg.DynamicPartitionsDefinition(name=PARTITIONS_NAME)
#: The partition ``make demo`` registers and materializes (the built-in generated graph).
DEMO_DATASET = "synthetic"


def dataset_name(context: Any) -> str:
    """The dataset this run materializes: the partition key, checked to be a safe
    directory name (else a ``dg.Failure`` saying what is allowed)."""
    if not context.has_partition_key:
        raise dg.Failure(
            "the gnn assets are partitioned by dataset: launch them for a partition of "
            f"'{PARTITIONS_NAME}' (in the UI: Materialize, then pick or add one)"
        )
    key = str(context.partition_key)
    try:
        return check_safe_name(key, what="dataset partition")
    except ValueError as exc:
        raise dg.Failure(str(exc)) from exc


def run_tags(context: Any) -> dict[str, str]:
    """The tags every MLflow run of an asset carries: the Dagster run, the asset and
    the dataset partition (MLflow's ``dataset`` tag is the graph's own name, which the
    partition key also gives it; ``dagster_partition`` says which partition ran)."""
    tags = {
        "dagster_run_id": context.run.run_id,
        "dagster_asset": context.asset_key.to_user_string(),
    }
    if context.has_partition_key:
        tags["dagster_partition"] = str(context.partition_key)
    return tags
