"""The per-rank data of ``graph_partition``: what distributed training reads.

``rank_data`` writes one folder per partition of ``graph_partition`` holding
exactly what that partition's rank needs (:func:`gnncore.distributed.write_rank_data`,
docs/DISTRIBUTED.md), into ``<data root>/ranks/<dataset>-<method>-p<parts>-<stage key>``:
the stage key covers the graph's and the partition's manifests, so the same
partition of the same graph reuses the folder. ``trained_model`` with
``nproc > 1`` trains one rank per folder; ``nproc`` must equal ``parts``.

It is in group ``distributed``, not ``gnn``: ``train_job`` (one process) does
not write it; ``distributed_train_job`` does. ``trained_model`` does not depend
on it (a *Materialize all* of group ``gnn`` would otherwise warn about an
unmaterialized upstream): with ``nproc > 1`` it trains on the rank data in the
same folder (:func:`ranks_stage_dir`), which the training writes when this
asset has not.
"""

from pathlib import Path
from typing import Any

import dagster as dg

from assets.partition import graph_partition
from assets.partitions import DATASET_PARTITIONS
from assets.upstream import upstream_metadata
from resources import DataRootResource


@dg.asset(
    deps=[graph_partition],
    kinds={"python", "numpy"},
    group_name="distributed",
    partitions_def=DATASET_PARTITIONS,
)
def rank_data(context: dg.AssetExecutionContext, storage: DataRootResource) -> dg.MaterializeResult:
    """One folder per partition of ``graph_partition`` (its core nodes' in-edges,
    halo, features, labels and split masks), for ``trained_model`` with ``nproc``
    equal to the partition's ``parts``; per-rank sizes as a table."""
    from gnncore.distributed import RankData, write_rank_data
    from gnncore.partition import PartitionDir
    from gnncore.progress import reporting
    from gnncore.store import GraphDir

    partition = upstream_metadata(context, graph_partition.key)
    graph_dir = GraphDir.open(str(partition["graph_path"]))
    part_dir = PartitionDir.open(str(partition["path"]), graph_dir)
    out, key = ranks_stage_dir(storage, graph_dir, part_dir)
    with reporting(lambda stage: context.log.info(f"rank data: {stage}")):
        write_rank_data(graph_dir.path, part_dir.path, out)
    info = RankData.open(out, 0).info  # the manifest, checked
    sizes = [sum(int(f["bytes"]) for f in rank["files"].values()) for rank in info["ranks"]]
    rows = "\n".join(
        f"| {r} | {rank['num_core']} | {rank['num_edges']} | {rank['num_halo']} | {size} |"
        for r, (rank, size) in enumerate(zip(info["ranks"], sizes, strict=True))
    )
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(out)),
            "stage_key": key,
            "graph_path": dg.MetadataValue.path(str(graph_dir.path)),
            "partition_path": dg.MetadataValue.path(str(part_dir.path)),
            "method": part_dir.method,
            "parts": part_dir.parts,
            "bytes": sum(sizes),
            "largest_rank_bytes": max(sizes),
            "ranks": dg.MetadataValue.md(
                "| rank | core nodes | in-edges | halo nodes | bytes |\n|---|---|---|---|---|\n"
                + rows
            ),
        }
    )


def ranks_stage_dir(
    storage: DataRootResource, graph_dir: Any, part_dir: Any, link: bool = False
) -> tuple[Path, str]:
    """``(folder, stage key)`` of the rank data of ``part_dir`` of ``graph_dir``:
    ``<data root>/ranks/<dataset>-<method>-p<parts>[-link]-<stage key>`` (``link``:
    with link prediction's edge splits, a folder of its own)."""
    from gnncore.distributed.rank_write import rank_data_stage_key
    from gnncore.store.versioning import versioned_name

    key = rank_data_stage_key(graph_dir, part_dir, link=link)
    prefix = f"{graph_dir.manifest.name}-{part_dir.method}-p{part_dir.parts}" + (
        "-link" if link else ""
    )
    return storage.stage_dir("ranks", versioned_name(prefix, key)), key
