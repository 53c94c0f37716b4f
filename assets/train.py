"""The trained model (node classifier or link predictor), tracked in MLflow."""

from pathlib import Path
from typing import Any

import dagster as dg

from assets.costs import budget_metadata
from assets.graph import graph
from assets.outofcore import partitioned_store
from assets.partition import graph_partition
from assets.partitions import DATASET_PARTITIONS, run_tags
from assets.plan import placement_plan
from assets.ranks import ranks_stage_dir
from assets.train_config import TrainConfig
from assets.train_metadata import VALIDATION_METRIC, run_metadata, to_dagster
from assets.upstream import upstream_metadata
from resources import ComputeResource, DataRootResource, MemoryBudgetResource, MlflowResource


@dg.asset(
    # The graph, the plans of that graph and its partitioned store: node training in
    # mode mmap serves features through the placement (both plans are recorded with
    # the run); in the out-of-core modes (hierbatching, partition_buffer) it reads the
    # partitioned store; with nproc > 1 the ranks read the rank data of graph_partition
    # (rank_data's folder: written by the training when that asset was not materialized).
    deps=[graph, graph_partition, placement_plan, partitioned_store],
    kinds={"pytorch", "mlflow"},
    group_name="gnn",
    partitions_def=DATASET_PARTITIONS,
    pool="gpu",
    retry_policy=dg.RetryPolicy(max_retries=1),
)
def trained_model(
    context: dg.AssetExecutionContext,
    config: TrainConfig,
    storage: DataRootResource,
    mlflow: MlflowResource,
    compute: ComputeResource,
    pipes: dg.PipesSubprocessClient,
    memory: MemoryBudgetResource,
) -> dg.MaterializeResult:
    """A GNN trained with the C++ neighbour sampler; run, curves and model in MLflow.

    With ``nproc`` 1 it trains in this process; with ``nproc`` N > 1 it trains
    one rank per partition of ``graph_partition`` (N parts) in a subprocess started
    through Pipes (:mod:`assets.pipes_train`), whose epoch lines and metadata
    come back to this run. Checkpoints go to
    ``<data root>/checkpoints/<dataset>-<task>-<model>[-nproc<N>]-<dagster run id>``
    after every epoch, so a retry of the same Dagster run resumes where the
    failed attempt stopped, while every new run trains from scratch.

    Mode ``auto`` (the default) is chosen here, before any input is read
    (:func:`gnncore.modes.choose.resolve_mode`), against the ``memory``
    resource's budget (the task options' own ``memory_budget`` wins):
    ``in_memory`` when the training data fits, else ``hierbatching`` from this
    lineage's ``partitioned_store`` (node) or ``partition_buffer`` (link,
    encoder ``none``). The metadata shows ``mode``, ``mode_requested``,
    ``mode_reason``, the in-memory estimate and the budget. With ``nproc`` > 1
    the ranks read rank data: ``auto`` is ``mmap`` there."""
    upstream = upstream_metadata(context, graph.key)
    train_config = config.build(compute.resolve())
    if config.nproc > 1:
        metadata = train_with_pipes(context, config, train_config, upstream, storage, mlflow, pipes)
    else:
        metadata = train_in_process(
            context, config, train_config, upstream, storage, mlflow, memory
        )
    return dg.MaterializeResult(
        metadata={**metadata, **register_model(mlflow, config.task, upstream, metadata)}
    )


def checkpoint_dir(
    context: dg.AssetExecutionContext,
    config: TrainConfig,
    storage: DataRootResource,
    upstream: dict[str, Any],
) -> Path:
    """This Dagster run's checkpoint directory (a retry of the run resumes from it)."""
    world = f"-nproc{config.nproc}" if config.nproc > 1 else ""
    name = f"{upstream['name']}-{config.task}-{config.model}{world}-{context.run.run_id}"
    return storage.stage_dir("checkpoints", name)


