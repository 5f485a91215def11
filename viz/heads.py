"""All heads at once: a grid of small multiples for one layer, and a layer × head overview."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .checks import as_array, as_mask, check_labels
from .grid_traces import grid_layout, grid_traces
from .heatmaps import (
    add_block_matrix,
    add_matrix,
    axis_settings,
    colour_axis,
    matrix_figure,
    style_axis,
    wants_values,
)
from .selection import SELECTED_COLOUR, panel_outline, panel_title, selected_cell
from .stats import SHORT_NAMES, STATISTICS, overview_matrix
from .theme import SEQUENTIAL_OTHER, apply_theme, themed_figure

GRID_TICKS_MAX = 12  # token ticks on the outer panels of the grid up to this many tokens
GRID_DISPLAY_MAX = 96  # a panel shows at most this many cells per side (about its pixels); above, block means
PANEL_HEIGHT = 230  # pixels per grid row


def grid_shape(count: int, columns: int | None = None) -> tuple[int, int]:
    """(rows, columns) for ``count`` panels: few empty slots, wider than tall, at most 8 columns unless told."""
    if columns is None:

        def cost(cols: int) -> float:
            rows = math.ceil(count / cols)
            return 2 * (rows * cols - count) + abs(cols - 1.6 * rows)

        columns = min(range(1, min(count, 8) + 1), key=cost)
    columns = max(1, min(columns, count))
    return math.ceil(count / columns), columns


def _head_panel(
    fig: go.Figure,
    weights: np.ndarray,
    h: int,
    grid: tuple[int, int, int],
    mask,
    query_tokens: list[str],
    key_tokens: list[str],
) -> int:
    """Head ``h``'s (L, S) weights in its grid cell (``grid`` = rows, columns, heads); returns the block size."""
    grid_rows, grid_cols, heads = grid
    rows, cols = weights.shape
    ticks = max(rows, cols) <= GRID_TICKS_MAX
    r, c = divmod(h, grid_cols)
    block = 1
    if (
        max(rows, cols) > GRID_DISPLAY_MAX
    ):  # more cells than a panel has pixels: send a display copy, not H full matrices
        block = add_block_matrix(
            fig,
            weights,
            row=r + 1,
            col=c + 1,
            mask=mask,
            max_side=GRID_DISPLAY_MAX,
            value_name="weight",
            name=f"head {h}",
        )
    else:
        add_matrix(
            fig,
            weights,
            row=r + 1,
            col=c + 1,
            mask=mask,
            row_tokens=query_tokens,
            col_tokens=key_tokens,
            value_name="weight",
            name=f"head {h}",
            blocked_text="0",
            show_values=False,
        )
    style_axis(
        fig,
        "y",
        rows,
        tokens=query_tokens,
        row=r + 1,
        col=c + 1,
        show_ticks=ticks and c == 0,
        title="query" if c == 0 and r == grid_rows - 1 else None,
    )
    last_in_column = h + grid_cols >= heads
    style_axis(
        fig,
        "x",
        cols,
        tokens=key_tokens,
        row=r + 1,
        col=c + 1,
        show_ticks=ticks and last_in_column,
        title="key" if last_in_column and c == 0 else None,
    )
    return block


