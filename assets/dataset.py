"""The raw dataset: a user's files, or the built-in generator's output."""

from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from assets.partitions import DATASET_PARTITIONS, dataset_name
from resources import DataRootResource


class DatasetConfig(dg.Config):
    """Which raw dataset feeds the pipeline. Its name is the partition key (the
    ``dataset`` partition the run materializes), not a config field."""

    source: str = Field(
        default="",
        description="Path of a raw dataset (edge list, Parquet, "
        "OGB raw layout, Planetoid raw, KG triples); empty: generate one.",
    )
    nodes: str = Field(
        default="",
        description="Node table of an edge-list `source` (Parquet/CSV/TSV: node_id, "
        "features, optional label and split; docs/FORMAT.md); empty: none.",
    )
    standardize_features: bool = Field(
        default=False,
        description="With `nodes`: scale each feature column to mean 0 and deviation 1 over "
        "the training nodes (raw magnitudes such as incomes train badly); the statistics are "
        "kept beside the features.",
    )
    format: str = Field(
        default="auto", description="auto, edgelist, parquet, ogb, planetoid or kg (for `source`)."
    )
    directed: bool = Field(default=False, description="Keep edge directions (else symmetrise).")
    num_nodes: int = Field(default=20_000, description="Generated graph: nodes.")
    avg_degree: float = Field(default=10.0, description="Generated graph: average degree.")
    num_classes: int = Field(default=8, description="Generated graph: classes/communities.")
    num_features: int = Field(default=64, description="Generated graph: feature dimension.")
    seed: int = Field(default=0, description="Generated graph: random seed.")


@dg.asset(kinds={"polars", "numpy"}, group_name="gnn", partitions_def=DATASET_PARTITIONS)
def raw_dataset(
    context: dg.AssetExecutionContext, config: DatasetConfig, storage: DataRootResource
) -> dg.MaterializeResult:
    """Raw input files: the configured source, or a generated planted-partition graph
    written in OGB's raw node-property-prediction layout, into
    ``datasets/<name>-<stage key>`` (the same spec reuses it); ``<name>`` is the
    dataset partition's key."""
    name = dataset_name(context)
    if config.source:
        path = Path(config.source).expanduser().absolute()
        if not path.exists():
            raise dg.Failure(f"dataset source {path} does not exist")
        fmt = config.format
        extra: dict[str, Any] = {}
        if config.nodes:
            nodes = Path(config.nodes).expanduser().absolute()
            if not nodes.is_file():
                raise dg.Failure(f"node table {nodes} does not exist")
            extra["nodes"] = dg.MetadataValue.path(str(nodes))
            extra["standardize_features"] = config.standardize_features
        elif config.standardize_features:
            raise dg.Failure("standardize_features scales the features of a node table (nodes)")
    else:
        from gnncore.synth import SynthSpec, write_ogb_raw_versioned

        spec = SynthSpec(
            num_nodes=config.num_nodes,
            avg_degree=config.avg_degree,
            num_classes=config.num_classes,
            num_features=config.num_features,
            seed=config.seed,
        )
        generated = write_ogb_raw_versioned(storage.stage_root("datasets"), name, spec)
        path, summary = generated.path, generated.summary
        if generated.reused:
            context.log.info(f"{path} already holds this dataset: reused")
        else:
            context.log.info(f"generated {summary['num_edges']:,} edges into {path}")
        fmt = "ogb"
        extra = {
            **{k: v for k, v in summary.items() if isinstance(v, (int, float))},
            "stage_key": generated.stage_key,
            "reused": generated.reused,
        }
    from gnncore.usage import peak_rss_bytes

    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(path)),
            "name": name,
            "format": fmt,
            "directed": config.directed,
            **extra,
            # every stage reports its own peak: a step this short (a path checked)
            # can end between two samples of a meter outside it
            "peak_rss_bytes": peak_rss_bytes(),
        }
    )
