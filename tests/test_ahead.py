"""Which kept views the page draws ahead (ui/ahead.py ``pending``): pure, no page."""

from __future__ import annotations

from ui import ahead

KEPT = ("derivation", "compare", "heads", "query")


def test_the_kept_views_not_in_the_page_for_what_is_shown_in_their_order():
    drawn = {"derivation": "look-1", "heads": "look-1", "query": "look-0"}
    assert ahead.pending("derivation", KEPT, drawn, "look-1", 64) == ["compare", "query"]  # query is stale
    assert ahead.pending("heads", KEPT, {}, "look-1", 64) == ["derivation", "compare", "query"]
    assert ahead.pending("query", KEPT, dict.fromkeys(KEPT, "look-2"), "look-2", 64) == []


def test_none_for_a_view_that_is_not_kept_or_a_long_input():
    assert ahead.pending("pairs", KEPT, {}, "look", 16) == []  # opening a view not kept clears the kept ones
    assert ahead.pending("derivation", KEPT, {}, "look", ahead.UP_TO) == ["compare", "heads", "query"]
    assert ahead.pending("derivation", KEPT, {}, "look", ahead.UP_TO + 1) == []


def test_the_page_s_script_has_its_pauses_filled_in():
    script = ahead.script()
    assert "__IDLE_MS__" not in script and "__GAP_MS__" not in script
    assert f"const IDLE_MS = {ahead.IDLE_MS};" in script and f"const GAP_MS = {ahead.GAP_MS};" in script