def head_grid(
    weights,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    *,
    mask=None,
    layer: int | None = None,
    columns: int | None = None,
    selected: int | None = None,
    title: str | None = None,
    theme: str = "screen",
) -> go.Figure:
    """Every head's weights (H, L, S) as small multiples sharing one 0..1 scale.

    Trace ``h`` (name "head h") holds head h's weights; masked cells are grey as in
    ``attention_heatmap``. ``selected``'s panel is outlined and its title coloured. Token ticks appear on the outer
    panels only, and only for short sequences.
    """
    weights = as_array("weights", weights, 3)
    heads, rows, cols = weights.shape
    if heads == 0:
        raise ValueError(f"weights has shape {weights.shape}: no heads")
    query_tokens = check_labels("query_tokens", query_tokens, rows, "weights", weights.shape)
    key_tokens = check_labels("key_tokens", key_tokens, cols, "weights", weights.shape)
    mask = as_mask("mask", mask, (rows, cols))
    grid_rows, grid_cols = grid_shape(heads, columns)
    titles = [panel_title(h) for h in range(heads)]
    spacing = (0.02 + 0.04 / grid_cols, min(0.12, 0.35 / grid_rows))
    layer_text = "" if layer is None else f"layer {layer}: "
    shape = f"({rows} queries × {cols} keys)"
    if max(rows, cols) <= GRID_DISPLAY_MAX:  # every cell exact: from plain dicts in one go
        layout = grid_layout(grid_rows, grid_cols, spacing, tuple(titles))
        traces = grid_traces(layout, weights, mask, grid_cols, query_tokens, key_tokens, GRID_TICKS_MAX)
        layout.update(
            title=dict(text=title if title is not None else f"{layer_text}all {heads} heads   {shape}"),
            coloraxis=colour_axis("sequential", title="weight", zmin=0.0, zmax=1.0),
            height=140 + PANEL_HEIGHT * grid_rows,
        )
        fig = themed_figure(traces, layout, theme, validate=False)
        return fig if selected is None else _marked(fig, selected)
    fig = make_subplots(
        rows=grid_rows,
        cols=grid_cols,
        subplot_titles=titles,
        horizontal_spacing=spacing[0],
        vertical_spacing=spacing[1],
    )
    block = 1
    for h in range(heads):
        block = _head_panel(fig, weights[h], h, (grid_rows, grid_cols, heads), mask, query_tokens, key_tokens)
    fig.update_layout(
        title_text=title
        if title is not None
        else f"{layer_text}all {heads} heads   {shape}"
        + (
            f"<br><sup>each cell: the mean of a {block}×{block} block (exact values: one head's views and CSV)</sup>"
            if block > 1
            else ""
        ),
        coloraxis=colour_axis("sequential", title="weight", zmin=0.0, zmax=1.0),
        height=140 + PANEL_HEIGHT * grid_rows,
    )
    fig = apply_theme(fig, theme)
    return fig if selected is None else _marked(fig, selected)


def _marked(fig: go.Figure, selected: int) -> go.Figure:
    """The grid with the chosen head marked as the page marks it (``viz.selection.grid_selection``; the two are
    compared head by head in tests/test_selection.py): its title coloured, its panel outlined."""
    fig.layout.annotations[selected].font.color = SELECTED_COLOUR
    fig.update_layout(shapes=[panel_outline(selected)])
    return fig


def head_overview(
    attentions,
    statistic: str = "entropy",
    *,
    selected: tuple[int, int] | None = None,
    show_values: bool | None = None,
    title: str | None = None,
    theme: str = "screen",
) -> go.Figure:
    """Layers (rows, top to bottom) × heads (columns), coloured by a statistic of each head.

    ``attentions`` is (layers, H, L, S); ``statistic`` a key of ``viz.stats.STATISTICS``.
    ``selected`` = (layer, head) is outlined. The trace "overview" holds the (layers, H) values.
    """
    values = overview_matrix(attentions, statistic)
    return statistic_overview(values, statistic, selected=selected, show_values=show_values, title=title, theme=theme)


def layer_head_spec(
    values: np.ndarray,
    *,
    name: str,
    value_name: str,
    value_format: str,
    head_title: str,
    selected: tuple[int, int] | None = None,
    show_values: bool | None = None,
) -> tuple[dict, dict]:
    """(``add_matrix`` / ``matrix_traces`` options, layout) of a (layers, H) layer x head map: integer ticks on both
    axes, ``selected`` = (layer, head) outlined. Shared by the statistic overview and the ablation map."""
    layers, heads = values.shape
    matrix = dict(
        row_name="layer",
        col_name="head",
        value_name=value_name,
        name=name,
        show_values=wants_values(values.shape, show_values) and heads <= 16,
        value_format=value_format,
        blocked_text="",
    )
    yaxis = axis_settings("y", layers, title="layer")
    xaxis = axis_settings("x", heads, title=head_title)
    xaxis.update(tickmode="array", tickvals=list(range(heads)), ticktext=[str(h) for h in range(heads)])
    if layers <= 40:
        yaxis.update(tickmode="array", tickvals=list(range(layers)), ticktext=[str(i) for i in range(layers)])
    layout = dict(yaxis=yaxis, xaxis=xaxis)
    if selected is not None:
        layout["shapes"] = [selected_cell(*selected)]
    return matrix, layout


