"""Blocked cells (masked, or not finite such as -inf) painted grey over a heatmap, and their text.

A small mask is drawn as filled rectangles (one scatter trace: a causal mask is one rectangle per
row, a padding mask one in all); an irregular mask with more than ``MASK_RECTANGLES_MAX``
rectangles as a uint8 heatmap with a transparent/grey colour scale.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .theme import MASK_COLOUR

MASK_RECTANGLES_MAX = 4096  # blocked cells drawn as filled rectangles up to this many, else a uint8 heatmap

TRANSPARENT_GREY = [[0.0, "rgba(0,0,0,0)"], [0.5, "rgba(0,0,0,0)"], [0.5, MASK_COLOUR], [1.0, MASK_COLOUR]]


def blocked_cells(values: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """True where a cell is blocked: ``mask`` False (True = may attend) or the value is not finite."""
    blocked = ~np.isfinite(values)
    if mask is not None:
        blocked |= ~mask
    return blocked


def _format_blocked(value: float) -> str:
    if np.isneginf(value):
        return "−∞"
    if np.isposinf(value):
        return "+∞"
    if np.isnan(value):
        return "NaN"
    return f"{value:.2g}"


def mask_rectangles(blocked: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Blocked cells as rectangles (row0, row1, col0, col1), inclusive, covering exactly the True cells.

    Runs of blocked cells in each row, merged down while the next row has the same run: a
    padding mask is one rectangle, a causal mask one per row.
    """
    rectangles: list[tuple[int, int, int, int]] = []
    open_runs: dict[tuple[int, int], int] = {}  # (col0, col1) -> first row
    for i, line in enumerate(np.vstack([blocked, np.zeros((1, blocked.shape[1]), bool)])):
        padded = np.concatenate([[False], line, [False]]).astype(np.int8)
        edges = np.flatnonzero(np.diff(padded))  # starts at even, ends (exclusive) at odd positions
        runs = {(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2], strict=True)}
        for run in list(open_runs):
            if run not in runs:
                rectangles.append((open_runs.pop(run), i - 1, run[0], run[1]))
        for run in runs:
            open_runs.setdefault(run, i)
    return sorted(rectangles)


def grey_cells(blocked: np.ndarray, x, y, *, name: str, **extra) -> go.Heatmap:
    """``blocked`` (R, C) as a uint8 heatmap at columns ``x`` and rows ``y``: 1 = grey, 0 = transparent."""
    return go.Heatmap(
        z=blocked.astype(np.uint8),
        x=x,
        y=y,
        colorscale=TRANSPARENT_GREY,
        zmin=0,
        zmax=1,
        showscale=False,
        hoverinfo="skip",
        name=name,
        **extra,
    )


def mask_overlay(blocked: np.ndarray, *, name: str = "masked") -> go.Scatter | go.Heatmap:
    """A trace painting the blocked cells grey: filled rectangles (a scatter with ``fill="toself"``).

    Each rectangle is 5 corner points followed by a NaN gap. With more than ``MASK_RECTANGLES_MAX``
    rectangles (an irregular mask) it is instead a uint8 heatmap, 1 = blocked, with a
    transparent/grey colour scale.
    """
    rectangles = mask_rectangles(blocked)
    if len(rectangles) > MASK_RECTANGLES_MAX:
        rows, cols = blocked.shape
        return grey_cells(blocked, np.arange(cols), np.arange(rows), name=name)
    corners = np.empty((len(rectangles), 6, 2), dtype=np.float32)  # 5 corners + a NaN gap per rectangle
    for k, (r0, r1, c0, c1) in enumerate(rectangles):
        x0, x1, y0, y1 = c0 - 0.5, c1 + 0.5, r0 - 0.5, r1 + 0.5
        corners[k] = [[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0], [np.nan, np.nan]]
    points = corners.reshape(-1, 2)
    return go.Scatter(
        x=points[:, 0],
        y=points[:, 1],
        mode="lines",
        fill="toself",
        fillcolor=MASK_COLOUR,
        line=dict(color=MASK_COLOUR, width=0.5),
        hoveron="fills",
        hoverinfo="name",
        name=name,
        showlegend=False,
    )


def mask_text(values: np.ndarray, blocked: np.ndarray, blocked_text: str | None, *, name: str) -> go.Scatter:
    """White text on blocked cells: ``blocked_text``, or what the value was ("−∞", "+∞", "NaN", or the fill)."""
    rows, cols = np.nonzero(blocked)
    texts = [
        blocked_text if blocked_text is not None else _format_blocked(values[i, j])
        for i, j in zip(rows, cols, strict=True)
    ]
    return go.Scatter(
        x=cols,
        y=rows,
        mode="text",
        text=texts,
        textfont=dict(color="white"),
        hoverinfo="skip",
        name=name,
        showlegend=False,
    )
