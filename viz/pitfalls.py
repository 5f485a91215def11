"""The article's pitfalls as figures, from plain arrays the core's analysis supplies.

- ``variance_figure(d_k, var_unscaled, var_scaled)``: variance of q·k against d_k, log-log, with
  the theory lines var = d_k (unscaled) and var = 1 (scaled by 1/√d_k).
- ``saturation_figure(x, entropy_unscaled, entropy_scaled, grad_unscaled, grad_scaled)``: softmax
  entropy and gradient norm against d_k (or a temperature), scaled vs unscaled.
- ``temperature_figure(t, entropy, grad_norm)``: one head's entropy and gradient norm against the
  temperature its scores are divided by, with marks at chosen t (√d_k, the head's own).
- ``cost_figure(n, bytes_used, seconds)``: memory and time of attention against sequence length,
  log-log, each with an n² reference curve through the largest n.
- ``permutation_figure`` and ``realign`` live in ``permutation.py`` (importable from here too).
Each array is 1-D of the same length as its x array unless stated.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .checks import as_vector
from .permutation import permutation_figure as permutation_figure
from .permutation import realign as realign
from .theme import LINE_COLOURS, apply_theme

UNSCALED_COLOUR, SCALED_COLOUR, THEORY_COLOUR = LINE_COLOURS[1], LINE_COLOURS[0], "#555555"


def _series(name: str, values, x: np.ndarray, x_name: str) -> np.ndarray:
    return as_vector(name, values, x.shape[0], f"{x_name} of shape {x.shape}")


def _positive(name: str, values: np.ndarray) -> None:
    if np.any(values[np.isfinite(values)] <= 0):
        raise ValueError(f"{name} must be positive for a log axis")


def _log_axis(values: np.ndarray) -> dict:
    """Log-axis ticks: one per decade when the data spans two or more decades, else 1-2-5 steps."""
    finite = values[np.isfinite(values) & (values > 0)]
    if finite.size and np.log10(finite.max() / finite.min()) >= 2:
        return dict(type="log", dtick=1, exponentformat="power")
    return dict(type="log", dtick="D2", exponentformat="power")


def _x_ticks(x: np.ndarray) -> dict:
    """Ticks at the measured x values themselves (up to 12 of them), e.g. d_k = 4, 8, ..., 512."""
    if x.size <= 12:
        return dict(tickmode="array", tickvals=list(x), ticktext=[f"{v:g}" for v in x])
    return {}


def variance_figure(d_k, var_unscaled, var_scaled, *, title: str | None = None, theme: str = "screen") -> go.Figure:
    """Measured Var(q·k) for each d_k, unscaled and scaled, against the theory var = d_k and var = 1.

    All three arrays are (n,) with d_k > 0. Traces: "unscaled q·k", "scaled q·k/√d_k",
    "theory: d_k", "theory: 1". Both axes logarithmic.
    """
    d_k = as_vector("d_k", d_k)
    _positive("d_k", d_k)
    var_unscaled = _series("var_unscaled", var_unscaled, d_k, "d_k")
    var_scaled = _series("var_scaled", var_scaled, d_k, "d_k")
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=d_k,
            y=d_k,
            mode="lines",
            name="theory: d<sub>k</sub>",
            line=dict(color=UNSCALED_COLOUR, dash="dash", width=2),
        )
    )
    fig.add_trace(
        go.Scatter(
            x=d_k,
            y=np.ones_like(d_k),
            mode="lines",
            name="theory: 1",
            line=dict(color=SCALED_COLOUR, dash="dash", width=2),
        )
    )
    fig.add_trace(
        go.Scatter(
            x=d_k,
            y=var_unscaled,
            mode="lines+markers",
            name="unscaled q·k",
            line=dict(color=UNSCALED_COLOUR, width=3),
            marker=dict(size=9),
        )
    )
    fig.add_trace(
        go.Scatter(
            x=d_k,
            y=var_scaled,
            mode="lines+markers",
            name="scaled q·k / √d<sub>k</sub>",
            line=dict(color=SCALED_COLOUR, width=3),
            marker=dict(size=9, symbol="square"),
        )
    )
    fig.update_xaxes(type="log", title_text="d<sub>k</sub>  (key dimension)", **_x_ticks(d_k))
    all_values = np.concatenate([d_k, var_unscaled, var_scaled, [1.0]])
    fig.update_yaxes(title_text="variance of the score", **_log_axis(all_values))
    fig.update_layout(
        title_text=title if title is not None else "Without scaling, score variance grows with d<sub>k</sub>",
        legend=dict(x=0.02, y=0.98, bgcolor="rgba(255,255,255,0.8)"),
    )
    return apply_theme(fig, theme)


def saturation_figure(
    x,
    entropy_unscaled,
    entropy_scaled,
    grad_unscaled,
    grad_scaled,
    *,
    x_title: str = "d<sub>k</sub>",
    log_x: bool = True,
    max_entropy: float | None = None,
    title: str | None = None,
    theme: str = "screen",
) -> go.Figure:
    """Softmax saturation: mean row entropy (left) and gradient norm (right, log) against ``x``.

    ``x`` is d_k (or a temperature; set ``x_title``). ``max_entropy`` (ln S) draws the uniform
    limit. Traces per panel: "unscaled", "scaled".
    """
    x = as_vector("x", x)
    if log_x:
        _positive("x", x)
    entropy_unscaled = _series("entropy_unscaled", entropy_unscaled, x, "x")
    entropy_scaled = _series("entropy_scaled", entropy_scaled, x, "x")
    grad_unscaled = _series("grad_unscaled", grad_unscaled, x, "x")
    grad_scaled = _series("grad_scaled", grad_scaled, x, "x")
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.12,
        subplot_titles=("softmax entropy (low = saturated)", "gradient norm through softmax"),
    )
    for col, (unscaled, scaled) in enumerate(((entropy_unscaled, entropy_scaled), (grad_unscaled, grad_scaled)), 1):
        fig.add_trace(
            go.Scatter(
                x=x,
                y=unscaled,
                mode="lines+markers",
                name="unscaled",
                legendgroup="unscaled",
                showlegend=col == 1,
                line=dict(color=UNSCALED_COLOUR, width=3),
                marker=dict(size=8),
            ),
            row=1,
            col=col,
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=scaled,
                mode="lines+markers",
                name="scaled by 1/√d<sub>k</sub>",
                legendgroup="scaled",
                showlegend=col == 1,
                line=dict(color=SCALED_COLOUR, width=3),
                marker=dict(size=8, symbol="square"),
            ),
            row=1,
            col=col,
        )
    if max_entropy is not None:
        fig.add_hline(
            y=max_entropy,
            line=dict(color=THEORY_COLOUR, dash="dot"),
            row=1,
            col=1,
            annotation_text="uniform",
            annotation_position="bottom right",
        )
    fig.update_xaxes(type="log" if log_x else "linear", title_text=x_title, **_x_ticks(x))
    fig.update_yaxes(title_text="entropy (nats)", rangemode="tozero", row=1, col=1)
    gradient_axis = _log_axis(np.concatenate([grad_unscaled, grad_scaled]))
    fig.update_yaxes(title_text=GRADIENT_TITLE, row=1, col=2, **gradient_axis)
    fig.update_layout(
        title_text=title if title is not None else "Large scores saturate the softmax and shrink its gradient",
        legend=dict(orientation="h", x=0.5, xanchor="center", y=-0.22),
    )
    return apply_theme(fig, theme)


GRADIENT_TITLE = "‖∂(g·softmax)/∂scores‖, random g"  # what is plotted: a loss's gradient, not the Jacobian's norm


def _mark_temperatures(fig: go.Figure, marks: dict[str, float]) -> None:
    """A dashed line at each marked temperature on both panels, its label once, low in the entropy panel.

    On a log axis an annotation's x is log10 of the value (a shape's x is the value itself). With two or
    more marks the lowest one's label goes to the left of its line, the others' to the right, so two
    close marks (√d_k and the head's own t) do not write over each other.
    """
    lowest = min(marks.values()) if len(marks) > 1 else None
    for index, (label, t) in enumerate(marks.items()):
        colour = LINE_COLOURS[(index + 2) % len(LINE_COLOURS)]
        for col in (1, 2):
            fig.add_vline(x=t, line=dict(color=colour, dash="dash", width=1.5), row=1, col=col)
        fig.add_annotation(
            x=float(np.log10(t)),
            xref="x",
            y=0.03,
            yref="y domain",
            yanchor="bottom",
            xanchor="right" if t == lowest else "left",
            text=label,
            showarrow=False,
            font=dict(color=colour),
        )


def temperature_figure(
    temperature,
    entropy,
    grad_norm,
    *,
    uniform_entropy: float | None = None,
    marks: dict[str, float] | None = None,
    name: str = "this head",
    title: str | None = None,
    theme: str = "screen",
) -> go.Figure:
    """One head's mean row entropy (left) and gradient norm (right, log) against the temperature t.

    ``temperature``, ``entropy`` and ``grad_norm`` are (m,) with t > 0. ``uniform_entropy`` draws the
    "uniform over allowed keys" limit; ``marks`` draws a labelled vertical line at each named t
    (e.g. √d_k, the head's own 1/scale). One trace per panel, named ``name``.
    """
    temperature = as_vector("temperature", temperature)
    _positive("temperature", temperature)
    entropy = _series("entropy", entropy, temperature, "temperature")
    grad_norm = _series("grad_norm", grad_norm, temperature, "temperature")
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.12,
        subplot_titles=("softmax entropy (low = saturated)", "gradient norm through softmax"),
    )
    for col, values in enumerate((entropy, grad_norm), 1):
        fig.add_trace(
            go.Scatter(
                x=temperature,
                y=values,
                mode="lines+markers",
                name=name,
                legendgroup="head",
                showlegend=col == 1,
                line=dict(color=SCALED_COLOUR, width=3),
                marker=dict(size=8),
            ),
            row=1,
            col=col,
        )
    if uniform_entropy is not None:
        fig.add_hline(
            y=uniform_entropy,
            line=dict(color=THEORY_COLOUR, dash="dot"),
            row=1,
            col=1,
            annotation_text="uniform over allowed keys",
            annotation_position="bottom right",
        )
    _mark_temperatures(fig, marks or {})
    marked = [float(t) for t in (marks or {}).values()]  # a marked t (√d_k = 5.66) is named by its label, not a tick
    ticks = [t for t in temperature if float(t).is_integer() or not any(np.isclose(t, m) for m in marked)]
    fig.update_xaxes(type="log", title_text="temperature t (softmax of scores ÷ t)", **_x_ticks(np.asarray(ticks)))
    fig.update_yaxes(title_text="entropy (nats)", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text=GRADIENT_TITLE, row=1, col=2, **_log_axis(grad_norm))
    fig.update_layout(
        title_text=title if title is not None else "This head: entropy and gradient against temperature",
        legend=dict(orientation="h", x=0.5, xanchor="center", y=-0.22),
    )
    return apply_theme(fig, theme)


def _n_squared_reference(n: np.ndarray, measured: np.ndarray) -> np.ndarray:
    finite = np.isfinite(measured) & (measured > 0)
    if not finite.any():
        return np.full_like(n, np.nan)
    anchor = np.flatnonzero(finite)[np.argmax(n[finite])]
    return measured[anchor] * (n / n[anchor]) ** 2


def cost_figure(
    n,
    bytes_used=None,
    seconds=None,
    *,
    memory_name: str = "measured memory",
    time_name: str = "measured time",
    title: str | None = None,
    theme: str = "screen",
) -> go.Figure:
    """Memory (bytes) and time (seconds) of attention against sequence length n, log-log.

    ``n`` is (m,); ``bytes_used`` and ``seconds`` are (m,) or None (that panel is left out).
    ``memory_name`` and ``time_name`` name the traces: say what was measured (or that it was computed).
    Each panel has a dashed "n² reference" through the value at the largest n.
    """
    n = as_vector("n", n)
    _positive("n", n)
    panels = []
    if bytes_used is not None:
        panels.append(("memory", memory_name, _series("bytes_used", bytes_used, n, "n"), "bytes", LINE_COLOURS[0]))
    if seconds is not None:
        panels.append(("time", time_name, _series("seconds", seconds, n, "n"), "seconds", LINE_COLOURS[1]))
    if not panels:
        raise ValueError("cost_figure needs bytes_used or seconds (both are None)")
    fig = make_subplots(
        rows=1, cols=len(panels), horizontal_spacing=0.14, subplot_titles=[f"{name} against n" for name, *_ in panels]
    )
    for col, (_, name, values, unit, colour) in enumerate(panels, 1):
        fig.add_trace(
            go.Scatter(
                x=n,
                y=_n_squared_reference(n, values),
                mode="lines",
                name="n² reference",
                legendgroup="ref",
                showlegend=col == 1,
                line=dict(color=THEORY_COLOUR, dash="dash", width=2),
            ),
            row=1,
            col=col,
        )
        fig.add_trace(
            go.Scatter(
                x=n, y=values, mode="lines+markers", name=name, line=dict(color=colour, width=3), marker=dict(size=8)
            ),
            row=1,
            col=col,
        )
        fig.update_yaxes(title_text=unit, row=1, col=col, **_log_axis(values))
    fig.update_xaxes(type="log", title_text="sequence length n", **_x_ticks(n))
    fig.update_layout(
        title_text=title if title is not None else "Attention cost grows as n²",
        legend=dict(orientation="h", x=0.5, xanchor="center", y=-0.22),
    )
    return apply_theme(fig, theme)
