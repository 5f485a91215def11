"""ui/plotly_spec.py: a shared figure's JSON is made once and is byte for byte what plotly makes for it."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import plotly.io._json as plotly_json
import pytest
from streamlit.testing.v1 import AppTest

from ui import plotly_spec
from viz.scores import attention_heatmap


def plotly_own(fig: go.Figure) -> str:
    """plotly's JSON for the figure as st.plotly_chart makes it, through plotly's own function (not the wrapper)."""
    return plotly_json.to_json(fig.to_dict(), validate=False)


def small_figure(seed: int = 0) -> go.Figure:
    rng = np.random.default_rng(seed)
    weights = rng.random((5, 5)).astype(np.float32)
    return attention_heatmap(weights / weights.sum(-1, keepdims=True), list("abcde"), list("abcde"), title="<t>")


def test_the_wrapper_is_installed_and_other_calls_pass_through():
    assert plotly_spec.INSTALLED
    fig = small_figure()
    assert plotly_spec.to_json(fig.to_dict(), validate=False) == plotly_own(fig)  # a plain dict: plotly's path
    assert json.loads(plotly_spec.to_json(fig, pretty=True)) == json.loads(plotly_own(fig))


def test_every_figure_of_every_view_sends_plotly_s_own_json():
    from attention_core.pipeline import run_trace
    from attention_core.request import TraceRequest
    from viz.views import figures_for_trace

    trace = run_trace(TraceRequest(text="The cat sat on the mat."))  # the bundled MiniLM
    count = 0
    for view in ("derivation", "compare", "heads", "query"):
        for name, fig in plotly_spec.prepare(figures_for_trace(trace, view)).items():
            stand_in = plotly_spec.shown(fig)
            assert stand_in is plotly_spec.shown(fig), name  # made once, kept on the figure
            spec = stand_in.to_dict()
            assert spec.json == plotly_own(fig), (view, name)
            assert spec["layout"] == {k: fig.layout[k] for k in ("width", "height") if fig.layout[k] is not None}
            assert plotly_spec.json_bytes(fig) == len(spec.json)
            count += 1
    assert count > 10
    assert plotly_spec.json_bytes(small_figure()) == 0  # never shown: nothing kept


def test_a_figure_subclass_or_a_dict_is_passed_on_unchanged():
    class Other(go.Figure):
        pass

    other = Other(small_figure())
    assert plotly_spec.shown(other) is other
    plain = small_figure().to_dict()
    assert plotly_spec.shown(plain) is plain


def _page():
    import streamlit as st

    from tests.test_plotly_spec import small_figure
    from ui import plotly_spec

    fig = st.session_state.setdefault("fig", small_figure(3))  # one shared figure object across reruns
    st.plotly_chart(fig, key="plain", theme=None)
    st.plotly_chart(plotly_spec.shown(fig), key="kept", theme=None)


def test_streamlit_sends_the_same_spec_and_copies_nothing_on_a_rerun(monkeypatch):
    at = AppTest.from_function(_page).run()
    assert not at.exception
    plain, kept = (chart.proto.spec for chart in at.get("plotly_chart"))
    assert kept == plain and json.loads(kept)["layout"]["title"]["text"]

    calls = []
    original = go.Figure.to_dict
    monkeypatch.setattr(go.Figure, "to_dict", lambda self: calls.append(1) or original(self))
    at.run()
    assert not at.exception and len(calls) == 1  # only the plain chart copied its figure again
    plain, kept = (chart.proto.spec for chart in at.get("plotly_chart"))
    assert kept == plain


@pytest.mark.parametrize("kwargs", [{}, {"validate": True}, {"pretty": True, "validate": False}])
def test_only_st_plotly_chart_s_call_gets_the_kept_json(kwargs):
    fig = small_figure(1)
    spec = plotly_spec.shown(fig).to_dict()
    assert plotly_spec.to_json(spec, validate=False) == spec.json
    assert plotly_spec.to_json(spec, **kwargs) != spec.json  # anything else encodes the small dict itself
