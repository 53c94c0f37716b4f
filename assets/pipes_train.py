"""Distributed training out of process, through Dagster Pipes.

``trained_model`` with ``nproc`` N > 1 calls :func:`run_with_pipes`, which
starts ``python -m assets.pipes_train`` through ``dg.PipesSubprocessClient``
with a :class:`DistributedRun` as the Pipes extra ``run``. The child
(:func:`main`) runs gnncore's distributed training of the run's task (node
classification or link prediction), what ``gnncore train --task T --nproc N
--partition DIR`` runs
(:func:`~gnncore.distributed.training.train_distributed`: N ranks started by
torch's elastic launcher, the MLflow run opened here and logged by rank 0,
checkpoints written by rank 0 under the data root, ``max_restarts`` restarts
from the newest checkpoint), and reports back over Pipes:

* each epoch's line of rank 0 (``rank 0: epoch 2/5: loss=0.61 val_acc=0.83``)
  as an info log, while training runs: rank 0 appends them to a file
  (:class:`~gnncore.progress.LineFile`) that :class:`LineFollower` reads;
* at the end, the materialization's metadata: :func:`~assets.train_metadata.run_metadata`
  (scores, MLflow run, curves; as the in-process path reports them) and
  :func:`distributed_metadata` (world size, partitioner, remote-row share,
  bytes exchanged, sampling / exchange / compute seconds, per rank).

A rank that fails (after the restarts) makes ``train_distributed`` raise
``RankFailed`` naming it; the child's Pipes session closes with that
exception, and :func:`run_with_pipes` fails the asset with its message. The
ranks' and the launcher's own stdout and stderr reach the step's captured
output (Pipes forwards the child's).
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from assets.train_metadata import Meta, meta, run_metadata

#: The repository root, where ``python -m assets.pipes_train`` runs.
REPO_ROOT = Path(__file__).resolve().parent.parent

#: What Dagster logs when a Pipes child closes its session with an exception.
PIPES_ERROR_EVENT = "[pipes] external process pipes closed with exception"


@dataclass(frozen=True)
class DistributedRun:
    """What the child trains: the Pipes extra ``run`` (plain JSON values)."""

    graph_dir: str
    partition_dir: str
    ranks_dir: str
    #: The partition's method, as graph_partition reported it.
    partitioner: str
    #: The node task's options by library field name (``TrainConfig.options()``).
    options: dict[str, Any]
    device: str
    nproc: int
    max_restarts: int
    checkpoint_dir: str
    #: Resume from the newest checkpoint (a retry of the Dagster run).
    resume: bool
    tracking_uri: str
    experiment: str
    ui_url: str
    tags: dict[str, str] = field(default_factory=dict)
    #: ``node`` or ``link``: the task ``options`` configure.
    task: str = "node"
    #: ``gloo`` or ``nccl``; ``None``: NCCL on a CUDA device, else gloo.
    backend: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# The parent: the asset's side ---------------------------------------------------


def pipes_errors(context: Any) -> list[Any]:
    """This run's event records of Pipes children that closed with an exception,
    oldest first."""
    import dagster as dg

    records = context.instance.get_records_for_run(
        run_id=context.run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT
    ).records
    return [
        r
        for r in records
        if r.event_log_entry.dagster_event is not None
        and r.event_log_entry.dagster_event.message == PIPES_ERROR_EVENT
        and r.event_log_entry.dagster_event.engine_event_data.error is not None
    ]


def run_with_pipes(context: Any, pipes: Any, run: DistributedRun) -> dict[str, Any]:
    """Run :func:`main` for ``run`` through ``pipes`` (a ``dg.PipesSubprocessClient``);
    the metadata it reported. When the child fails after reporting an exception
    (a failed rank, a bad setting), a ``dg.Failure`` carrying its message."""
    import dagster as dg

    seen = {record.storage_id for record in pipes_errors(context)}
    try:
        invocation = pipes.run(
            context=context,
            command=[sys.executable, "-m", "assets.pipes_train"],
            cwd=str(REPO_ROOT),
            extras={"run": run.to_dict()},
        )
    except Exception as err:
        reported = [r for r in pipes_errors(context) if r.storage_id not in seen]
        if not reported:
            raise
        error = reported[-1].event_log_entry.dagster_event.engine_event_data.error
        raise dg.Failure(
            f"distributed training on {run.nproc} ranks failed: {error.message.strip()}"
        ) from err
    return dict(invocation.get_materialize_result().metadata)


# The child ----------------------------------------------------------------------


class LineFollower(threading.Thread):
    """Passes every line appended to ``path`` to ``emit`` (polling every
    ``interval`` seconds) until the ``with`` block ends; then the last lines."""

    def __init__(self, path: Path, emit: Callable[[str], None], interval: float = 0.2) -> None:
        super().__init__(daemon=True, name="pipes-line-follower")
        self.path, self.emit, self.interval = path, emit, interval
        self._offset = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.interval):
            self._read()

    def _read(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as lines:
            lines.seek(self._offset)
            chunk = lines.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line being written waits
        self._offset += len(complete)
        for line in complete.decode("utf-8").splitlines():
            self.emit(line)

    def __enter__(self) -> LineFollower:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self.join()
        self._read()


def _totals(throughput: list[dict[str, float]], key: str) -> float:
    return sum(float(epoch.get(key, 0.0)) for epoch in throughput)


def distributed_metadata(result: Any, partitioner: str, restarts: int) -> dict[str, Meta]:
    """The figures of a distributed run (``result``: a
    :class:`~gnncore.distributed.results.DistNodeTrainResult` or
    :class:`~gnncore.distributed.results.DistLinkTrainResult`) over all its
    epochs' training batches, from the per-rank figures rank 0 logs each epoch:
    the world size and partitioner; the remote-row share (rows fetched from
    other ranks over all rows gathered), rows and bytes fetched; sampling,
    feature exchange and compute seconds (each rank's sum over the epochs,
    averaged over the ranks); the restarts; and one table row per rank."""
    world, epochs = int(result.world_size), list(result.throughput)
    per_rank = []
    for r in range(world):
        remote = _totals(epochs, f"rank{r}_remote_rows")
        rows = remote + _totals(epochs, f"rank{r}_local_rows")
        per_rank.append(
            {
                "remote_share": remote / rows if rows else 0.0,
                "remote_rows": remote,
                "rows": rows,
                "remote_bytes": _totals(epochs, f"rank{r}_remote_bytes"),
                **{k: _totals(epochs, f"rank{r}_{k}") for k in ("sample_s", "exchange_s")},
                "compute_s": _totals(epochs, f"rank{r}_compute_s"),
                "peak_rss_mb": max((e.get(f"rank{r}_peak_rss_mb", 0.0) for e in epochs), default=0),
            }
        )
    remote = sum(r["remote_rows"] for r in per_rank)
    rows = sum(r["rows"] for r in per_rank)
    table = "\n".join(
        f"| {r} | {f['remote_share']:.3f} | {int(f['remote_rows'])} | {int(f['remote_bytes'])} "
        f"| {f['sample_s']:.2f} | {f['exchange_s']:.2f} | {f['compute_s']:.2f} "
        f"| {f['peak_rss_mb']:.0f} |"
        for r, f in enumerate(per_rank)
    )

    def mean(key: str) -> float:
        return sum(f[key] for f in per_rank) / world

    return {
        "world_size": meta(world, "int"),
        "partitioner": meta(partitioner, "text"),
        "ranks_dir": meta(str(result.ranks_dir), "path"),
        "remote_share": meta(remote / rows if rows else 0.0, "float"),
        "remote_rows": meta(int(remote), "int"),
        "remote_bytes": meta(int(sum(f["remote_bytes"] for f in per_rank)), "int"),
        "sample_s": meta(mean("sample_s"), "float"),
        "exchange_s": meta(mean("exchange_s"), "float"),
        "compute_s": meta(mean("compute_s"), "float"),
        "restarts": meta(restarts, "int"),
        "per_rank": meta(
            "| rank | remote share | remote rows | remote bytes | sampling s | exchange s "
            "| compute s | peak RSS MiB |\n|---|---|---|---|---|---|---|---|\n" + table,
            "md",
        ),
    }


def train(run: DistributedRun, progress: Callable[[str], None]) -> dict[str, Meta]:
    """Train ``run`` (the ranks' epoch lines to ``progress``); the metadata to report."""
    from gnncore.distributed.tasks import LINK_TASK
    from gnncore.distributed.training import DistributedConfig, Launch, train_distributed
    from gnncore.progress import LineFile
    from gnncore.tracking.mlflow import MlflowTracker
    from gnncore.train import TASK_CONFIGS

    link = run.task == "link"
    config = TASK_CONFIGS[run.task](**run.options, device=run.device).validate()
    tracker = MlflowTracker(run.tracking_uri, run.experiment, ui_url=run.ui_url)
    with tempfile.TemporaryDirectory(prefix="gnncore-pipes-") as tmp:
        lines = Path(tmp) / "rank0.log"
        with LineFollower(lines, progress):
            result = train_distributed(
                run.graph_dir,
                run.partition_dir,
                config,
                DistributedConfig(
                    nproc=run.nproc,
                    ranks_dir=run.ranks_dir,
                    checkpoint_dir=run.checkpoint_dir,
                    resume=run.resume,
                    progress=LineFile(lines),
                    launch=Launch(max_restarts=run.max_restarts),
                    backend=run.backend,
                ),
                tracking=tracker,
                tags=run.tags,
                task=LINK_TASK if link else None,
            )
    run_id = str(result.run_id)
    restarts = int(tracker.client.get_run(run_id).data.tags.get("restarts", "0"))
    return {
        **run_metadata(
            result, run.task, run.checkpoint_dir, tracker.run_url(run_id), tracker.tracking_uri
        ),
        **({} if link else {"mode": meta(config.mode, "text")}),
        **distributed_metadata(result, run.partitioner, restarts),
    }


def main() -> None:
    """The child: train the Pipes extra ``run``, report the metadata."""
    from dagster_pipes import open_dagster_pipes

    with open_dagster_pipes() as pipes:
        run = DistributedRun(**pipes.get_extra("run"))
        pipes.log.info(
            f"training on {run.nproc} ranks (rank data {run.ranks_dir}, "
            f"checkpoints {run.checkpoint_dir}{', resuming' if run.resume else ''})"
        )
        started = time.perf_counter()
        metadata = train(run, lambda line: pipes.log.info(f"rank 0: {line}"))
        pipes.log.info(f"{run.nproc} ranks finished in {time.perf_counter() - started:.1f}s")
        pipes.report_asset_materialization(metadata=metadata)


if __name__ == "__main__":
    main()
