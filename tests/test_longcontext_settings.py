"""The pitfalls lab's long-context sections in the link: tab, tile size and step, KV-cache steps.

Round trip Settings -> URL -> Settings, out-of-range link values clamped with a notice, and the app
(AppTest) seeding its sliders from a link and writing a moved slider back into it.
"""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.charts import charts
from ui.settings import TILED_BLOCKS, UI_RANGES, VIEW_ONLY, Settings, from_query_params, to_query_params

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TEXT = "The cat sat on the mat because it was tired."  # 13 MiniLM tokens: 16 steps of 4 x 4 tiles
FIELDS = ("pitfall", "tiled_block", "tiled_step", "kv_steps", "kv_step")


def test_long_context_settings_round_trip_through_the_link():
    settings = Settings(view="pitfalls", pitfall="cost", tiled_block=8, tiled_step=3, kv_steps=4, kv_step=2)
    params = to_query_params(settings)
    assert {name: params[name] for name in FIELDS} == {
        "pitfall": "cost",
        "tiled_block": "8",
        "tiled_step": "3",
        "kv_steps": "4",
        "kv_step": "2",
    }
    back, notices = from_query_params(params)
    assert back == settings and not notices
    assert set(FIELDS) <= set(VIEW_ONLY)  # they only choose what to look at: the trace is not recomputed
    assert settings.request() == Settings().request()
    assert not set(FIELDS) & set(to_query_params(Settings()))  # defaults stay out of the link


def test_out_of_range_link_values_are_clamped_with_a_notice():
    back, notices = from_query_params(
        {"tiled_block": "1000", "tiled_step": "-4", "kv_steps": "99", "kv_step": "40", "pitfall": "speed"}
    )
    assert back.tiled_block == TILED_BLOCKS[-1] and back.tiled_step == 0
    assert back.kv_steps == UI_RANGES["kv_steps"][1] and back.kv_step == UI_RANGES["kv_step"][1]
    assert back.pitfall == Settings().pitfall
    assert len(notices) == 5
    for name in FIELDS:
        assert any(f"'{name}'" in notice for notice in notices), name
    between, notices = from_query_params({"tiled_block": "12"})  # within 4..64 but not a tile size offered
    assert between.tiled_block == 8 and len(notices) == 1 and "not one of 4, 8, 16, 32, 64" in notices[0]


def _figure_titles(at) -> list[str]:
    return [chart.title for chart in charts(at)]


def test_the_app_opens_the_link_and_writes_a_moved_slider_back():
    at = AppTest.from_file(APP, default_timeout=240)
    at.query_params.update({"text": TEXT, "view": "pitfalls", "pitfall": "cost", "tiled_block": "4", "tiled_step": "3"})
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.radio(key="pitfall").value == "cost"
    assert at.select_slider(key="tiled_block").value == 4 and at.slider(key="tiled_step").value == 3
    assert any("4×4 tiles: step 3 of" in title for title in _figure_titles(at))
    at.slider(key="tiled_step").set_value(7)
    at.run()
    assert not at.exception and not at.error
    assert any("4×4 tiles: step 7 of" in title for title in _figure_titles(at))
    assert at.query_params["tiled_step"] in ("7", ["7"]) and at.query_params["pitfall"] in ("cost", ["cost"])


def test_an_out_of_range_link_is_clamped_with_a_notice_and_the_view_works():
    at = AppTest.from_file(APP, default_timeout=240)
    at.query_params.update(
        {"text": TEXT, "view": "pitfalls", "pitfall": "cost", "tiled_block": "1000", "tiled_step": "9999"}
    )
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    fixed = " ".join(w.value for w in at.warning if "Link setting fixed" in w.value).replace("\\", "")  # unescaped
    assert "'tiled_block' = 1000" in fixed and "'tiled_step' = 9999" in fixed
    assert at.select_slider(key="tiled_block").value == 64  # one 64 x 64 tile holds these 13 tokens
    assert any("One tile holds the whole matrix" in c.value for c in at.caption)


def test_kv_cache_steps_come_from_the_link_and_go_back_into_it():
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update(
        {
            "text": "The capital of France is",
            "model": "smollm2",
            "view": "pitfalls",
            "pitfall": "cost",
            "kv_steps": "3",
            "kv_step": "2",
        }
    )
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.slider(key="kv_steps").value == 3
    at.button(key="kv_go").click()
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.slider(key="kv_step").value == 2
    assert any("Step 2: " in c.value for c in at.caption)
    at.slider(key="kv_step").set_value(3)
    at.run()
    assert not at.exception and not at.error
    assert any("Step 3: " in c.value for c in at.caption)
    assert at.query_params["kv_step"] in ("3", ["3"]) and at.query_params["kv_steps"] in ("3", ["3"])
