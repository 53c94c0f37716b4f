"""``make demo``: materialize the whole pipeline on the built-in generated graph.

Registers the dataset partition ``synthetic`` and runs ``train_job`` for it in
the Dagster instance at ``$DAGSTER_HOME`` (so the run and its asset
materializations show up in the UI afterwards, under that partition), then
prints the results and how to open the Dagster and MLflow UIs.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

import dagster as dg


class _NotCaptured(logging.Filter):
    """Passes the records of loggers other than ``captured`` and their children."""

    def __init__(self, captured: Sequence[str]) -> None:
        super().__init__()
        self.captured = tuple(captured)

    def filter(self, record: logging.LogRecord) -> bool:
        return not any(
            record.name == name or record.name.startswith(name + ".") for name in self.captured
        )


def configure_root_logger(captured: Sequence[str]) -> None:
    """Give the root logger the handler a library's module-level ``logging.info``
    would otherwise install mid-run (``logging.basicConfig``, which Dagster's
    sqlite storage reaches), at WARNING and without the ``captured`` loggers,
    whose records the Dagster instance prints itself (``python_logs`` in
    ``pipelines/dagster.yaml``): else every gnncore line of the run shows twice,
    once as Dagster's and once as ``INFO:gnncore...:``."""
    handler = logging.StreamHandler()
    handler.setLevel(logging.WARNING)
    handler.addFilter(_NotCaptured(captured))
    handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    logging.getLogger().addHandler(handler)


def main() -> int:
    if not os.environ.get("DAGSTER_HOME"):
        print("DAGSTER_HOME is not set; run this through `make demo`", file=sys.stderr)
        return 2
    instance = dg.DagsterInstance.get()
    configure_root_logger(instance.managed_python_loggers)
    from assets.partitions import DEMO_DATASET, PARTITIONS_NAME
    from pipelines.definitions import defs

    instance.add_dynamic_partitions(PARTITIONS_NAME, [DEMO_DATASET])
    job = defs.resolve_job_def("train_job")
    result = job.execute_in_process(instance=instance, partition_key=DEMO_DATASET)
    if not result.success:
        print("the pipeline failed; see the log above", file=sys.stderr)
        return 1
    print(f"\n=== gnncore demo: pipeline materialized (dataset partition {DEMO_DATASET!r}) ===")
    for event in result.get_asset_materialization_events():
        mat = event.materialization
        values = {k: v.value for k, v in mat.metadata.items()}
        shown = {
            k: values[k]
            for k in (
                "path",
                "num_nodes",
                "num_edges",
                "edge_cut_fraction",
                "max_part_ratio",
                "replicated_nodes",
                "memory_increase",
                "cache_nodes",
                "predicted_cost_max",
                "test_accuracy",
                "val_accuracy",
                "rows",
                "training_test_accuracy",
                "model_version",
                "mlflow_run",
            )
            if k in values
        }
        print(f"- {mat.asset_key.to_user_string()}: {shown}")
    for check in result.get_asset_check_evaluations():
        print(f"- check {check.check_name}: {'passed' if check.passed else 'FAILED'}")
    serving = _serving_hint(result)
    if serving:
        print(serving)
    print(
        f"\nThe assets are partitioned by dataset: this run is the partition {DEMO_DATASET!r} "
        "(in the UI, Materialize all asks for a partition: pick it, or add your own)."
    )
    print("\nOpen the UIs (both bind to 127.0.0.1):")
    print("  make ui         # Dagster: http://127.0.0.1:3000 (webserver + daemon)")
    print("  make mlflow-ui  # MLflow:  http://127.0.0.1:5000")
    return 0


def _serving_hint(result: dg.ExecuteInProcessResult) -> str:
    """How to serve the production model the run predicted with (empty when the
    run did not reach ``predictions``)."""
    mats = result.asset_materializations_for_node("predictions")
    if not mats:
        return ""
    values = {k: v.value for k, v in mats[-1].metadata.items()}
    test = values.get("test_accuracy")
    trained = values.get("training_test_accuracy")
    lines = [
        f"\npredictions: {values.get('rows')} rows in {values.get('path')}"
        + (f", test accuracy {test:.4f} (training run: {trained:.4f})" if test and trained else ""),
        "Serve the production model (MLflow's scoring server on 127.0.0.1):",
        f"  MLFLOW_TRACKING_URI={values.get('mlflow_tracking_uri')} \\",
        "  .venv/bin/mlflow models serve --env-manager local -h 127.0.0.1 -p 5001 \\",
        f"      -m {values.get('model_uri')}",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
