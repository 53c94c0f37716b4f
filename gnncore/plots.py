"""Small PNG charts for Dagster metadata and MLflow artifacts.

Every chart is a :class:`matplotlib.figure.Figure` on its own Agg canvas: no
pyplot, no GUI backend, and no change to matplotlib's global backend (a user's
notebook keeps its own).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def new_figure(width: float, height: float) -> Figure:
    """A figure of ``width`` x ``height`` inches drawn by its own Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _to_png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def bar_chart_png(
    values: Sequence[float], title: str, xlabel: str, ylabel: str, reference: float | None = None
) -> bytes:
    """Bars for ``values`` (e.g. part sizes), with an optional reference line."""
    fig = new_figure(6, 3)
    ax = fig.subplots()
    ax.bar(range(len(values)), values, color="#4C72B0")
    if reference is not None:
        ax.axhline(reference, color="#C44E52", linestyle="--", label=f"target {reference:g}")
        ax.legend(loc="lower right")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    return _to_png(fig)


def line_chart_png(series: Mapping[str, Sequence[float]], title: str, xlabel: str) -> bytes:
    """One line per named series over a shared x axis starting at 1 (e.g. epochs)."""
    fig = new_figure(6, 3)
    ax = fig.subplots()
    for name, values in series.items():
        ax.plot(range(1, len(values) + 1), values, marker="o", markersize=3, label=name)
    ax.set(title=title, xlabel=xlabel)
    ax.grid(alpha=0.3)
    ax.legend()
    return _to_png(fig)


def markdown_image(png: bytes, alt: str) -> str:
    """Inline ``png`` as a markdown image (how Dagster metadata shows plots)."""
    return f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode('ascii')})"


def panels_png(
    panels: Mapping[str, Mapping[str, tuple[Sequence[float], Sequence[float]]]],
    xlabel: str,
    log_y: Sequence[str] = (),
) -> bytes:
    """Side-by-side panels, each with one line per named series of ``(xs, ys)``.

    Used for method comparisons (cut, seconds, memory against the part count).
    Panels named in ``log_y`` use a logarithmic y axis.
    """
    fig = new_figure(4.2 * len(panels), 3.4)
    axes = fig.subplots(1, len(panels), squeeze=False)
    for ax, (title, series) in zip(axes[0], panels.items()):
        for name, (xs, ys) in series.items():
            ax.plot(xs, ys, marker="o", markersize=3, label=name)
        ax.set(title=title, xlabel=xlabel)
        if title in log_y:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    return _to_png(fig)


def curves_figure(
    train_loss: Sequence[float],
    metrics: Mapping[str, Sequence[float]],
    best_epoch: int,
    test: tuple[str, float],
    title: str,
    ylabel: str,
    legend: str,
    suptitle: str,
) -> Figure:
    """Loss per epoch on the left; validation series, the best epoch and the test
    score on the right (how a training run's curves go to MLflow)."""
    import numpy as np

    epochs = np.arange(1, len(train_loss) + 1)
    fig = new_figure(9, 3.5)
    loss_ax, metric_ax = fig.subplots(1, 2)
    loss_ax.plot(epochs, train_loss, color="tab:blue")
    loss_ax.set(title="training loss", xlabel="epoch", ylabel="cross-entropy")
    styles: list[Any] = [("tab:green", "-"), ("tab:olive", "--")]
    for (label, series), (color, style) in zip(metrics.items(), styles):
        if len(series) == len(epochs):
            metric_ax.plot(epochs, series, color=color, linestyle=style, label=label)
    metric_ax.axvline(best_epoch, color="grey", linestyle="--", label=f"best epoch {best_epoch}")
    metric_ax.axhline(test[1], color="tab:red", linestyle=":", label=f"{test[0]} {test[1]:.3f}")
    metric_ax.set(title=title, xlabel="epoch", ylabel=ylabel, ylim=(0, 1))
    metric_ax.legend(loc=legend)
    for ax in (loss_ax, metric_ax):
        ax.grid(alpha=0.3)
    fig.suptitle(suptitle)
    fig.tight_layout()
    return fig


def stacked_bars_png(
    stacks: Mapping[str, Sequence[float]], title: str, xlabel: str, ylabel: str
) -> bytes:
    """One bar per position, stacked from the named series in order (e.g. the
    local / peer / host share of each device's feature reads)."""
    import numpy as np

    fig = new_figure(6, 3)
    ax = fig.subplots()
    bottom: Any = None
    for name, values in stacks.items():
        ax.bar(range(len(values)), values, bottom=bottom, label=name)
        bottom = np.asarray(values, dtype=float) + (0 if bottom is None else bottom)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.legend(loc="lower right", fontsize=7)
    return _to_png(fig)
