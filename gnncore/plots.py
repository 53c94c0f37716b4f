"""Small PNG charts for Dagster metadata and MLflow artifacts (matplotlib, Agg)."""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence


def _figure():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _to_png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    _figure().close(fig)
    return buf.getvalue()


def bar_chart_png(values: Sequence[float], title: str, xlabel: str, ylabel: str,
                  reference: float | None = None) -> bytes:
    """Bars for ``values`` (e.g. part sizes), with an optional reference line."""
    plt = _figure()
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.bar(range(len(values)), values, color="#4C72B0")
    if reference is not None:
        ax.axhline(reference, color="#C44E52", linestyle="--", label=f"target {reference:g}")
        ax.legend(loc="lower right")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    return _to_png(fig)


def line_chart_png(series: Mapping[str, Sequence[float]], title: str, xlabel: str) -> bytes:
    """One line per named series over a shared x axis starting at 1 (e.g. epochs)."""
    plt = _figure()
    fig, ax = plt.subplots(figsize=(6, 3))
    for name, values in series.items():
        ax.plot(range(1, len(values) + 1), values, marker="o", markersize=3, label=name)
    ax.set(title=title, xlabel=xlabel)
    ax.grid(alpha=0.3)
    ax.legend()
    return _to_png(fig)


def markdown_image(png: bytes, alt: str) -> str:
    """Inline ``png`` as a markdown image (how Dagster metadata shows plots)."""
    return f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode('ascii')})"


def panels_png(panels: Mapping[str, Mapping[str, tuple[Sequence[float], Sequence[float]]]],
               xlabel: str, log_y: Sequence[str] = ()) -> bytes:
    """Side-by-side panels, each with one line per named series of ``(xs, ys)``.

    Used for method comparisons (cut, seconds, memory against the part count).
    Panels named in ``log_y`` use a logarithmic y axis.
    """
    plt = _figure()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    for ax, (title, series) in zip(axes[0], panels.items()):
        for name, (xs, ys) in series.items():
            ax.plot(xs, ys, marker="o", markersize=3, label=name)
        ax.set(title=title, xlabel=xlabel)
        if title in log_y:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    return _to_png(fig)
