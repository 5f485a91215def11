"""Matrix heatmaps on integer axes: the building block of every matrix figure.

Rows run top to bottom (y reversed), columns left to right. Token axes use integer positions with
token tick text, so repeated tokens keep their own rows. Blocked cells (masked, or not finite such
as -inf) are NaN in the main trace, so they never stretch the colour scale, and a second heatmap
trace ("masked" overlay, uint8 0/1 with a transparent/grey colour scale) paints them grey.

Payload: z is sent as float64 for small matrices and float32 above ``FLOAT64_MAX_CELLS`` (plotly 7
encodes numpy arrays as base64 typed arrays); token names go into hover ``customdata`` only up to
``HOVER_TOKENS_MAX_CELLS`` cells, and values are written into cells only up to ``CELL_TEXT_MAX``
rows and columns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

# blocked cells and display copies live in their own modules; imported here under their old address too
from .blocked import MASK_RECTANGLES_MAX as MASK_RECTANGLES_MAX
from .blocked import blocked_cells
from .blocked import mask_rectangles as mask_rectangles
from .blocks import add_block_matrix
from .blocks import block_extremes as block_extremes
from .blocks import block_means as block_means
from .checks import as_mask, as_matrix, check_labels
from .labels import escape_label, tick_labels, visible_label
from .matrix_traces import FLOAT64_MAX_CELLS as FLOAT64_MAX_CELLS
from .matrix_traces import HOVER_TOKENS_MAX_CELLS as HOVER_TOKENS_MAX_CELLS
from .matrix_traces import compact as compact
from .matrix_traces import matrix_traces
from .theme import DIVERGING, SEQUENTIAL, apply_theme, themed_figure

CELL_TEXT_MAX = 24  # values written in cells when rows and columns are both <= this
TICKS_MAX = 30  # every position gets a tick up to this many; above, every k-th
DISPLAY_MAX = 512  # a single heatmap shows at most this many cells per side (about its pixels); above, block means


def tick_positions(n: int, max_ticks: int = TICKS_MAX) -> list[int]:
    """Positions 0..n-1 that get a tick label: all of them, or every k-th when n > ``max_ticks``."""
    if n <= max_ticks:
        return list(range(n))
    step = math.ceil(n / max_ticks)
    return list(range(0, n, step))


def wants_values(shape: tuple[int, ...], show_values: bool | None) -> bool:
    """``show_values`` if given, else True when both sides are at most ``CELL_TEXT_MAX``."""
    if show_values is not None:
        return bool(show_values)
    return max(shape) <= CELL_TEXT_MAX


def _add_display_copy(fig: go.Figure, values: np.ndarray, *, mask, coloraxis: str, value_name: str, name: str) -> None:
    """``add_matrix`` for a matrix larger than the chart's pixels: block means, and a note that says so."""
    rows, cols = values.shape
    block = add_block_matrix(
        fig,
        values,
        row=None,
        col=None,
        mask=mask,
        max_side=DISPLAY_MAX,
        coloraxis=coloraxis,
        value_name=value_name,
        name=name,
    )
    fig.add_annotation(
        text=f"each cell: the mean of a {block}×{block} block ({max(rows, cols)} positions, more than the "
        "chart's pixels); exact values in CSV and in the Query inspector",
        xref="paper",
        yref="paper",
        x=0.5,
        y=1.0,
        yanchor="bottom",
        showarrow=False,
        name="display note",
    )


def add_matrix(
    fig: go.Figure,
    values: np.ndarray,
    *,
    row: int | None = None,
    col: int | None = None,
    mask: np.ndarray | None = None,
    coloraxis: str = "coloraxis",
    show_values: bool = False,
    value_format: str = ".2f",
    blocked_text: str | None = None,
    row_tokens: Sequence[str] | None = None,
    col_tokens: Sequence[str] | None = None,
    row_name: str = "query",
    col_name: str = "key",
    value_name: str = "value",
    name: str = "matrix",
) -> np.ndarray:
    """Add ``values`` (R, C) as a heatmap (and a grey overlay for blocked cells) to ``fig``.

    Cell (i, j) sits at x = j, y = i. Blocked cells (``mask`` False or not finite) are NaN in
    the main trace (named ``name``) and covered by the overlay trace ``name + " masked"`` (see
    ``mask_overlay``); with values shown, a text trace ``name + " masked values"`` labels them.
    Returns the boolean (R, C) array of blocked cells.
    """
    rows, cols = values.shape
    if row is None and max(rows, cols) > DISPLAY_MAX:  # more rows than a chart has pixels: a display copy
        _add_display_copy(fig, values, mask=mask, coloraxis=coloraxis, value_name=value_name, name=name)
        return blocked_cells(values, mask)
    traces, blocked = matrix_traces(
        values,
        mask=mask,
        coloraxis=coloraxis,
        show_values=show_values,
        value_format=value_format,
        blocked_text=blocked_text,
        row_tokens=row_tokens,
        col_tokens=col_tokens,
        row_name=row_name,
        col_name=col_name,
        value_name=value_name,
        name=name,
    )
    where = {} if row is None else dict(row=row, col=col)
    for trace in traces:
        fig.add_trace(trace, **where)
    return blocked


