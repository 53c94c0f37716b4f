"""The Dagster side of ``gnncore bench chain``: one run of the chain's assets.

``python -m gnncore_bench.chain_child SETTINGS_JSON`` is started by
:func:`gnncore_bench.chain.bench_chain` inside the chain's memory cgroup, with
``DAGSTER_HOME`` and ``GNNCORE_DATA_ROOT`` under the work directory. It loads
the user's code location (``pipelines.definitions``: the same assets,
resources and ``train_job`` that ``make demo`` and the UI run), adds the
dataset partition and executes ``train_job`` for it in process: one run, one
partition, every step in this process, one after the other.

Each step is measured as it runs, through the instance's event handler
(:class:`StepMeter`): at ``STEP_START`` the process's peak RSS is reset
(``/proc/self/clear_refs``), so an asset's own ``peak_rss_bytes`` and the
figure here are that step's peak, not the run's; at its end the seconds, the
peak (``VmHWM``), the bytes read and written (``/proc/self/io``) and the
largest size of the work directory seen while it ran (sampled every
``disk_interval`` seconds) are kept, with the asset's materialization metadata
(its own ``peak_rss_bytes``, ``memory_budget_bytes``...). The figures are
written to ``out`` after every step (so a step killed for memory leaves the
ones before it and its own start) and added to the Dagster run as tags
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg

from gnncore.usage import peak_rss_bytes, tree_bytes

#: Metadata text longer than this (charts as data URLs, tables) is kept by its length only.
LONGEST_TEXT = 400
#: Figures of a step also put on the Dagster run as tags.
TAGGED = ("seconds", "peak_rss_bytes", "read_bytes", "written_bytes", "peak_disk_bytes")


def _io() -> tuple[int, int]:
    fields = dict(line.split(": ", 1) for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["read_bytes"]), int(fields["write_bytes"])


def reset_peak_rss() -> bool:
    """Reset this process's ``VmHWM`` to its current RSS (Linux ``clear_refs`` 5)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


class StepMeter:
    """Per-step figures of an in-process run, from the events the run emits.

    Args:
        disk_root: The directory whose size is sampled (the work directory).
        save: Called with :attr:`steps` after each step starts and ends.
        disk_interval: Seconds between samples of ``disk_root``.
    """

    def __init__(
        self,
        disk_root: Path,
        save: Callable[[list[dict[str, Any]]], None],
        disk_interval: float = 0.5,
    ) -> None:
        self.disk_root = disk_root
        self.save = save
        self.steps: list[dict[str, Any]] = []
        self._open: dict[str, tuple[float, tuple[int, int]]] = {}
        self._disk_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(disk_interval,), daemon=True)

    def _sample(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self._disk_peak = max(self._disk_peak, tree_bytes([self.disk_root]))

    def __enter__(self) -> StepMeter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def wrap(self, instance: dg.DagsterInstance) -> None:
        """Route ``instance``'s events through :meth:`on_event` first."""
        handle = instance.handle_new_event

        def handle_new_event(event: Any, **kwargs: Any) -> None:
            self.on_event(event)
            handle(event, **kwargs)

        instance.handle_new_event = handle_new_event  # type: ignore[method-assign]

    def on_event(self, entry: Any) -> None:
        """Start, end or annotate the step ``entry`` belongs to."""
        event = entry.dagster_event
        if event is None or event.step_key is None:
            return
        kind, step = event.event_type, event.step_key
        if kind == dg.DagsterEventType.STEP_START:
            reset_peak_rss()
            self._disk_peak = tree_bytes([self.disk_root])
            self._open[step] = (time.perf_counter(), _io())
            self.steps.append({"step": step, "status": "running"})
            self.save(self.steps)
        elif kind == dg.DagsterEventType.ASSET_MATERIALIZATION:
            mat = entry.asset_materialization
            values = {k: _plain(v.value) for k, v in mat.metadata.items()}
            self._row(step)["metadata"] = values
        elif kind in (dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE):
            self._end(step, "ok" if kind == dg.DagsterEventType.STEP_SUCCESS else "failed", event)

    def _row(self, step: str) -> dict[str, Any]:
        return next(s for s in reversed(self.steps) if s["step"] == step)

    def _end(self, step: str, status: str, event: Any) -> None:
        started, (read0, written0) = self._open.pop(step)
        read1, written1 = _io()
        self._disk_peak = max(self._disk_peak, tree_bytes([self.disk_root]))
        row = self._row(step)
        row.update(
            status=status,
            seconds=time.perf_counter() - started,
            peak_rss_bytes=peak_rss_bytes(),
            read_bytes=read1 - read0,
            written_bytes=written1 - written0,
            peak_disk_bytes=self._disk_peak,
        )
        if status == "failed":
            row["error"] = str(event.step_failure_data.error.message)[-2000:]
        self.save(self.steps)


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


def run_chain(settings: dict[str, Any]) -> dict[str, Any]:
    """Execute ``train_job`` for ``settings["partition"]`` with
    ``settings["run_config"]``, measuring each step; the summary is written to
    ``settings["out"]`` as it goes and returned."""
    from assets.partitions import PARTITIONS_NAME
    from pipelines.definitions import defs

    out, partition = Path(settings["out"]), str(settings["partition"])
    summary: dict[str, Any] = {"finished": False, "steps": []}

    def save(steps: list[dict[str, Any]]) -> None:
        summary["steps"] = steps
        _write(out, summary)

    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions(PARTITIONS_NAME, [partition])
    job = defs.resolve_job_def("train_job")
    with StepMeter(Path(settings["disk_root"]), save) as meter:
        meter.wrap(instance)
        result = job.execute_in_process(
            run_config=settings["run_config"],
            instance=instance,
            partition_key=partition,
            raise_on_error=False,
        )
    summary.update(finished=True, success=result.success, run_id=result.run_id)
    instance.add_run_tags(
        result.run_id,
        {
            f"chain/{s['step']}/{k}": f"{s[k]:.3f}" if isinstance(s[k], float) else str(s[k])
            for s in meter.steps
            for k in TAGGED
            if k in s
        },
    )
    save(meter.steps)
    return summary


def main(argv: list[str]) -> int:
    """``python -m gnncore_bench.chain_child SETTINGS_JSON``: exit 0 when the run succeeded."""
    summary = run_chain(json.loads(Path(argv[0]).read_text()))
    return 0 if summary.get("success") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
