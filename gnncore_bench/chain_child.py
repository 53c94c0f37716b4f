"""The Dagster side of ``gnncore bench chain``: one run of the chain's assets.

``python -m gnncore_bench.chain_child SETTINGS_JSON`` is started by
:func:`gnncore_bench.chain.bench_chain` inside the chain's memory cgroup, with
``DAGSTER_HOME`` and ``GNNCORE_DATA_ROOT`` under the work directory. It loads
the user's code location (``pipelines.definitions``: the same assets,
resources, executor and ``train_job`` that ``make demo`` and the UI run), adds
the dataset partition and executes ``train_job`` for it as the UI does: one
run, one partition, each step in its own process forked from the code
location's forkserver (:mod:`pipelines.executor`; it preloads torch and MLflow
as the UI's does where there is no limit, the code location alone under one:
:func:`execution`), one step at a time
(``max_concurrent`` 1, so the steps never share the cgroup's limit). Every
step process is in the same cgroup, so a step killed for memory fails its step
and the run, not the harness.

Each step is measured from outside (:class:`ProcessMeter`): every
``interval`` seconds the meter reads, for every process below this one, its
peak RSS (``VmHWM``) and its bytes read and written (``/proc/<pid>/io``), and
the size of the work directory. After the run the event log says which process
ran which step (the ``pid`` of its ``STEP_START``) and when it started and
ended: a step's figures are its process's (a step process runs that step only),
its disk peak the largest size sampled while it ran, with the asset's
materialization metadata (its own ``peak_rss_bytes``, ``memory_budget_bytes``...).
The figures are written to ``out`` and added to the Dagster run as tags
``chain/<step>/<figure>``, so the run in the UI shows them too.

Dagster is imported here only: the library and the rest of the harness do not
need it (``.importlinter``).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from gnncore.usage import held_bytes, io_counters, status_bytes, tree_bytes

#: Metadata text longer than this (charts as data URLs, tables) is kept by its length only.
LONGEST_TEXT = 400
#: Figures of a step also put on the Dagster run as tags.
TAGGED = ("seconds", "peak_rss_bytes", "read_bytes", "written_bytes", "peak_disk_bytes")


@dataclass
class ProcessFigures:
    """What the meter last saw of one process."""

    peak_rss_bytes: int = 0
    read_bytes: int = 0
    written_bytes: int = 0
    #: The most it held that the kernel cannot reclaim (:func:`gnncore.usage.held_bytes`:
    #: anonymous, shared and code pages; RSS also counts mapped data files' pages).
    peak_held_bytes: int = 0


def _children() -> dict[int, list[int]]:
    """Every process's children, from ``/proc/<pid>/stat``."""
    out: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        out.setdefault(parent, []).append(int(entry.name))
    return out


def descendants(root: int) -> list[int]:
    """The processes below ``root`` (children, their children, ...)."""
    children, found, todo = _children(), [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def process_figures(pid: int) -> ProcessFigures | None:
    """``pid``'s peak RSS and bytes read and written so far; ``None`` once it is gone."""
    try:
        io = io_counters(pid)
    except OSError:
        return None
    # Held before the high-water mark: the process grows between the two reads, and the
    # mark read last bounds what it held at the first (the other order failed a test by
    # 20 KiB: held read after growth, against the mark before it).
    held = held_bytes(pid)
    return ProcessFigures(status_bytes("VmHWM", pid), io["read_bytes"], io["write_bytes"], held)


class ProcessMeter:
    """Samples the processes below this one and the work directory's size.

    Args:
        disk_root: The directory whose size is sampled (the work directory).
        interval: Seconds between samples.
    """

    def __init__(self, disk_root: Path, interval: float = 0.25) -> None:
        self.disk_root = disk_root
        self.processes: dict[int, ProcessFigures] = {}
        self.disk: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)

    def sample(self) -> None:
        """One sample of every process below this one, and of the disk."""
        for pid in descendants(os.getpid()):
            figures = process_figures(pid)
            if figures is None:
                continue
            seen = self.processes.setdefault(pid, ProcessFigures())
            # Each figure only grows; an exiting process (a zombie) reads as 0.
            seen.peak_rss_bytes = max(seen.peak_rss_bytes, figures.peak_rss_bytes)
            seen.read_bytes = max(seen.read_bytes, figures.read_bytes)
            seen.written_bytes = max(seen.written_bytes, figures.written_bytes)
            seen.peak_held_bytes = max(seen.peak_held_bytes, figures.peak_held_bytes)
        self.disk.append((time.time(), tree_bytes([self.disk_root])))

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.sample()
            except (OSError, ValueError) as error:  # a process gone mid-read: next sample
                print(f"chain meter: sample skipped ({error})", file=sys.stderr)

    def disk_peak(self, start: float, end: float) -> int:
        """The largest size of the work directory sampled from ``start`` to ``end``."""
        sizes = [size for at, size in self.disk if start <= at <= end]
        if not sizes:  # a step shorter than the interval: the sample before its end
            sizes = [size for at, size in self.disk if at <= end][-1:]
        return max(sizes, default=0)

    def __enter__(self) -> ProcessMeter:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def step_rows(entries: list[Any], meter: ProcessMeter) -> list[dict[str, Any]]:
    """One row per step of a finished run's event log ``entries``: status,
    seconds, the figures of the process that ran it, its disk peak and the
    asset's metadata."""
    rows: dict[str, dict[str, Any]] = {}
    for entry in entries:
        event = entry.dagster_event
        if event is None or event.step_key is None:
            continue
        kind, step = event.event_type, event.step_key
        if kind == dg.DagsterEventType.STEP_START:
            rows[step] = {"step": step, "status": "running", "_start": entry.timestamp,
                          "_pid": event.pid}  # fmt: skip
        elif step not in rows:
            continue
        elif kind == dg.DagsterEventType.ASSET_MATERIALIZATION:
            metadata = entry.asset_materialization.metadata
            rows[step]["metadata"] = {k: _plain(v.value) for k, v in metadata.items()}
        elif kind in (dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE):
            row = rows[step]
            row["status"] = "ok" if kind == dg.DagsterEventType.STEP_SUCCESS else "failed"
            row["seconds"] = entry.timestamp - row["_start"]
            figures = meter.processes.get(row["_pid"], ProcessFigures())
            # The meter samples every interval and can miss the growth of a step's
            # last moments; the asset's own peak (read at its end) is a floor too.
            own_peak = row.get("metadata", {}).get("peak_rss_bytes")
            row.update(
                peak_rss_bytes=max(figures.peak_rss_bytes, int(own_peak or 0)),
                peak_held_bytes=figures.peak_held_bytes,
                read_bytes=figures.read_bytes,
                written_bytes=figures.written_bytes,
                peak_disk_bytes=meter.disk_peak(row["_start"], entry.timestamp),
            )
            if kind == dg.DagsterEventType.STEP_FAILURE:
                row["error"] = str(event.step_failure_data.error.message)[-2000:]
    for row in rows.values():
        row.pop("_start")
        row["pid"] = row.pop("_pid")
    return list(rows.values())


