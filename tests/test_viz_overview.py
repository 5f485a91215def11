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
from viz.heatmaps import colour_axis
from viz.stats import SHORT_NAMES, STATISTICS
from viz.theme import SEQUENTIAL_OTHER, apply_theme


def as_json(fig) -> dict:
    return json.loads(pio.to_json(fig.to_dict(), validate=False))


def stepwise_overview(values, statistic, *, selected=None, show_values=None, title=None, theme="screen") -> go.Figure:
    values = np.asarray(values, dtype=np.float64)
    layers, heads = values.shape
    fig = layer_head_map(values, name="overview", value_name=STATISTICS[statistic], value_format=".2f",
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
