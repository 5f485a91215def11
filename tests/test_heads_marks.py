"""Heads & layers keeps one set of figures for every head and marks the chosen head with an update (viz/selection.py).

In the app: a head change, or a change of the core's scaling, mask or encoding, builds no Heads & layers figure
(MiniLM's grid shows the model's own weights), and what each chart sends, read as the browser reads it (the packed
figure plus its update), is exactly the figure built the old way for that head."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.charts import figure
from ui import compute, prefetch
from viz.selection import panel_outline
from viz.views import figures_for_trace

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TEXT = "Marks are sent apart from the figure they mark."


def _heads_keys() -> set:
    return {key for key in compute.store()._entries if key[0] == "figures" and key[3] in ("heads", "lines")}


def _built_for(head: int) -> dict:
    """The view's figures built the old way, for this head, as plotly's JSON (the page's trace: the only one)."""
    (trace,) = [value for key, (value, _) in compute.store()._entries.items() if key[0] == "trace"]
    trace = compute.with_head(trace, head)
    figs = figures_for_trace(trace, "heads", show_values=None, statistic="entropy")
    figs.update(figures_for_trace(trace, "lines", head=head))
    return {name: json.loads(fig.to_json()) for name, fig in figs.items()}


@pytest.fixture()
def heads_page(monkeypatch):
    monkeypatch.setattr(prefetch, "NEIGHBOURS", 0)  # nothing built in the background: the counts are the page's
    compute.store().clear()
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state["text"] = TEXT
    at.session_state["view"] = "heads"
    at.run()
    assert not at.exception and not at.error
    return at


def test_a_head_change_builds_nothing_and_draws_that_head(heads_page):
    at = heads_page
    kept = _heads_keys()
    assert kept and all(key[2] is None for key in kept)  # kept for every head
    misses = compute.store().misses
    for head in (1, 5, 0):
        at.slider(key="head").set_value(head)
        at.run()
        assert not at.exception and not at.error
        assert _heads_keys() == kept and compute.store().misses == misses  # a store hit for every figure
        built = _built_for(head)
        assert figure(at, "fig_head_grid") == built["head_grid"]
        assert figure(at, "fig_head_flip") == built["head_flip"]
        assert figure(at, "fig_lines") == built["lines"]
        overview = figure(at, "fig_overview")
        (shape,) = overview["layout"]["shapes"]
        assert (shape["x0"], shape["y0"]) == (head - 0.5, at.session_state["layer"] - 0.5)
        grid = figure(at, "fig_head_grid")["layout"]
        coloured = [a["text"] for a in grid["annotations"][:12] if a.get("font", {}).get("color")]
        assert coloured == [f"head {head}"] and grid["shapes"] == [panel_outline(head)]


@pytest.mark.parametrize(("key", "value"), [("scaling", "none"), ("mask", "causal"), ("encoding", "none")])
def test_the_core_s_settings_leave_the_model_s_grid_as_it_was(heads_page, key, value):
    at = heads_page
    grid = figure(at, "fig_head_grid")
    before = {k for k in _heads_keys() if k[3] == "heads"}
    (at.radio if key == "scaling" else at.selectbox)(key=key).set_value(value)
    at.run()
    assert not at.exception and not at.error
    assert {k for k in _heads_keys() if k[3] == "heads"} == before  # nothing rebuilt: the model's weights
    assert figure(at, "fig_head_grid") == grid
