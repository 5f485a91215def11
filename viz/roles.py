"""Head roles as a figure: layers (rows) x heads (columns), each cell coloured by the role its scores name.

Reads a ``HeadRoles`` by attribute (scores, labels, offsets, threshold): viz never imports attention_core at
run time. Colours are Okabe-Ito (colour-blind safe); the hover shows all four scores.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .heatmaps import style_axis
from .theme import LINE_COLOURS, apply_theme

ROLE_ORDER = ("sink", "previous_token", "induction", "positional", "mixed")
ROLE_NAMES = {
    "sink": "sink",
    "previous_token": "previous-token",
    "induction": "induction",
    "positional": "positional",
    "mixed": "mixed",
}
ROLE_COLOURS = {
    "sink": LINE_COLOURS[4],  # orange
    "previous_token": LINE_COLOURS[0],  # blue
    "induction": LINE_COLOURS[1],  # vermilion
    "positional": LINE_COLOURS[2],  # green
    "mixed": "#e6e6e6",
}
ROLE_LETTERS = {"sink": "S", "previous_token": "P", "induction": "I", "positional": "R", "mixed": "·"}


def _fmt(value: float) -> str:
    return "n/a" if not np.isfinite(value) else f"{value:.2f}"


def role_map(roles, *, selected: tuple[int, int] | None = None, title: str | None = None, theme: str = "screen"):
    """(layers, H) cells coloured by ``roles.labels``; a letter in each cell, every score in the hover."""
    labels = np.asarray(roles.labels, dtype=object)
    layers, heads = labels.shape
    codes = np.vectorize(ROLE_ORDER.index, otypes=[float])(labels)  # (layers, H)
    count = len(ROLE_ORDER)
    scale = []
    for k, role in enumerate(ROLE_ORDER):  # one flat band of colour per role
        scale += [[k / count, ROLE_COLOURS[role]], [(k + 1) / count, ROLE_COLOURS[role]]]
    hover = np.empty((layers, heads), dtype=object)
    for layer in range(layers):
        for head in range(heads):
            parts = [f"layer {layer}, head {head}: <b>{ROLE_NAMES[labels[layer, head]]}</b>"]
            for role in ROLE_ORDER[:-1]:
                parts.append(f"{ROLE_NAMES[role]} {_fmt(float(roles.scores[role][layer, head]))}")
            parts[-1] += f" (offset {int(roles.offsets[layer, head])})"
            hover[layer, head] = "<br>".join(parts)
    fig = go.Figure(
        go.Heatmap(
            z=codes,
            x=np.arange(heads),
            y=np.arange(layers),
            zmin=-0.5,  # code k sits in the middle of its band, (k + 0.5) / count
            zmax=count - 0.5,
            colorscale=scale,
            showscale=False,
            text=np.vectorize(ROLE_LETTERS.get, otypes=[object])(labels).tolist() if layers * heads <= 600 else None,
            texttemplate="%{text}" if layers * heads <= 600 else None,
            customdata=hover,
            hovertemplate="%{customdata}<extra></extra>",
            xgap=1,
            ygap=1,
            name="roles",
        )
    )
    for role in ROLE_ORDER:  # a legend: one invisible marker per role
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                marker=dict(size=12, symbol="square", color=ROLE_COLOURS[role]),
                name=f"{ROLE_LETTERS[role]} {ROLE_NAMES[role]}",
            )
        )
    style_axis(fig, "y", layers, title="layer")
    style_axis(fig, "x", heads, title="head")
    fig.update_xaxes(tickmode="array", tickvals=list(range(heads)), ticktext=[str(h) for h in range(heads)])
    if selected is not None:
        layer, head = selected
        fig.add_shape(
            type="rect", x0=head - 0.5, x1=head + 0.5, y0=layer - 0.5, y1=layer + 0.5, line=dict(color="#222", width=3)
        )
    fig.update_layout(
        title_text=title
        if title is not None
        else f"Head roles: the first of induction, previous-token, positional, sink scoring at least "
        f"{roles.threshold:g} (else mixed)",
        legend=dict(orientation="h", y=-0.15, x=0.5, xanchor="center"),
        height=max(320, 120 + 22 * layers),
    )
    return apply_theme(fig, theme)