def axis_settings(
    axis: str,
    count: int,
    *,
    tokens: Sequence[str] | None = None,
    title: str | None = None,
    extra_ticks: Sequence[tuple[float, str]] = (),
    extend_to: float | None = None,
    max_ticks: int = TICKS_MAX,
    show_ticks: bool = True,
) -> dict:
    """The layout axis (a plain dict) that ``style_axis`` sets: integer axis 0..count-1 for a heatmap side."""
    settings: dict = dict(showgrid=False, zeroline=False, ticks="", showline=False)
    if title is not None:
        settings["title"] = dict(text=title)
    upper = max([count - 0.5, *(p + 0.5 for p, _ in extra_ticks), *([] if extend_to is None else [extend_to])])
    settings["range"] = [upper, -0.5] if axis == "y" else [-0.5, upper]
    if not show_ticks:
        settings["showticklabels"] = False
    elif tokens is not None:
        labels = tick_labels(tokens)
        positions = tick_positions(count, max_ticks)
        values = positions + [p for p, _ in extra_ticks]
        texts = [labels[p] for p in positions] + [t for _, t in extra_ticks]
        settings.update(tickmode="array", tickvals=values, ticktext=texts)
        if axis == "x":
            settings["tickangle"] = -45 if any(len(labels[p]) > 3 for p in positions) else 0
    else:
        settings.update(tickmode="auto", nticks=min(count, 12), tickformat="d")
        if extra_ticks:
            settings.update(tickmode="array")
            positions = tick_positions(count, 12)
            settings.update(
                tickvals=positions + [p for p, _ in extra_ticks],
                ticktext=[str(p) for p in positions] + [t for _, t in extra_ticks],
            )
    return settings


def style_axis(
    fig: go.Figure,
    axis: str,
    count: int,
    *,
    tokens: Sequence[str] | None = None,
    title: str | None = None,
    row: int | None = None,
    col: int | None = None,
    extra_ticks: Sequence[tuple[float, str]] = (),
    extend_to: float | None = None,
    max_ticks: int = TICKS_MAX,
    show_ticks: bool = True,
) -> None:
    """Integer axis 0..count-1 for a heatmap side; token tick text when ``tokens`` are given.

    The y axis is reversed (first row at the top). ``extra_ticks`` adds (position, text) pairs,
    ``extend_to`` widens the range to include that position (e.g. the row-sum column). Without
    tokens the axis shows plain integer ticks.
    """
    where = {} if row is None else dict(row=row, col=col)
    settings = axis_settings(
        axis,
        count,
        tokens=tokens,
        title=title,
        extra_ticks=extra_ticks,
        extend_to=extend_to,
        max_ticks=max_ticks,
        show_ticks=show_ticks,
    )
    if axis == "y":
        fig.update_yaxes(**settings, **where)
    else:
        fig.update_xaxes(**settings, **where)


def colour_axis(scale: str, *, title: str, zmin: float | None = None, zmax: float | None = None) -> dict:
    """A layout coloraxis: "diverging" (RdBu, centred on 0 via cmid=0) or "sequential" (Viridis)."""
    axis: dict = dict(colorbar=dict(title=dict(text=title, side="right"), thickness=16, len=0.85))
    if scale == "diverging":
        axis.update(colorscale=DIVERGING, cmid=0.0)
    elif scale == "sequential":
        axis.update(colorscale=SEQUENTIAL)
    else:
        axis.update(colorscale=scale)
    if zmin is not None:
        axis["cmin"] = zmin
    if zmax is not None:
        axis["cmax"] = zmax
    return axis