def layer_head_map(values: np.ndarray, **options) -> go.Figure:
    """``layer_head_spec`` as a figure the caller goes on styling (colours, title, theme): the ablation map."""
    matrix, layout = layer_head_spec(values, **options)
    fig = go.Figure()
    add_matrix(fig, values, **matrix)
    fig.update_layout(layout)
    return fig


def statistic_overview(
    values,
    statistic: str,
    *,
    selected: tuple[int, int] | None = None,
    show_values: bool | None = None,
    title: str | None = None,
    theme: str = "screen",
) -> go.Figure:
    """The layer × head overview from precomputed values (layers, H) of ``statistic``."""
    if statistic not in STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; choose one of {tuple(STATISTICS)}")
    values = as_array("values", values, 2)
    layers = values.shape[0]
    axis = colour_axis(SEQUENTIAL_OTHER, title=SHORT_NAMES[statistic])
    axis["colorbar"]["title"]["side"] = "top"
    if statistic in {"max_weight", "previous_token", "first_token"}:
        axis.update(cmin=0.0, cmax=1.0)
    text = title if title is not None else f"Every head: {STATISTICS[statistic]}"
    height = min(1000, max(420, 160 + 34 * layers))
    matrix, layout = layer_head_spec(values, name="overview", value_name=STATISTICS[statistic], value_format=".2f",
                                     head_title="head", selected=selected, show_values=show_values)  # fmt: skip
    layout.update(title=dict(text=text), coloraxis=axis, height=height)
    return matrix_figure(values, matrix, layout, theme)  # from plain dicts in one go


def overview_values(attentions, statistic: str) -> np.ndarray:
    """(layers, H) values behind ``head_overview`` (re-exported for CSV)."""
    return overview_matrix(attentions, statistic)


def statistic_switch(
    values: dict[str, np.ndarray],
    start: str,
    *,
    selected: tuple[int, int] | None = None,
    show_values: bool | None = None,
    theme: str = "screen",
) -> go.Figure:
    """The layer × head overview carrying every statistic of ``values`` ({statistic: (layers, H)}), with a
    row of buttons above the chart that switches between them in the browser (no server run).

    Each statistic is ``statistic_overview``'s own heatmap (trace ``overview_<statistic>``) on its own colour
    axis (``coloraxis``, ``coloraxis2``, ... in ``STATISTICS`` order), so every colour range and colour-bar title
    stays what that overview shows. A button is one ``update``: which trace is visible, the title and which
    colour bar is shown. ``start`` is the statistic shown first.
    """
    names = [name for name in STATISTICS if name in values]
    if start not in names:
        raise ValueError(f"start {start!r} is not among the statistics given: {names}")
    panels = {
        name: statistic_overview(values[name], name, selected=selected, show_values=show_values, theme=theme)
        for name in names
    }
    fig = go.Figure(layout=panels[start].layout)
    titles, shown_by = [], []
    for k, name in enumerate(names, start=1):
        panel = panels[name]
        axis = _colour_axis_name(k)
        for trace in panel.data:
            fig.add_trace(trace.update(name=f"overview_{name}", coloraxis=axis, visible=name == start))
            shown_by.append(name)
        fig.layout[axis] = panel.layout.coloraxis.to_plotly_json() | dict(showscale=name == start)
        titles.append(panel.layout.title.text)
    buttons = [
        dict(
            label=SHORT_NAMES[name],
            method="update",
            args=[
                {"visible": [owner == name for owner in shown_by]},
                {"title.text": titles[k]}
                | {f"{_colour_axis_name(j)}.showscale": j == k + 1 for j in range(1, len(names) + 1)},
            ],
        )
        for k, name in enumerate(names)
    ]
    fig.update_layout(
        updatemenus=[
            dict(
                type="buttons",
                direction="right",
                buttons=buttons,
                active=names.index(start),
                showactive=True,
                x=0.0,
                xanchor="left",
                y=1.0,
                yanchor="bottom",
                pad=dict(b=6),
                bgcolor="#f4f4f4",
                font=dict(size=12),
            )
        ],
        margin=dict(t=(fig.layout.margin.t or 70) + 34),
    )
    return fig


def _colour_axis_name(k: int) -> str:
    """plotly's name of the k-th colour axis (k = 1 is plain ``coloraxis``)."""
    return "coloraxis" if k == 1 else f"coloraxis{k}"
