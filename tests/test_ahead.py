"""Which views take part in drawing ahead (ui/ahead.py ``eligible``): pure, no page."""

from __future__ import annotations

from ui import ahead, yielding

KEPT = ("derivation", "compare", "heads", "query")


def test_on_by_default_up_to_256_tokens_and_a_host_may_turn_it_off(monkeypatch):
    assert ahead.UP_TO == 256 and ahead.eligible("derivation", "heads", KEPT, 64)
    monkeypatch.setattr(ahead, "UP_TO", 0)  # ATTENTION_LENS_AHEAD_UP_TO=0
    assert not ahead.eligible("derivation", "heads", KEPT, 1)


def test_kept_views_take_part_up_to_a_length_and_only_while_a_kept_view_is_shown(monkeypatch):
    monkeypatch.setattr(ahead, "UP_TO", 256)
    assert all(ahead.eligible(shown, view, KEPT, 64) for shown in KEPT for view in KEPT)
    assert not ahead.eligible("pairs", "derivation", KEPT, 16)  # opening a view not kept clears the kept ones
    assert not ahead.eligible("derivation", "pairs", KEPT, 16)
    assert ahead.eligible("derivation", "heads", KEPT, ahead.UP_TO)
    assert not ahead.eligible("derivation", "heads", KEPT, ahead.UP_TO + 1)  # a view there costs seconds


def test_the_page_s_script_has_its_pauses_filled_in():
    script = ahead.script()
    assert "__" not in script.replace("__lensAhead", "")
    for name in ("IDLE_MS", "GAP_MS", "BUSY_MS"):
        assert f"const {name} = {getattr(ahead, name)};" in script


def test_one_view_is_drawn_ahead_at_a_time_in_the_server_and_a_turn_not_given_back_lapses(monkeypatch):
    assert ahead.claim("a") and ahead.claim("a")  # its own turn, again
    assert not ahead.claim("b")  # another session waits
    ahead.release("b")  # not b's to give back
    assert not ahead.claim("b")
    ahead.release("a")
    assert ahead.claim("b")
    now = [ahead.time.monotonic()]
    monkeypatch.setattr(ahead.time, "monotonic", lambda: now[0])
    assert ahead.claim("b") and not ahead.claim("c")
    now[0] += ahead.CLAIM_S + 0.1  # b's run never came
    assert ahead.claim("c")
    ahead.release("c")


def test_the_css_hides_every_descendant_too():
    css = ahead.hiding_css([".a", ".b"])
    assert css.startswith(".a, .b {") and ahead.HIDDEN_STYLE in css
    assert ".a *, .b * {visibility: hidden !important}" in css
    assert ahead.hiding_css([]) == ""


def test_the_view_css_hides_every_box_but_the_one_the_page_names_and_the_server_s_choice_before():
    from ui import switch

    css = switch.css(("a", "b", "c"), ".box-", "b")
    selectors, style = css.split(" {", 1)
    assert style == f"{ahead.HIDDEN_STYLE}}}"
    assert selectors.split(", ") == [
        'body[data-lens-view]:not([data-lens-view="a"]) .box-a',  # hidden whenever the page names another view
        'body[data-lens-view]:not([data-lens-view="b"]) .box-b',
        'body[data-lens-view]:not([data-lens-view="c"]) .box-c',
        "body:not([data-lens-view]) .box-a",  # before the page has named one: the server's choice (b) shown
        "body:not([data-lens-view]) .box-c",
    ]


def test_a_view_drawn_ahead_yields_to_a_click_that_came_meanwhile_and_only_it(monkeypatch):
    """``yield_to_click`` (called by every chart drawn, ui/chart.py): in a run drawing a view ahead, a waiting rerun
    request (a click) stops it; with no request, or in any other run (a click's own), it does nothing."""
    import types

    import pytest
    from streamlit.runtime.scriptrunner_utils.script_requests import ScriptRequests

    requests = ScriptRequests()
    monkeypatch.setattr(yielding, "get_script_run_ctx", lambda: types.SimpleNamespace(script_requests=requests))
    with yielding.drawing():
        yielding.yield_to_click()  # nothing waits
    from streamlit.runtime.scriptrunner_utils.script_requests import RerunData

    assert requests.request_rerun(RerunData(fragment_id_queue=["a click's fragment"]))
    assert yielding.click_waiting()
    yielding.yield_to_click()  # not a view drawn ahead: the click's own run, or the view shown, goes on
    with yielding.drawing(False):
        yielding.yield_to_click()
    with pytest.raises(yielding.Yielded), yielding.drawing():
        yielding.yield_to_click()
    assert not isinstance(yielding.Yielded(), Exception)  # the views' guard (an except Exception) lets it through
    yielding.yield_to_click()  # the mark is gone once the drawing ended
