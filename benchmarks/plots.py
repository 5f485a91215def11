"""Plots for the report: plain plotly line and bar charts, written as PNG through kaleido."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import plotly.graph_objects as go

WIDTH, HEIGHT = 860, 460


def lines(
    x: Sequence[float],
    series: dict[str, Sequence[float | None]],
    *,
    title: str,
    x_title: str,
    y_title: str,
    log_x: bool = True,
    log_y: bool = True,
    guide: tuple[str, float] | None = None,
) -> go.Figure:
    """One line per series over ``x``; ``guide`` = (label, y) draws a dashed horizontal line (a target)."""
    fig = go.Figure()
    for name, ys in series.items():
        fig.add_trace(go.Scatter(x=list(x), y=list(ys), mode="lines+markers", name=name))
    if guide is not None:
        label, y = guide
        fig.add_hline(y=y, line_dash="dash", line_color="#D55E00", annotation_text=label)
    fig.update_layout(
        title=title, width=WIDTH, height=HEIGHT, template="plotly_white", legend=dict(orientation="h", y=-0.2)
    )
    fig.update_xaxes(title=x_title, type="log" if log_x else "linear")
    fig.update_yaxes(title=y_title, type="log" if log_y else "linear")
    return fig


def bars(labels: Sequence[str], values: Sequence[float], *, title: str, y_title: str) -> go.Figure:
    fig = go.Figure(go.Bar(x=list(labels), y=list(values), text=[f"{v:.1f}" for v in values], textposition="auto"))
    fig.update_layout(title=title, width=WIDTH, height=HEIGHT, template="plotly_white")
    fig.update_yaxes(title=y_title)
    return fig


def write_pngs(figures: dict[str, go.Figure], folder: Path) -> tuple[list[str], str | None]:
    """``folder/<name>.png`` for each figure; (names written, a message when PNGs could not be made)."""
    if not figures:
        return [], None
    from viz.export import start_image_server

    message = start_image_server()
    if message:
        return [], message
    import kaleido

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in figures.items():
        png = kaleido.calc_fig_sync(fig.to_dict(), opts=dict(format="png", width=WIDTH, height=HEIGHT, scale=1))
        (folder / f"{name}.png").write_bytes(png)
        written.append(name)
    return written, None