def train_in_process(
    context: dg.AssetExecutionContext,
    config: TrainConfig,
    train_config: Any,
    upstream: dict[str, Any],
    storage: DataRootResource,
    mlflow: MlflowResource,
    memory: MemoryBudgetResource,
) -> dict[str, Any]:
    """Train in this process (``nproc`` 1), in the mode :func:`choose_mode_for`
    resolves; the run's metadata."""
    from gnncore.errors import ConfigError, InputError
    from gnncore.modes import RunInputs, RunRecording, train_graph_dir
    from gnncore.usage import MemoryBudgetError, peak_rss_bytes

    checkpoints = checkpoint_dir(context, config, storage, upstream)
    # The whole process's budget as the stage starts: what auto compares the data
    # with, and what the peak is reported against.
    setting = memory.setting(train_config.memory_budget)
    try:
        budget = memory.budget_bytes(train_config.memory_budget)
    except ValueError as error:
        raise dg.Failure(str(error), allow_retries=False) from error
    choice = choose_mode_for(context, config.task, train_config, upstream, budget, checkpoints)
    resolved = choice.apply(train_config)
    plans = plans_for(context, config.task, resolved, str(upstream["path"]))
    store = store_for(context, config.task, resolved, str(upstream["path"]))
    tracker = mlflow.tracker()
    try:
        result = train_graph_dir(
            str(upstream["path"]),
            train_config,
            RunInputs(plans.get("placement"), plans.get("replication"), store, mode_choice=choice),
            RunRecording(
                tracking=tracker,
                tags=run_tags(context),
                progress=context.log.info,
                checkpoint_dir=checkpoints,
                resume=context.retry_number > 0,
            ),
        )
    except (MemoryBudgetError, InputError, ConfigError) as error:
        # A refusal (a budget naming its minimum, bad input or options) would be
        # refused again: the step fails without spending its retry.
        raise dg.Failure(str(error), allow_retries=False) from error
    run_url = tracker.run_url(str(result.run_id))
    metadata = run_metadata(result, config.task, str(checkpoints), run_url, tracker.tracking_uri)
    return {
        **to_dagster(metadata),
        **budget_metadata(setting, budget, peak_rss_bytes()),
        **({"store": dg.MetadataValue.path(store)} if store else {}),
        **{f"{kind}_plan": dg.MetadataValue.path(path) for kind, path in plans.items()},
    }


def choose_mode_for(
    context: dg.AssetExecutionContext,
    task: str,
    train_config: Any,
    upstream: dict[str, Any],
    budget: int | None,
    checkpoints: Path,
) -> Any:
    """The :class:`~gnncore.modes.choose.ModeChoice` of this run: an explicit mode
    as it is; ``auto`` against ``budget`` (the ``memory`` resource's, in bytes; the
    options' own ``memory_budget`` wins), node training counting on this lineage's
    ``partitioned_store``, a retry keeping its checkpoint's mode."""
    from gnncore.errors import ConfigError
    from gnncore.modes import resolve_mode
    from gnncore.store import GraphDir

    try:
        choice = resolve_mode(
            GraphDir.open(str(upstream["path"])),
            train_config,
            budget,
            store_available=task == "node",
            checkpoint_dir=checkpoints,
            resume=context.retry_number > 0,
        )
    except (ValueError, ConfigError) as error:
        raise dg.Failure(str(error), allow_retries=False) from error
    return choice  # train_graph_dir logs it


def train_with_pipes(
    context: dg.AssetExecutionContext,
    config: TrainConfig,
    train_config: Any,
    upstream: dict[str, Any],
    storage: DataRootResource,
    mlflow: MlflowResource,
    pipes: dg.PipesSubprocessClient,
) -> dict[str, Any]:
    """Train ``config.nproc`` ranks in ``python -m assets.pipes_train``, started
    through Pipes; the metadata it reported. A failed child fails the asset with
    the error it reported (a failed rank: the message names it)."""
    from assets.pipes_train import DistributedRun, run_with_pipes
    from gnncore.partition import PartitionDir
    from gnncore.store import GraphDir

    partition = upstream_metadata(context, graph_partition.key)
    if str(partition["graph_path"]) != str(upstream["path"]):
        raise dg.Failure(
            f"graph_partition covers {partition['graph_path']}, but the graph to train on is "
            f"{upstream['path']}: materialize graph_partition for this graph",
            allow_retries=False,
        )
    if int(partition["parts"]) != config.nproc:
        raise dg.Failure(
            f"trained_model nproc {config.nproc} needs rank data of {config.nproc} partitions, "
            f"but graph_partition ({partition['method']}, {partition['path']}) has "
            f"{partition['parts']}: one rank trains each partition. Set graph_partition's "
            f"parts to {config.nproc} and materialize it, or set nproc to {partition['parts']}",
            allow_retries=False,
        )
    graph_dir = GraphDir.open(str(upstream["path"]))
    ranks_dir, _ = ranks_stage_dir(
        storage,
        graph_dir,
        PartitionDir.open(str(partition["path"]), graph_dir),
        link=config.task == "link",
    )
    tracker = mlflow.tracker()  # creates the experiment where the child logs
    run = DistributedRun(
        graph_dir=str(upstream["path"]),
        partition_dir=str(partition["path"]),
        ranks_dir=str(ranks_dir),
        partitioner=str(partition["method"]),
        task=config.task,
        options=distributed_options(context, config),
        device=train_config.device,
        backend=None if config.backend == "auto" else config.backend,
        nproc=config.nproc,
        max_restarts=config.max_restarts,
        checkpoint_dir=str(checkpoint_dir(context, config, storage, upstream)),
        resume=context.retry_number > 0,
        tracking_uri=tracker.tracking_uri,
        experiment=tracker.experiment,
        ui_url=tracker.ui_url,
        tags=run_tags(context),
    )
    return run_with_pipes(context, pipes, run)


