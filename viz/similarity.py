"""The dot product as a similarity, drawn.

- ``dot_factors_figure(dot, query_norm, key_norms, cosine, key_tokens)``: for one query, three rows of
  bars over its keys: the score q·k_j, the length product |q||k_j|, and cos θ (-1..1); the first
  row is the product of the other two. A chosen key is outlined; blocked keys are grey.
- ``cosine_scatter_figure(dot, cosine)``: every (query, key) pair of the head, cos θ against q·k,
  with the chosen query's keys highlighted: same cosine, different scores, because lengths differ.
- ``angle_figure(a, b)``: two 2-D arrows from the origin with the angle between them and their
  dot product, for the slider demo.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .checks import as_matrix, as_vector, check_labels, same_shape
from .heatmaps import style_axis
from .labels import hover_labels
from .theme import LINE_COLOURS, MASK_COLOUR, apply_theme

DOT_COLOUR, LENGTH_COLOUR, COSINE_COLOUR = LINE_COLOURS[0], LINE_COLOURS[2], LINE_COLOURS[1]
HIGHLIGHT = "#222222"


def dot_factors_figure(
    dot,
    query_norm: float,
    key_norms,
    cosine,
    key_tokens: Sequence[str] | None = None,
    *,
    key: int | None = None,
    allowed=None,
    title: str | None = None,
    theme: str = "screen",
) -> go.Figure:
    """One query's scores split into lengths and angle. ``dot``, ``key_norms``, ``cosine``: (S,).

    Traces (in order): "q·k", "|q||k|", "cos θ". ``allowed`` (S,) bool marks keys the query may
    attend (others drawn grey); ``key`` outlines one key in every row.
    """
    dot = as_vector("dot", dot)
    count = dot.shape[0]
    key_norms = as_vector("key_norms", key_norms, count, f"dot of shape {dot.shape}")
    cosine = as_vector("cosine", cosine, count, f"dot of shape {dot.shape}")
    labels = check_labels("key_tokens", key_tokens, count, "dot", dot.shape)
    if key is not None and not 0 <= key < count:
        raise ValueError(f"key {key} out of range 0..{count - 1}")
    allowed = np.ones(count, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    if allowed.shape != (count,):
        raise ValueError(f"allowed has shape {allowed.shape} but dot has shape {dot.shape}")
    lengths = float(query_norm) * key_norms  # (S,)  |q||k_j|
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=("score q·k<sub>j</sub>", "lengths |q| |k<sub>j</sub>|", "direction cos θ<sub>j</sub>"),
    )
    hover = hover_labels(labels)
    outline = [2.5 if j == key else 0 for j in range(count)]
    for row, (name, values, colour) in enumerate(
        (("q·k", dot, DOT_COLOUR), ("|q||k|", lengths, LENGTH_COLOUR), ("cos θ", cosine, COSINE_COLOUR)), start=1
    ):
        colours = [colour if ok else MASK_COLOUR for ok in allowed]
        fig.add_trace(
            go.Bar(
                x=np.arange(count),
                y=values,
                name=name,
                marker=dict(color=colours, line=dict(width=outline, color=HIGHLIGHT)),
                customdata=hover,
                hovertemplate=f"key %{{customdata}}<br>{name} %{{y:.4g}}<extra></extra>",
                showlegend=False,
            ),
            row=row,
            col=1,
        )
        style_axis(fig, "x", count, tokens=labels if row == 3 else None, row=row, col=1, show_ticks=row == 3)
    fig.update_yaxes(range=[-1.05, 1.05], row=3, col=1)
    fig.update_yaxes(zeroline=True, zerolinecolor="#888")
    fig.update_layout(
        title_text=title if title is not None else "Each score = length product × cosine of the angle",
        bargap=0.15,
        height=560,
    )
    return apply_theme(fig, theme)


def cosine_scatter_figure(
    dot,
    cosine,
    *,
    query: int | None = None,
    key_tokens: Sequence[str] | None = None,
    allowed=None,
    title: str | None = None,
    theme: str = "screen",
) -> go.Figure:
    """Every pair (i, j) of one head: x = cos θ_ij, y = q_i·k_j. ``dot``, ``cosine``: (L, S).

    Traces: "all pairs" (grey) and, with ``query``, "query i" (its S keys, labelled on hover).
    ``allowed`` (L, S) bool keeps only pairs the mask allows.
    """
    dot, cosine = as_matrix("dot", dot), as_matrix("cosine", cosine)
    same_shape("dot", dot, "cosine", cosine)
    rows, cols = dot.shape
    labels = check_labels("key_tokens", key_tokens, cols, "dot", dot.shape)
    if query is not None and not 0 <= query < rows:
        raise ValueError(f"query {query} out of range 0..{rows - 1}")
    allowed = (
        np.ones(dot.shape, dtype=bool) if allowed is None else np.broadcast_to(np.asarray(allowed, bool), dot.shape)
    )
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=cosine[allowed],
            y=dot[allowed],
            mode="markers",
            name="all pairs",
            marker=dict(color="#b0b0b0", size=5),
            hovertemplate="cos θ %{x:.3f}<br>q·k %{y:.4g}<extra></extra>",
        )
    )
    if query is not None:
        keep = allowed[query]
        fig.add_trace(
            go.Scatter(
                x=cosine[query][keep],
                y=dot[query][keep],
                mode="markers",
                name=f"query {query}",
                marker=dict(color=DOT_COLOUR, size=10, line=dict(width=1, color="white")),
                customdata=np.array(hover_labels(labels), dtype=object)[keep],
                hovertemplate="key %{customdata}<br>cos θ %{x:.3f}<br>q·k %{y:.4g}<extra></extra>",
            )
        )
    fig.update_xaxes(title_text="cos θ (direction only)", range=[-1.05, 1.05])
    fig.update_yaxes(title_text="q·k (score before scaling)")
    fig.update_layout(title_text=title if title is not None else "Same direction, different scores: length matters too")
    return apply_theme(fig, theme)


def angle_figure(a, b, *, title: str | None = None, theme: str = "screen") -> go.Figure:
    """Two 2-D vectors ``a`` and ``b`` (2,) drawn as arrows from the origin, with a·b and cos θ.

    Traces: "a", "b" (lines from the origin; the arrow heads are annotations) and "projection of b
    on a" (dashed), whose signed length times |a| is the dot product.
    """
    a, b = as_vector("a", a, 2, "a 2-D vector"), as_vector("b", b, 2, "a 2-D vector")
    norm_a, norm_b = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if norm_a == 0 or norm_b == 0:
        raise ValueError("a and b must have non-zero length")
    dot = float(a @ b)
    cosine = dot / (norm_a * norm_b)
    foot = a * (dot / norm_a**2)  # (2,) projection of b onto a
    fig = go.Figure()
    for name, vector, colour in (("a", a, DOT_COLOUR), ("b", b, COSINE_COLOUR)):
        fig.add_trace(
            go.Scatter(
                x=[0, vector[0]],
                y=[0, vector[1]],
                mode="lines",
                name=name,
                line=dict(color=colour, width=4),
                hoverinfo="skip",
            )
        )
        fig.add_annotation(
            x=vector[0],
            y=vector[1],
            ax=0,
            ay=0,
            xref="x",
            yref="y",
            axref="x",
            ayref="y",
            showarrow=True,
            arrowhead=3,
            arrowsize=1.2,
            arrowwidth=4,
            arrowcolor=colour,
            text="",
        )
    fig.add_trace(
        go.Scatter(
            x=[b[0], foot[0]],
            y=[b[1], foot[1]],
            mode="lines",
            name="projection of b on a",
            line=dict(color="#888", dash="dot", width=2),
            hoverinfo="skip",
        )
    )
    reach = max(norm_a, norm_b) * 1.25
    fig.update_xaxes(range=[-reach, reach], zeroline=True, zerolinecolor="#aaa", title_text="")
    fig.update_yaxes(range=[-reach, reach], zeroline=True, zerolinecolor="#aaa", scaleanchor="x", scaleratio=1)
    angle = float(np.degrees(np.arccos(np.clip(cosine, -1.0, 1.0))))
    fig.update_layout(
        title_text=title if title is not None else f"θ = {angle:.0f}°   a·b = {dot:.3f}   cos θ = {cosine:.3f}",
        legend=dict(x=0.02, y=0.98, bgcolor="rgba(255,255,255,0.8)"),
        height=420,
    )
    return apply_theme(fig, theme)
