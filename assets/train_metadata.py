"""What ``trained_model`` reports about a training run, in one place for both paths.

Training runs in the asset's process (one process) or in a Pipes subprocess
(:mod:`assets.pipes_train`, ``nproc > 1``) that reports its metadata over
Pipes. Both describe the run with :func:`run_metadata`, whose values are in
the Pipes wire format (``{"raw_value": v, "type": t}``, what
``dagster_pipes`` sends); the in-process path turns them into
``dg.MetadataValue`` with :func:`to_dagster`. This module imports neither
dagster nor torch at import time, so the Pipes child loads it cheaply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: task -> the MLflow run metric the quality gate compares (and the asset reports)
VALIDATION_METRIC = {"node": "best_val_accuracy", "link": "best_val_mrr"}

#: A metadata value in the Pipes wire format.
Meta = dict[str, Any]


def meta(value: Any, kind: str) -> Meta:
    """``value`` as a Pipes metadata value of type ``kind`` (``float``, ``int``,
    ``text``, ``url``, ``path``, ``md``, ``bool``, ``json``)."""
    return {"raw_value": value, "type": kind}


def run_metadata(
    result: Any,
    task: str,
    checkpoint_dir: str,
    run_url: str,
    tracking_uri: str,
) -> dict[str, Meta]:
    """The metadata of a finished, tracked run (``result``: a
    :class:`~gnncore.train.NodeTrainResult` or
    :class:`~gnncore.train.LinkTrainResult` with ``run_id`` and ``model_uri``):
    the task's test and validation scores, the validation metric the quality
    gate compares and its value, the best epoch, seconds, device, the epoch
    resumed from, the checkpoint directory, the MLflow run (id, link, model
    URI, tracking URI), the training curves as a chart and the epochs'
    timing (:func:`timing_metadata`)."""
    from gnncore.plots import line_chart_png, markdown_image
    from gnncore.train import LinkTrainResult

    if isinstance(result, LinkTrainResult):
        validation = result.best_val_mrr
        scores = {
            "test_mrr": meta(result.test.mrr, "float"),
            "test_hits@10": meta(result.test.hits[10], "float"),
            "val_mrr": meta(result.best_val_mrr, "float"),
        }
        curves = {"train loss": result.train_loss, "val MRR": result.val_mrr}
    else:
        validation = result.best_val_accuracy
        scores = {
            "test_accuracy": meta(result.test_accuracy, "float"),
            "val_accuracy": meta(result.best_val_accuracy, "float"),
            "test_macro_f1": meta(result.test_macro_f1, "float"),
        }
        curves = {"train loss": result.train_loss, "val accuracy": result.val_accuracy}
        # How validation and test were evaluated (layer-wise or sampled, and why).
        scores.update({f"evaluation_{k}": meta(v, "text") for k, v in result.evaluation.items()})
    chart = line_chart_png(curves, "training", "epoch")
    return {
        "task": meta(task, "text"),
        **scores,
        "validation_metric": meta(VALIDATION_METRIC[task], "text"),
        "validation_score": meta(float(validation), "float"),
        "best_epoch": meta(int(result.best_epoch), "int"),
        "seconds": meta(float(result.seconds), "float"),
        "device": meta(str(result.device), "text"),
        "resumed_from_epoch": meta(int(result.resumed_from_epoch), "int"),
        "checkpoint_dir": meta(checkpoint_dir, "path"),
        "mlflow_run_id": meta(str(result.run_id), "text"),
        "mlflow_run": meta(run_url, "url"),
        "mlflow_tracking_uri": meta(tracking_uri, "text"),
        "model_uri": meta(str(result.model_uri), "text"),
        "curves": meta(markdown_image(chart, "loss and validation metric"), "md"),
        **mode_metadata(getattr(result, "mode_choice", None)),
        **timing_metadata(list(result.throughput)),
    }


def timing_metadata(epochs: list[dict[str, float]]) -> dict[str, Meta]:
    """Where the training epochs' time went (``epochs``: a result's per-epoch
    ``throughput``): ``stall_s`` (the loop waiting for batches, summed),
    ``stall_fraction`` (of the epochs' wall time) and ``epoch_timing``, a table
    of each epoch's seconds: wall, stall, sampling, (exchange,) compute."""
    from gnncore.train.core.throughput import epoch_timing, stall_figures

    totals = stall_figures(epochs)
    rows = epoch_timing(epochs)
    dist = any("dist_exchange_s" in r for r in rows)
    head = "| epoch | epoch s | stall s | stall % | sample s |" + (" exchange s |" if dist else "")
    lines = [head + " compute s |", "|---" * (7 if dist else 6) + "|"]
    for i, r in enumerate(rows, 1):
        exchange = f" {r.get('dist_exchange_s', 0.0):.2f} |" if dist else ""
        lines.append(
            f"| {i} | {r.get('train_s', 0.0):.2f} | {r.get('wait_s', 0.0):.2f} "
            f"| {100 * r.get('stall_fraction', 0.0):.1f} "
            f"| {r.get('sample_s', 0.0):.2f} |{exchange} {r.get('compute_s', 0.0):.2f} |"
        )
    return {
        "stall_s": meta(totals["stall_s"], "float"),
        "stall_fraction": meta(totals["stall_fraction"], "float"),
        "epoch_timing": meta("\n".join(lines), "md"),
    }


def mode_metadata(choice: dict[str, Any] | None) -> dict[str, Meta]:
    """The training mode and how it was chosen (``choice``: a result's
    ``mode_choice``, :meth:`gnncore.modes.choose.ModeChoice.to_dict`): ``mode``,
    ``mode_requested``, ``mode_reason``, ``mode_training_bytes`` (the in-memory
    estimate), ``mode_working_bytes`` (training's working set besides the data)
    and ``mode_budget_bytes`` (when a budget was known); nothing
    without a choice (a distributed run's ranks report their own)."""
    if not choice:
        return {}
    out = {
        "mode": meta(str(choice["mode"]), "text"),
        "mode_requested": meta(str(choice["requested"]), "text"),
        "mode_reason": meta(str(choice["reason"]), "text"),
        "mode_training_bytes": meta(int(choice["training_bytes"]), "int"),
        "mode_working_bytes": meta(int(choice.get("working_bytes", 0)), "int"),
    }
    if choice.get("budget_bytes") is not None:
        out["mode_budget_bytes"] = meta(int(choice["budget_bytes"]), "int")
    return out


def to_dagster(metadata: dict[str, Meta]) -> dict[str, Any]:
    """Pipes metadata values as ``dg.MetadataValue`` (what the Pipes message
    handler makes of them)."""
    import dagster as dg

    build: dict[str, Callable[[Any], Any]] = {
        "float": dg.MetadataValue.float,
        "int": dg.MetadataValue.int,
        "text": dg.MetadataValue.text,
        "url": dg.MetadataValue.url,
        "path": dg.MetadataValue.path,
        "md": dg.MetadataValue.md,
        "bool": dg.MetadataValue.bool,
        "json": dg.MetadataValue.json,
    }
    return {key: build[value["type"]](value["raw_value"]) for key, value in metadata.items()}
