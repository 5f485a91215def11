"""A recompute control reruns the numbers panel only, as a browser asks (app.py ``numbers_panel``).

A websocket client that speaks Streamlit's protocol (benchmarks/load_protocol.py) opens the app on a
real server and changes controls the way a browser does: a widget drawn by a fragment sends that
fragment's id with its change. Checked on the server's answer:
- every recompute control (scaling, mask, fill, encoding, layer) is drawn by a fragment, and its change
  reruns that fragment: the text and model controls (drawn by the whole script) are not sent again,
  the new value is taken (the page's link says it) and no error box appears; two changes in one message both
  hold;
- Max tokens decides the capture, which the whole script computes: its change is answered with a
  whole-script run (the text area is sent again) whose link carries the new count;
- Head is drawn by the panel and reruns the view shown alone (its callback names that view's fragment): the
  scaling radio and the head slider are not sent again, the view's charts are;
- a view switch keeps the view left in the page (hidden): switching back to it, with nothing changed, sends
  no chart at all (only the view control's own fragment runs); after a head change it is drawn again; a view
  that is not kept (Minimal pairs) clears the kept ones, so the derivation is drawn again after it.
About 20 s (the bundled MiniLM loads once).
"""

from __future__ import annotations

import asyncio
import urllib.parse

import pytest

from benchmarks.appserver import app_server
from benchmarks.load_protocol import Client, next_value, query_string, widget_state
from ui.settings import VIEW_LABELS
from ui.sidebar import ENCODING_LABELS, MASK_LABELS, SCALING_LABELS, SOURCE_LABELS

pytestmark = pytest.mark.slow

CHART = "bidi_component:attention_lens_chart"  # the app's charts (ui/chart.py), the clickable one too


def charts(run) -> int:
    return run.kinds[CHART] + run.kinds[CHART + "_click"]


TEXT = "The cat sat on the mat because it was tired."
RECOMPUTE = {  # label -> (the link's name for it, the option names by their labels)
    "Divide the scores by": ("scaling", SCALING_LABELS),
    "Mask": ("mask", MASK_LABELS),
    "Fill for blocked scores": ("fill", None),  # its options are their own names
    "Positional encoding (own core)": ("encoding", ENCODING_LABELS),
    "Layer": ("layer", None),
}


def _link(run) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(run.query_string or ""))


def test_recompute_controls_rerun_the_numbers_panel_and_max_tokens_the_whole_script(tmp_path):
    async def scenario(server) -> None:
        client = Client(server.ws_url, query_string(TEXT), 120.0)
        await client.connect()
        run, _ = await client.run()
        assert not run.errors and run.finished == "FINISHED_SUCCESSFULLY", run.errors
        assert run.widgets["Text"].fragment_id == ""  # drawn by the whole script
        for label, (param, names) in RECOMPUTE.items():
            widget = client.widgets[label]
            assert widget.fragment_id, f"{label} is not drawn by a fragment"
            run, _, value = await client.change(label, "next")
            assert run is not None and not run.errors, (label, run and run.errors)
            assert run.finished == "FINISHED_FRAGMENT_RUN_SUCCESSFULLY", (label, run.finished)
            assert "Text" not in run.widgets, f"{label} reran the whole script"
            assert "Head" in run.widgets  # the panel was drawn again (the head slider is its)
            shown = value[0] if isinstance(value, list) else value
            said = _link(run).get(param)
            if label == "Layer":
                assert said is not None and int(said) == int(shown)
            else:
                name = shown if names is None else {v: k for k, v in names.items()}[shown]
                assert said == name, (label, shown, run.query_string)

        run, _, head = await client.change("Head", "next")  # view-only: the view shown alone
        assert run is not None and not run.errors and run.finished == "FINISHED_FRAGMENT_RUN_SUCCESSFULLY"
        assert "Head" not in run.widgets and "Divide the scores by" not in run.widgets
        assert charts(run) > 0 and _link(run)["head"] == str(int(head[0] if isinstance(head, list) else head))

        async def switch(view: str):
            run, _, _ = await client.change("View", (VIEW_LABELS[view],))
            assert run is not None and not run.errors, run and run.errors
            assert run.finished == "FINISHED_FRAGMENT_RUN_SUCCESSFULLY" and "Head" not in run.widgets
            assert _link(run).get("view", "derivation") == view, (view, run.query_string)
            return run

        assert charts(await switch("heads")) > 0  # first visit: drawn
        assert charts(await switch("derivation")) == 0  # kept in the page and current: shown, not sent
        assert charts(await switch("heads")) == 0
        run, _, _ = await client.change("Head", "next")  # redraws Heads only; the derivation is now stale
        assert run is not None and not run.errors and charts(run) > 0
        assert charts(await switch("derivation")) > 0  # drawn again for the new head
        await switch("pairs")  # not kept: the kept views are cleared
        assert charts(await switch("derivation")) > 0

        # two changes in one message (a person quicker than the server): both values hold
        source, fill = client.widgets["Source of X and weights"], client.widgets["Fill for blocked scores"]
        new_fill = next_value(fill, "next")  # the one it does not show now
        states = [widget_state(source, next_value(source, (SOURCE_LABELS["scratch"],))), widget_state(fill, new_fill)]
        run, _ = await client.run(states, fill.fragment_id)
        assert not run.errors and run.finished == "FINISHED_FRAGMENT_RUN_SUCCESSFULLY", (run.errors, run.finished)
        assert _link(run)["source"] == "scratch" and _link(run).get("fill", "-inf") == new_fill, run.query_string
        assert "d_model" in run.widgets  # the controls were drawn again: the scratch sizes are there

        tokens = client.widgets["Max tokens"]
        assert tokens.fragment_id  # drawn by the panel, yet it decides the capture
        run, _ = await client.run([widget_state(tokens, 8.0)], tokens.fragment_id)
        assert not run.errors, run.errors
        assert run.finished == "FINISHED_SUCCESSFULLY", run.finished
        assert "Text" in run.widgets, "a new Max tokens did not rerun the whole script"
        assert _link(run)["max_tokens"] == "8"
        await client.close()

    with app_server(log_dir=tmp_path) as server:
        asyncio.run(scenario(server))


