"""The head grid's figure as plain dicts: ``make_subplots``'s layout (made once per grid shape) and every head's
``matrix_traces`` on its own subplot's axes. ``viz.heads.head_grid`` builds the figure from them in one go when every
cell is shown; through make_subplots, add_trace and update_xaxes per panel a 12-head grid took about 125 ms at
16 tokens. tests/test_viz_grid.py compares the JSON with the step-by-step figure."""

from __future__ import annotations

import json
from functools import lru_cache

import numpy as np
from plotly.subplots import make_subplots

from .heatmaps import axis_settings
from .matrix_traces import matrix_traces
from .theme import merge


@lru_cache(maxsize=32)
def _subplots_layout(grid_rows: int, grid_cols: int, spacing: tuple[float, float], titles: tuple[str, ...]) -> str:
    """``make_subplots``'s layout (axis domains and anchors, the panel titles) as JSON, made once per grid."""
    fig = make_subplots(
        rows=grid_rows,
        cols=grid_cols,
        subplot_titles=list(titles),
        horizontal_spacing=spacing[0],
        vertical_spacing=spacing[1],
    )
    layout = fig.layout.to_plotly_json()
    layout.pop("template", None)  # the theme's template is set by themed_figure
    return json.dumps(layout)


def grid_layout(grid_rows: int, grid_cols: int, spacing: tuple[float, float], titles: tuple[str, ...]) -> dict:
    return json.loads(_subplots_layout(grid_rows, grid_cols, spacing, titles))  # a fresh copy for each figure


def grid_traces(
    layout: dict, weights: np.ndarray, mask, grid_cols: int, query_tokens, key_tokens, ticks_max: int
) -> list:
    """Every head's traces (``matrix_traces``, on its own subplot's axes) and each panel's axes set in ``layout``,
    as ``viz.heads._head_panel`` draws a head whose cells are all shown (token ticks up to ``ticks_max``)."""
    heads, rows, cols = weights.shape
    grid_rows = -(-heads // grid_cols)
    ticks = max(rows, cols) <= ticks_max
    traces: list = []
    for h in range(heads):
        r, c = divmod(h, grid_cols)
        k = "" if h == 0 else str(r * grid_cols + c + 1)  # plotly's subplot number: x, x2, x3, ...
        panel, _ = matrix_traces(weights[h], mask=mask, row_tokens=query_tokens, col_tokens=key_tokens,
                                 value_name="weight", name=f"head {h}", blocked_text="0")  # fmt: skip
        for trace in panel:
            trace = trace if isinstance(trace, dict) else trace.to_plotly_json()
            traces.append({**trace, "xaxis": f"x{k}", "yaxis": f"y{k}"})
        last_in_column = h + grid_cols >= heads
        y_axis = axis_settings("y", rows, tokens=query_tokens, show_ticks=ticks and c == 0,
                               title="query" if c == 0 and r == grid_rows - 1 else None)  # fmt: skip
        x_axis = axis_settings("x", cols, tokens=key_tokens, show_ticks=ticks and last_in_column,
                               title="key" if last_in_column and c == 0 else None)  # fmt: skip
        merge(layout.setdefault(f"yaxis{k}", {}), y_axis)
        merge(layout.setdefault(f"xaxis{k}", {}), x_axis)
    return traces
