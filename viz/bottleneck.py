"""The recurrent bottleneck, drawn: how much of the first token reaches position n.

- ``survival_figure(n, curves)``: one line per model of ||∂out_n/∂x_1|| relative to n = 1, on a log
  axis (recurrent curves fall as a straight-ish line: geometric decay), with an optional marker at n.
- ``hops_figure(n, hops)``: path length in hops from token 1 to position n (n - 1 for a recurrent
  net, 1 for attention).
Every curve is 1-D of the length of ``n``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go

from .checks import as_vector
from .theme import LINE_COLOURS, apply_theme

FLOOR = 1e-300  # log axes cannot show 0: values below this are drawn at it


def _curves(n: np.ndarray, curves: Mapping[str, object]) -> dict[str, np.ndarray]:
    if not curves:
        raise ValueError("curves must hold at least one named series")
    return {
        str(name): as_vector(str(name), values, n.shape[0], f"n of shape {n.shape}") for name, values in curves.items()
    }


def survival_figure(
    n, curves: Mapping[str, object], *, mark: int | None = None, title: str | None = None, theme: str = "screen"
) -> go.Figure:
    """Relative reach of x_1 at each n (1 = as much as at n = 1), one line per named curve, log y.

    ``mark`` draws a vertical line at that n. Negative or NaN values raise ValueError.
    """
    n = as_vector("n", n)
    series = _curves(n, curves)
    for name, values in series.items():
        if np.any(~np.isfinite(values)) or np.any(values < 0):
            raise ValueError(f"{name} must be finite and non-negative")
    fig = go.Figure()
    dashes = ("solid", "solid", "dash", "dot", "dashdot", "longdash")
    for index, (name, values) in enumerate(series.items()):
        fig.add_trace(
            go.Scatter(
                x=n,
                y=np.maximum(values, FLOOR),
                mode="lines+markers",
                name=name,
                line=dict(color=LINE_COLOURS[index % len(LINE_COLOURS)], width=3, dash=dashes[index % len(dashes)]),
                marker=dict(size=5),
                hovertemplate=f"{name}<br>n %{{x}}<br>%{{y:.3g}}<extra></extra>",
            )
        )
    if mark is not None:
        fig.add_vline(x=mark, line=dict(color="#888", dash="dot", width=2))
    lowest = min(float(np.maximum(v, FLOOR).min()) for v in series.values())
    fig.update_xaxes(title_text="n (position of the reading token; token 1 is the first)")
    fig.update_yaxes(
        type="log",
        exponentformat="power",
        title_text="‖∂out<sub>n</sub>/∂x<sub>1</sub>‖ ÷ value at n = 1",
        range=[np.log10(lowest) - 0.5, 0.5],
    )
    fig.update_layout(
        title_text=title if title is not None else "How much of the first token reaches position n",
        legend=dict(x=0.02, y=0.02, yanchor="bottom", bgcolor="rgba(255,255,255,0.8)"),
    )
    return apply_theme(fig, theme)


def hops_figure(n, hops: Mapping[str, object], *, title: str | None = None, theme: str = "screen") -> go.Figure:
    """Hops from token 1 to position n, one step line per named model."""
    n = as_vector("n", n)
    series = _curves(n, hops)
    fig = go.Figure()
    for index, (name, values) in enumerate(series.items()):
        fig.add_trace(
            go.Scatter(
                x=n,
                y=values,
                mode="lines",
                name=name,
                line_shape="hv",
                line=dict(color=LINE_COLOURS[index % len(LINE_COLOURS)], width=3),
            )
        )
    fig.update_xaxes(title_text="n")
    fig.update_yaxes(title_text="hops from token 1 to position n", rangemode="tozero")
    fig.update_layout(title_text=title if title is not None else "Path length: n − 1 steps against one")
    return apply_theme(fig, theme)