AHEAD = "attention_lens_ahead"  # the page's asker (ui/ahead.py)


def _asker(run):
    found = [value for name, value in run.components.items() if name.endswith(AHEAD)]
    return found[0] if found else None


def test_the_page_s_ask_draws_the_kept_views_ahead_one_at_a_time_and_a_switch_then_sends_nothing(tmp_path):
    """What the page does after a pause (ui/ahead.py): each ask draws the first kept view that is not in the page
    for what is shown (hidden, the view control unchanged) and tells the page what is left; with nothing left an
    ask draws nothing; a switch to a view drawn ahead sends no chart; a head change makes them stale again."""

    async def scenario(server) -> None:
        from benchmarks.load_protocol import trigger_state

        client = Client(server.ws_url, query_string(TEXT), 120.0)
        await client.connect()
        run, _ = await client.run()
        assert not run.errors, run.errors
        component_id, fragment_id, data = _asker(run)
        assert fragment_id and data == {"pending": ["compare", "heads", "query"], "answered": 0}

        async def ask(asks: int, shown: str = "derivation"):
            run, _ = await client.run([trigger_state(component_id, "ask", asks)], fragment_id)
            assert not run.errors and run.finished == "FINISHED_FRAGMENT_RUN_SUCCESSFULLY", (run.errors, run.finished)
            assert _link(run).get("view", "derivation") == shown, run.query_string  # the view shown stays
            return run

        for asks, left in enumerate((["heads", "query"], ["query"], []), start=1):
            run = await ask(asks)
            assert charts(run) > 0 and _asker(run)[2] == {"pending": left, "answered": asks}, (asks, _asker(run))
        run = await ask(4)
        assert charts(run) == 0 and _asker(run)[2] == {"pending": [], "answered": 4}  # nothing left: nothing drawn

        for view in ("heads", "query", "compare"):
            run, _, _ = await client.change("View", (VIEW_LABELS[view],))
            assert run is not None and not run.errors and charts(run) == 0, (view, run and run.kinds)
        run, _, _ = await client.change("Head", "next")  # Core vs model redrawn; the others are stale now
        assert run is not None and not run.errors and charts(run) > 0
        run = await ask(5, shown="compare")
        assert charts(run) > 0 and _asker(run)[2] == {"pending": ["heads", "query"], "answered": 5}, _asker(run)
        await client.close()

    with app_server(log_dir=tmp_path) as server:
        asyncio.run(scenario(server))
