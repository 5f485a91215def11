"""The training-lab tab under Streamlit's AppTest: it trains, draws, and says what it measured."""

from __future__ import annotations

import base64

import numpy as np
from streamlit.testing.v1 import AppTest

from tests.charts import charts
from ui import training_lab


def _lab_page() -> None:
    from ui.training_lab import render_training_lab

    render_training_lab()


def _chart_titles(at: AppTest) -> list[str]:
    return [chart.title for chart in charts(at)]


def _values(array) -> np.ndarray:
    """A plotly JSON array: a list, or plotly 7's typed {"dtype", "bdata"} encoding."""
    if isinstance(array, dict):
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"])
    return np.asarray(array)


def test_lab_renders_before_training():
    at = AppTest.from_function(_lab_page, default_timeout=60).run()
    assert not at.exception
    keys = {w.key for w in (*at.slider, *at.select_slider, *at.toggle, *at.number_input, *at.button, *at.radio)}
    assert keys and all(key.startswith("lab_") for key in keys), keys
    assert all(w.help for w in (*at.slider, *at.select_slider, *at.toggle, *at.number_input, *at.radio))
    assert [c.id.rsplit("-", 1)[-1] for c in charts(at)] == ["lab_recurrence"]  # drawn at once (paths, no timing)
    assert not at.get("plotly_chart")  # the views' own chart (ui/chart.py), not Streamlit's and its plotly.js
    assert [m.value for m in at.metric] == ["1", "1", "512", "511"]


def test_train_button_trains_both_variants_and_draws_the_verdict():
    at = AppTest.from_function(_lab_page, default_timeout=60).run()
    at.slider(key="lab_steps").set_value(50)
    at.select_slider(key="lab_d_k").set_value(64)
    at.button(key="lab_train").click().run()
    assert not at.exception
    titles = _chart_titles(at)
    assert any("Training one attention layer" in t for t in titles)
    assert any("Where the queries look" in t for t in titles)
    assert [c.id.rsplit("-", 1)[-1] for c in charts(at)] == ["lab_curves", "lab_probes", "lab_recurrence"]
    assert not at.get("plotly_chart")
    curves = charts(at)[0].figure
    assert {trace["legendgroup"] for trace in curves["data"]} == {"scaled", "unscaled"}
    np.testing.assert_array_equal(_values(curves["data"][0]["x"]), np.arange(1, 51))
    verdicts = [e.value for e in (*at.success, *at.info, *at.warning)]
    assert any("loss" in v for v in verdicts), verdicts
    progress = at.get("progress")[0].proto
    assert progress.value == 100 and "step 50 of 50" in progress.text

    # a rerun (any widget) keeps the finished run on screen and notes when settings changed
    at.select_slider(key="lab_d_k").set_value(128).run()
    assert not at.exception
    assert any("Training one attention layer" in t for t in _chart_titles(at))
    assert any("previous settings" in c.value for c in at.caption)


def test_one_variant_and_stop_button():
    at = AppTest.from_function(_lab_page, default_timeout=60).run()
    at.slider(key="lab_steps").set_value(50)
    at.select_slider(key="lab_d_k").set_value(8)
    at.toggle(key="lab_unscaled").set_value(False)
    at.button(key="lab_train").click().run()
    assert not at.exception
    assert any("Only the scaled variant" in e.value for e in at.info)
    at.button(key="lab_stop").click().run()
    assert not at.exception
    assert any("Training one attention layer" in t for t in _chart_titles(at))


def test_measure_button_adds_timings(monkeypatch):
    monkeypatch.setattr(training_lab, "TIMING_NS", (8, 16))  # the page's own sizes take seconds
    at = AppTest.from_function(_lab_page, default_timeout=60).run()
    at.button(key="lab_measure").click().run()
    assert not at.exception
    figure = charts(at)[-1].figure
    names = {trace["name"] for trace in figure["data"]}
    assert {"torch.nn.RNN", "torch.nn.GRU", "attention, this core"} <= names
    assert any("fastest" in c.value for c in at.caption)
