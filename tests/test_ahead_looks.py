"""ui/ahead.py ``NOT_SHOWN`` and ``look``: a view kept in the page, hidden, is left as drawn when a view-only setting
its look leaves out changes. That is right only if the setting changes nothing the view draws: here each such
setting is changed in turn (AppTest, the bundled MiniLM, a short text) and the view's charts, components and texts
are compared with what it drew before. Settings in a view's look change what it draws (the comparison can fail)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests import charts
from ui import ahead
from ui.settings import STATISTICS, VIEW_ONLY

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TEXT = "The cat sat on the mat because it was tired."
KEPT = ("derivation", "compare", "heads", "query")  # app.py KEPT_VIEWS
CHANGED = {  # a value other than the default, as the widget (session state) holds it
    "head": 3,
    "query": 5,
    "query_set": [1, 3],
    "statistic": STATISTICS[1],
    "hide_special": True,
    "words": True,
    "fixed_range": False,
    "pair_text": "The dog slept on the rug because it was cold.",
}
SHOWN = {
    "derivation": "query",
    "compare": "head",
    "heads": "statistic",
    "query": "query",
}  # in the look: a change shows


def _drawn(at: AppTest) -> list:
    """What the page draws besides its widgets and the asker (whose look and wants name the settings): every
    chart's figure, every other component's data, every text."""
    ok(at)
    out = [("chart", chart.id.rsplit("-", 1)[-1], chart.spec) for chart in charts.charts(at)]
    for element in at.get("bidi_component"):
        name = element.proto.component_name
        if name.endswith(charts.LENS_CHARTS) or "lens_ahead" in name:
            continue
        out.append((name, element.proto.bytes.hex() if element.proto.bytes else json.dumps(element.proto.json)))
    for kind in ("title", "header", "subheader", "markdown", "caption", "latex", "success", "info", "warning", "error"):
        out += [(kind, str(element.value)) for element in at.get(kind)]
    return out


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def _page(view: str, **settings) -> list:
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state["text"] = TEXT
    at.session_state["view"] = view
    for name, value in settings.items():
        at.session_state[name] = value
    return _drawn(at.run())


def test_what_a_look_leaves_out_are_view_only_settings_of_kept_views():
    assert set(ahead.NOT_SHOWN) == set(KEPT)
    for view, names in ahead.NOT_SHOWN.items():
        assert set(names) <= set(VIEW_ONLY) - {"view"} and set(names) <= set(CHANGED), view
        assert SHOWN[view] not in names
    values = {"head": 0, "query": 2, "statistic": STATISTICS[0], "view": "heads"}
    assert ahead.look(7, values, "compare") == ahead.look(7, {**values, "query": 4, "view": "query"}, "compare")
    assert ahead.look(7, values, "query") != ahead.look(7, {**values, "query": 4}, "query")
    assert ahead.look(7, values, "compare") != ahead.look(8, values, "compare")  # a new run of the numbers
    assert ahead.look(7, values, "heads").startswith("7|")  # the page reads the run first (ahead.js runOf)
    every = ahead.look(7, values, None)  # every view-only setting but the view: what the slides buttons record
    assert every != ahead.look(7, {**values, "statistic": STATISTICS[1]}, None)
    assert every == ahead.look(7, {**values, "view": "query"}, None)


@pytest.mark.parametrize("view", KEPT)
def test_a_setting_a_view_s_look_leaves_out_changes_nothing_it_draws(view):
    before = _page(view)
    assert any(kind == "chart" for kind, *_ in before), before  # the view is drawn
    for name in ahead.NOT_SHOWN[view]:
        assert _page(view, **{name: CHANGED[name]}) == before, (view, name)
    assert _page(view, **{SHOWN[view]: CHANGED[SHOWN[view]]}) != before  # what it shows does change it
