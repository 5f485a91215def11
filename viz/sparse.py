"""The long-sequence remedy: how many score entries local and sparse masks keep, and their shapes."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .checks import as_vector
from .theme import apply_theme

PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")  # Okabe-Ito


def sparse_cost_figure(
    n, entries: Mapping[str, np.ndarray], *, title: str | None = None, theme: str = "screen"
) -> go.Figure:
    """(query, key) pairs each pattern allows against n (log-log): full grows as n^2, local as n*w.

    These are the entries a sparse kernel computes; a dense core (like this app's) computes all n^2
    scores and then blocks the rest."""
    n = as_vector("n", n)
    fig = go.Figure()
    for index, (name, values) in enumerate(entries.items()):
        values = as_vector(f"entries[{name!r}]", values, len(n), "n")
        fig.add_trace(
            go.Scatter(
                x=n,
                y=values,
                name=name,
                mode="lines+markers",
                line=dict(color=PALETTE[index % len(PALETTE)]),
                hovertemplate="n=%{x}<br>%{y:,} allowed pairs<extra>" + name + "</extra>",
            )
        )
    fig.update_xaxes(type="log", title="sequence length n")
    fig.update_yaxes(type="log", title="(query, key) pairs the mask allows")
    fig.update_layout(title=title or "Entries each mask keeps: n² against n·w", legend=dict(orientation="h", y=-0.25))
    return apply_theme(fig, theme)


def mask_patterns_figure(
    patterns: Mapping[str, np.ndarray], *, title: str | None = None, theme: str = "screen"
) -> go.Figure:
    """Small multiples of boolean (n, n) masks: dark = may attend. Queries top to bottom, keys left to right."""
    names = list(patterns)
    if not names:
        raise ValueError("no mask patterns given")
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=names, horizontal_spacing=0.03)
    for col, name in enumerate(names, start=1):
        mask = np.asarray(patterns[name])
        if mask.ndim != 2:
            raise ValueError(f"mask {name!r} must be 2-D, got shape {mask.shape}")
        fig.add_trace(
            go.Heatmap(
                z=mask.astype(np.uint8),
                colorscale=[[0, "#f2f2f2"], [1, "#0072B2"]],
                showscale=False,
                zmin=0,
                zmax=1,
                hovertemplate="query %{y}, key %{x}: %{z}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        fig.update_yaxes(
            autorange="reversed", showticklabels=False, row=1, col=col, scaleanchor=f"x{col if col > 1 else ''}"
        )
        fig.update_xaxes(showticklabels=False, row=1, col=col)
    fig.update_layout(title=title or "Mask shapes (blue = may attend)", height=300)
    return apply_theme(fig, theme)