def distributed_options(context: dg.AssetExecutionContext, config: TrainConfig) -> dict[str, Any]:
    """The task options of a distributed run: mode ``auto`` is
    :data:`~gnncore.modes.choose.DISTRIBUTED_MODE` (the ranks read their rank
    data), logged; an explicit mode stays."""
    from gnncore.modes.choose import DISTRIBUTED_MODE

    options = config.options()
    if options.get("mode") == "auto":
        options["mode"] = DISTRIBUTED_MODE
        context.log.info(f"mode auto -> {DISTRIBUTED_MODE}: distributed ranks read rank data")
    return options


def register_model(
    mlflow: MlflowResource, task: str, upstream: dict[str, Any], metadata: dict[str, Any]
) -> dict[str, Any]:
    """Register the run's model (``metadata``: what :func:`run_metadata` reported)
    as a new version of the dataset's registered model; its name and version."""
    from gnncore.tracking.registry import registered_model_name

    def value(key: str) -> str:
        return str(metadata[key].value)

    version = mlflow.registry(VALIDATION_METRIC[task]).register(
        registered_model_name(task, str(upstream["name"])),
        value("model_uri"),
        value("mlflow_run_id"),
    )
    return {"registered_model": version.name, "model_version": version.version}


def plans_for(
    context: dg.AssetExecutionContext, task: str, train_config: Any, graph_path: str
) -> dict[str, str]:
    """The plans node training serves features through and records: this
    lineage's ``{"placement": dir, "replication": dir}``, which must cover
    ``graph_path`` (else they are stale: materialize them for this graph).
    Link training uses no plan (``{}``); neither does node training in a mode
    other than ``mmap`` (plans serve memory-mapped features) nor with loader
    worker processes (the placed store serves features in the training process),
    which is logged."""
    if task != "node":
        return {}
    if train_config.mode != "mmap":
        context.log.info(
            f"mode {train_config.mode}: placement and replication plans serve mode mmap only; "
            "training without them"
        )
        return {}
    if train_config.num_workers > 0:
        context.log.warning(
            "num_workers > 0: features come from the plain store, not through placement_plan"
        )
        return {}
    placement = upstream_metadata(context, placement_plan.key)
    if str(placement["graph_path"]) != graph_path:
        raise dg.Failure(
            f"placement_plan covers {placement['graph_path']}, but the graph to train on is "
            f"{graph_path}: materialize replication_plan and placement_plan for this graph"
        )
    return {"placement": str(placement["path"]), "replication": str(placement["replication_path"])}


def store_for(
    context: dg.AssetExecutionContext, task: str, train_config: Any, graph_path: str
) -> str | None:
    """The partitioned store node training reads in the out-of-core modes
    (``hierbatching``, ``partition_buffer``): this lineage's ``partitioned_store``,
    which must cover ``graph_path`` (else it is stale: materialize it for this
    graph). ``None`` in other modes and for link training."""
    from gnncore.train.node.config import OUT_OF_CORE_MODES

    if task != "node" or train_config.mode not in OUT_OF_CORE_MODES:
        return None
    store = upstream_metadata(context, partitioned_store.key)
    if str(store["graph_path"]) != graph_path:
        raise dg.Failure(
            f"partitioned_store covers {store['graph_path']}, but the graph to train on is "
            f"{graph_path}: materialize graph_partition and partitioned_store for this graph"
        )
    return str(store["path"])


@dg.asset(
    deps=[trained_model], kinds={"mlflow"}, group_name="gnn", partitions_def=DATASET_PARTITIONS
)
def production_model(
    context: dg.AssetExecutionContext, mlflow: MlflowResource, memory: MemoryBudgetResource
) -> dg.MaterializeResult:
    """The registered version carrying the ``production`` alias: the new version,
    promoted only after the blocking ``model_quality`` check passed. Reports its
    peak RSS against the ``memory`` resource's budget like every stage."""
    from gnncore.tracking.registry import ModelVersion
    from gnncore.usage import peak_rss_bytes

    try:
        budget = memory.budget_bytes()
    except ValueError as error:
        raise dg.Failure(str(error), allow_retries=False) from error
    meta = upstream_metadata(context, trained_model.key)
    registry = mlflow.registry(str(meta["validation_metric"]))
    version = ModelVersion(
        str(meta["registered_model"]),
        str(meta["model_version"]),
        str(meta["mlflow_run_id"]),
        float(meta["validation_score"]),
    )
    registry.promote(version)
    context.log.info(f"{version.name} version {version.version} is now production")
    return dg.MaterializeResult(
        metadata={
            "registered_model": version.name,
            "production_version": version.version,
            str(meta["validation_metric"]): float(meta["validation_score"]),
            **budget_metadata(memory.setting(), budget, peak_rss_bytes()),
        }
    )
