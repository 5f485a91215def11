"""viz.heads.statistic_overview (and the statistic switch built from it): from plain dicts in one go, the figures
the step-by-step path built (layer_head_map, update_layout, apply_theme; kept here as the reference), as JSON."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from viz import heads as heads_module
from viz.heads import layer_head_map, statistic_overview, statistic_switch
from viz.heatmaps import add_matrix, colour_axis, style_axis, wants_values
from viz.selection import selected_cell
from viz.stats import SHORT_NAMES, STATISTICS
from viz.theme import SEQUENTIAL_OTHER, apply_theme


def as_json(fig) -> dict:
    return json.loads(pio.to_json(fig.to_dict(), validate=False))


def stepwise_layer_head_map(values, *, name, value_name, value_format, head_title, selected=None, show_values=None):
    """The layer x head map as it was built before, step by step on a figure."""
    layers, heads = values.shape
    fig = go.Figure()
    add_matrix(fig, values, row_name="layer", col_name="head", value_name=value_name, name=name,
               show_values=wants_values(values.shape, show_values) and heads <= 16, value_format=value_format,
               blocked_text="")  # fmt: skip
    style_axis(fig, "y", layers, title="layer")
    style_axis(fig, "x", heads, title=head_title)
    fig.update_xaxes(tickmode="array", tickvals=list(range(heads)), ticktext=[str(h) for h in range(heads)])
    if layers <= 40:
        fig.update_yaxes(tickmode="array", tickvals=list(range(layers)), ticktext=[str(i) for i in range(layers)])
    if selected is not None:
        fig.add_shape(**selected_cell(*selected))
    return fig


def stepwise_overview(values, statistic, *, selected=None, show_values=None, title=None, theme="screen") -> go.Figure:
    values = np.asarray(values, dtype=np.float64)
    layers, heads = values.shape
    fig = stepwise_layer_head_map(values, name="overview", value_name=STATISTICS[statistic], value_format=".2f",
                         head_title="head", selected=selected, show_values=show_values)  # fmt: skip
    axis = colour_axis(SEQUENTIAL_OTHER, title=SHORT_NAMES[statistic])
    axis["colorbar"].update(title_side="top")
    if statistic in {"max_weight", "previous_token", "first_token"}:
        axis.update(cmin=0.0, cmax=1.0)
    fig.update_layout(title_text=title if title is not None else f"Every head: {STATISTICS[statistic]}",
                      coloraxis=axis, height=min(1000, max(420, 160 + 34 * layers)))  # fmt: skip
    return apply_theme(fig, theme)


SHAPES = [(1, 1), (6, 12), (30, 9), (48, 17)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("statistic", list(STATISTICS))
@pytest.mark.parametrize("theme", ["screen", "slides"])
def test_each_overview_equals_the_step_by_step_figure(shape, statistic, theme):
    values = np.random.default_rng(sum(shape)).random(shape)
    for options in (dict(), dict(selected=(0, shape[1] - 1), show_values=True, title="T"), dict(show_values=False)):
        fast = statistic_overview(values, statistic, theme=theme, **options)
        assert as_json(fast) == as_json(stepwise_overview(values, statistic, theme=theme, **options))


@pytest.mark.parametrize("shape", SHAPES[:3])
def test_the_switch_equals_the_switch_built_on_step_by_step_overviews(shape, monkeypatch):
    values = {name: np.random.default_rng(k).random(shape) for k, name in enumerate(STATISTICS)}
    fast = statistic_switch(values, "distance", selected=(0, 0))
    monkeypatch.setattr(heads_module, "statistic_overview", stepwise_overview)
    assert as_json(fast) == as_json(statistic_switch(values, "distance", selected=(0, 0)))


@pytest.mark.parametrize("shape", SHAPES)
def test_the_ablation_maps_builder_equals_the_step_by_step_figure(shape):
    """``layer_head_map`` (the ablation map goes on styling it) now takes its axes and outline from
    ``layer_head_spec``: the same figure as before."""
    values = np.random.default_rng(len(shape)).standard_normal(shape)
    for options in (dict(), dict(selected=(shape[0] - 1, 0), show_values=True)):
        common = dict(name="ablation", value_name="effect", value_format=".2g", head_title="head switched off")
        assert as_json(layer_head_map(values, **common, **options)) == as_json(
            stepwise_layer_head_map(values, **common, **options)
        )