def _plain(value: Any) -> Any:
    """A metadata value for the JSON: long text (charts, tables) by its length only."""
    if not isinstance(value, (int, float, bool)) and value is not None:
        value = str(value)
        return value if len(value) <= LONGEST_TEXT else f"<{len(value):,} characters>"
    return value


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def chain_job() -> dg.JobDefinition:
    """``train_job`` of the user's code location (:func:`dagster.reconstructable`
    rebuilds it in each step process)."""
    from pipelines.definitions import defs

    return defs.resolve_job_def("train_job")


def execution(preload_libraries: bool) -> dict[str, Any]:
    """One step at a time, each in its own process forked from the forkserver.

    With ``preload_libraries`` (a chain with no memory limit) the forkserver
    preloads what the UI's default does (:data:`pipelines.executor.PRELOAD_MODULES`:
    torch through PyG, MLflow), so no step imports them again (seconds a step);
    under a limit it preloads the code location alone, Dagster's default, so
    that the steps which need none of them (ingestion, partitioning, the store)
    start about 300 MiB lighter and size their buffers from that."""
    from pipelines.executor import PRELOAD_MODULES

    forkserver = {"preload_modules": PRELOAD_MODULES} if preload_libraries else {}
    start = {"forkserver": forkserver}
    return {"config": {"multiprocess": {"max_concurrent": 1, "start_method": start}}}


def failed_run(instance: dg.DagsterInstance, partition: str) -> dg.DagsterRun:
    """The newest ``train_job`` run of ``partition``, as a failed run that can be
    re-executed from its failure: a run left started (its process killed, e.g.
    by a timeout) is marked failed and its concurrency slots freed first, as
    the daemon's run monitoring would.

    Raises:
        ValueError: No run of the partition, or its newest one succeeded.
    """
    runs = instance.get_runs(
        dg.RunsFilter(job_name="train_job", tags={"dagster/partition": partition}), limit=1
    )
    if not runs:
        raise ValueError(f"no train_job run of partition {partition!r} to resume")
    run = runs[0]
    if run.status == dg.DagsterRunStatus.SUCCESS:
        raise ValueError(
            f"run {run.run_id} of partition {partition!r} succeeded: nothing to resume"
        )
    if not run.is_finished:
        instance.report_run_failed(
            run, "its process ended without finishing (bench chain --resume)"
        )
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
    return run


def run_chain(settings: dict[str, Any]) -> dict[str, Any]:
    """Execute ``train_job`` for ``settings["partition"]`` with
    ``settings["run_config"]``, measuring each step's process; the summary is
    written to ``settings["out"]`` and returned. With ``settings["resume"]``
    the partition's failed run is re-executed from its failure instead (its
    successful steps are not run again), with ``settings["run_config"]``."""
    from assets.partitions import PARTITIONS_NAME

    out, partition = Path(settings["out"]), str(settings["partition"])
    summary: dict[str, Any] = {"finished": False, "steps": []}
    _write(out, summary)
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions(PARTITIONS_NAME, [partition])
    preload = bool(settings.get("preload_libraries", False))
    run_config = {**settings["run_config"], "execution": execution(preload)}
    parent = failed_run(instance, partition).run_id if settings.get("resume") else None
    summary["parent_run_id"] = parent
    _write(out, summary)
    with ProcessMeter(Path(settings["disk_root"])) as meter:
        result = dg.execute_job(
            dg.reconstructable(chain_job),
            instance,
            run_config=run_config,
            tags={"dagster/partition": partition},
            reexecution_options=None
            if parent is None
            else dg.ReexecutionOptions.from_failure(parent, instance),
        )
    steps = step_rows(list(instance.all_logs(result.run_id)), meter)
    summary.update(finished=True, success=result.success, run_id=result.run_id, steps=steps)
    instance.add_run_tags(
        result.run_id,
        {
            f"chain/{s['step']}/{k}": f"{s[k]:.3f}" if isinstance(s[k], float) else str(s[k])
            for s in steps
            for k in TAGGED
            if k in s
        },
    )
    _write(out, summary)
    return summary


def main(argv: list[str]) -> int:
    """``python -m gnncore_bench.chain_child SETTINGS_JSON``: exit 0 when the run succeeded."""
    summary = run_chain(json.loads(Path(argv[0]).read_text()))
    return 0 if summary.get("success") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
