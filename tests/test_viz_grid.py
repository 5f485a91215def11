"""viz.heads.head_grid: the grid built from plain dicts in one go is the figure the step-by-step path built
(make_subplots, add_matrix and style_axis per panel, update_layout, apply_theme; kept here as the reference),
compared as plotly's JSON."""

from __future__ import annotations

import json

import numpy as np
import plotly.io as pio
import pytest
from plotly.subplots import make_subplots

from viz.checks import as_array, as_mask, check_labels
from viz.heads import GRID_DISPLAY_MAX, _head_panel, grid_shape, head_grid
from viz.heatmaps import colour_axis
from viz.selection import grid_selection, panel_title
from viz.theme import apply_theme


def as_json(fig) -> dict:
    return json.loads(pio.to_json(fig.to_dict(), validate=False))


def stepwise_grid(weights, query_tokens, key_tokens, *, mask=None, layer=None, columns=None, selected=None,
                  title=None, theme="screen"):  # fmt: skip
    weights = as_array("weights", weights, 3)
    heads, rows, cols = weights.shape
    query_tokens = check_labels("query_tokens", query_tokens, rows, "weights", weights.shape)
    key_tokens = check_labels("key_tokens", key_tokens, cols, "weights", weights.shape)
    mask = as_mask("mask", mask, (rows, cols))
    grid_rows, grid_cols = grid_shape(heads, columns)
    fig = make_subplots(rows=grid_rows, cols=grid_cols, subplot_titles=[panel_title(h) for h in range(heads)],
                        horizontal_spacing=0.02 + 0.04 / grid_cols, vertical_spacing=min(0.12, 0.35 / grid_rows))  # fmt: skip
    for h in range(heads):
        _head_panel(fig, weights[h], h, (grid_rows, grid_cols, heads), mask, query_tokens, key_tokens)
    layer_text = "" if layer is None else f"layer {layer}: "
    fig.update_layout(
        title_text=title if title is not None else f"{layer_text}all {heads} heads   ({rows} queries × {cols} keys)",
        coloraxis=colour_axis("sequential", title="weight", zmin=0.0, zmax=1.0),
        height=140 + 230 * grid_rows,
    )
    fig = apply_theme(fig, theme)
    if selected is not None:
        fig.plotly_update(relayout_data=grid_selection(heads, selected)[1])
    return fig


def _case(heads: int, n: int, causal: bool, seed: int):
    rng = np.random.default_rng(seed)
    w = rng.random((heads, n, n))
    mask = np.tril(np.ones((n, n), bool)) if causal else None
    if causal:
        w = np.where(mask, w, 0.0)
    w = w / w.sum(-1, keepdims=True)
    tokens = [f"t{i}" if i % 3 else f"<{i}>" for i in range(n)]
    return w, tokens, mask


@pytest.mark.parametrize(("heads", "n"), [(1, 1), (1, 5), (4, 12), (12, 13), (9, 40), (12, GRID_DISPLAY_MAX)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("theme", ["screen", "slides"])
def test_the_grid_equals_the_step_by_step_figure(heads, n, causal, theme):
    w, tokens, mask = _case(heads, n, causal, heads * n)
    for options in (dict(), dict(layer=3, selected=heads - 1), dict(title="T", columns=2)):
        fast = head_grid(w, tokens, tokens, mask=mask, theme=theme, **options)
        assert as_json(fast) == as_json(stepwise_grid(w, tokens, tokens, mask=mask, theme=theme, **options))


def test_each_grid_gets_its_own_layout_copy():
    w, tokens, _ = _case(4, 6, False, 1)
    first = head_grid(w, tokens, tokens, layer=0)
    first.layout.xaxis.title.text = "changed"
    assert head_grid(w, tokens, tokens, layer=0).layout.xaxis.title.text != "changed"