def matrix_heatmap(
    values,
    row_tokens: Sequence[str] | None = None,
    col_tokens: Sequence[str] | None = None,
    *,
    title: str = "",
    row_title: str = "query",
    col_title: str = "key",
    scale: str = "diverging",
    zmin: float | None = None,
    zmax: float | None = None,
    mask=None,
    show_values: bool | None = None,
    value_format: str = ".2f",
    value_name: str = "value",
    blocked_text: str | None = None,
    theme: str = "screen",
) -> go.Figure:
    """Any (R, C) matrix as a heatmap: rows top to bottom, integer axes, token ticks where given.

    ``scale`` is "diverging" (centred on 0) or "sequential"; ``mask`` (broadcastable to (R, C),
    True = may attend) marks blocked cells grey, as do non-finite values.
    """
    values = as_matrix("values", values)
    if row_tokens is not None:
        row_tokens = check_labels("row_tokens", row_tokens, values.shape[0], "values", values.shape)
    if col_tokens is not None:
        col_tokens = check_labels("col_tokens", col_tokens, values.shape[1], "values", values.shape)
    mask = as_mask("mask", mask, values.shape)
    matrix = dict(
        mask=mask,
        show_values=wants_values(values.shape, show_values),
        value_format=value_format,
        blocked_text=blocked_text,
        row_tokens=row_tokens,
        col_tokens=col_tokens,
        row_name=row_title,
        col_name=col_title,
        value_name=value_name,
    )
    layout = dict(
        yaxis=axis_settings("y", values.shape[0], tokens=row_tokens, title=row_title),
        xaxis=axis_settings("x", values.shape[1], tokens=col_tokens, title=col_title),
        title=dict(text=title),
        coloraxis=colour_axis(scale, title=value_name, zmin=zmin, zmax=zmax),
    )
    return matrix_figure(values, matrix, layout, theme)


def matrix_figure(values: np.ndarray, matrix: dict, layout: dict, theme: str, extra: Sequence = ()) -> go.Figure:
    """``values`` as ``add_matrix`` draws it (``matrix``: its options), then ``extra`` traces, with ``layout``: from
    plain dicts in one go (``themed_figure``), or step by step on a figure for a display copy (a matrix larger
    than ``DISPLAY_MAX`` a side: block means and a note)."""
    if max(values.shape) > DISPLAY_MAX:
        fig = go.Figure()
        add_matrix(fig, values, **matrix)
        for trace in extra:
            fig.add_trace(trace)
        for annotation in layout.pop("annotations", ()):  # after the display copy's own note
            fig.add_annotation(annotation)
        fig.update_layout(layout)
        return apply_theme(fig, theme)
    traces, _ = matrix_traces(values, **matrix)
    return themed_figure([*traces, *extra], layout, theme, validate=False)


def token_matrix_heatmap(
    values,
    tokens: Sequence[str],
    *,
    name: str = "X",
    title: str | None = None,
    show_values: bool | None = None,
    theme: str = "screen",
) -> go.Figure:
    """X, Q, K or V: (n, d) with one row per token and one column per dimension, shape in the title.

    ``name`` may hold plotly markup (e.g. ``"Q = XW<sup>Q</sup>"``); it is not escaped.
    """
    values = as_matrix(name, values)
    check_labels("tokens", tokens, values.shape[0], name, values.shape)
    n, d = values.shape
    if title is None:
        title = f"{name}   ({n} tokens × {d} dims)"
    return matrix_heatmap(
        values,
        tokens,
        None,
        title=title,
        row_title="token",
        col_title="dimension",
        scale="diverging",
        show_values=show_values,
        value_name="value",
        theme=theme,
    )


def weight_matrix_heatmap(
    values,
    *,
    name: str = "W<sup>Q</sup>",
    title: str | None = None,
    show_values: bool | None = None,
    theme: str = "screen",
) -> go.Figure:
    """W^Q, W^K or W^V: (d_model, d_k) with rows = model dimensions, columns = head dimensions."""
    values = as_matrix(name, values)
    d_model, d_head = values.shape
    if title is None:
        title = f"{name}   (d_model {d_model} × d_head {d_head})"
    return matrix_heatmap(
        values,
        None,
        None,
        title=title,
        row_title="d_model dimension",
        col_title="head dimension",
        scale="diverging",
        show_values=show_values,
        value_name="weight",
        theme=theme,
    )


def title_with_tokens(prefix: str, token: str) -> str:
    """A title naming a token safely: ``prefix 'token'`` with the token made visible and escaped."""
    return f"{prefix} '{escape_label(visible_label(token, 24))}'"
