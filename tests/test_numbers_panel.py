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
- a control whose change does not decide which controls are drawn is not sent again (only the panel is);
  the scaling's temperature slider and a mask's own controls are drawn with their group when they appear;
- Head is drawn by the whole script, after the panel, and is not sent again by the panel's runs (unless the
  number of heads changed: a scratch core's, then the whole script runs); its change reruns the view shown alone
  (its callback names that view's fragment): the scaling radio and the head slider are not sent again, the
  view's charts are;
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
from ui.controls import ENCODING_LABELS, MASK_LABELS, SCALING_LABELS, SOURCE_LABELS
from ui.settings import VIEW_LABELS

pytestmark = pytest.mark.slow

CHART = "bidi_component:attention_lens_chart"  # the app's charts (ui/chart.py), the clickable and rows ones too


def charts(run) -> int:
    return run.kinds[CHART] + run.kinds[CHART + "_click"] + run.kinds[CHART + "_rows"]


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
            # the panel was drawn again; the head slider (main()'s, app.py ``head_control``) stays as it is
            assert charts(run) > 0 and "Head" not in run.widgets, set(run.widgets)
            shown = value[0] if isinstance(value, list) else value
            said = _link(run).get(param)
            if label == "Layer":
                assert said is not None and int(said) == int(shown)
            else:
                name = shown if names is None else {v: k for k, v in names.items()}[shown]
                assert said == name, (label, shown, run.query_string)

        # a control's change reruns the panel alone; its group of controls is drawn again only when the change
        # decides which of them are drawn (app.py ``_control_changed``)
        scaling = "Divide the scores by"
        await client.change(scaling, (SCALING_LABELS["none"],))
        run, _, _ = await client.change(scaling, (SCALING_LABELS["sqrt_dk"],))
        assert run is not None and not run.errors and charts(run) > 0, run and run.errors
        assert "Head" not in run.widgets
        assert not {scaling, "Mask", "Layer", "Fill for blocked scores"} & set(run.widgets), set(run.widgets)
        assert _link(run).get("scaling", "sqrt_dk") == "sqrt_dk", run.query_string
        run, _, _ = await client.change(scaling, (SCALING_LABELS["custom"],))  # the temperature slider appears
        assert run is not None and not run.errors and {scaling, "Temperature"} <= set(run.widgets)
        assert "Mask" not in run.widgets and _link(run)["scaling"] == "custom"
        run, _, _ = await client.change("Mask", (MASK_LABELS["sliding_window"],))  # the window's own controls
        assert run is not None and not run.errors and {"Mask", "Window width"} <= set(run.widgets)
        assert scaling not in run.widgets and "Temperature" not in run.widgets
        run, _, _ = await client.change("Window width", "next")
        assert run is not None and not run.errors and "Window width" not in run.widgets and charts(run) > 0
        assert _link(run)["mask"] == "sliding_window" and _link(run)["scaling"] == "custom", run.query_string

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
        # the scratch core has 4 heads, not the model's 12: the whole script ran, for the head slider (main()'s)
        assert not run.errors and run.finished == "FINISHED_SUCCESSFULLY", (run.errors, run.finished)
        assert _link(run)["source"] == "scratch" and _link(run).get("fill", "-inf") == new_fill, run.query_string
        assert "d_model" in run.widgets  # the controls were drawn again: the scratch sizes are there
        assert run.widgets["Head"].high == 3, run.widgets.get("Head")
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        heads = WidgetState(id=client.widgets["heads"].id, int_value=2)  # the scratch core's number of heads
        heads_fragment = client.widgets["heads"].fragment_id
        run, _ = await client.run([heads], heads_fragment)
        assert not run.errors and run.finished == "FINISHED_SUCCESSFULLY", (run.errors, run.finished)
        assert run.widgets["Head"].high == 1, run.widgets.get("Head")  # two heads: the slider is drawn again
        run, _ = await client.run([WidgetState(id=client.widgets["Seed"].id, int_value=1)], heads_fragment)
        assert not run.errors and run.finished == "FINISHED_FRAGMENT_RUN_SUCCESSFULLY", (run.errors, run.finished)
        assert "Head" not in run.widgets and charts(run) > 0  # the same two heads: the panel alone
        run, _, head = await client.change("Head", "next")  # and it answers as before
        assert run is not None and not run.errors and _link(run).get("head", "0") == str(int(head[0])), run.query_string

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


AHEAD = "lens_ahead_"  # each kept view's asker (ui/ahead.py), its key: lens_ahead_<view>
AHEAD_ON = {"ATTENTION_LENS_AHEAD_UP_TO": "256"}  # (the default, said: a test of drawing ahead needs it on)


def _askers(run) -> dict:
    """The askers a run drew: view -> (element id, fragment id, data)."""
    return {
        key.rsplit(AHEAD, 1)[1]: (key, fragment, data)
        for key, (_, fragment, data) in run.components.items()
        if AHEAD in key
    }


def test_the_page_s_ask_draws_that_view_ahead_hidden_and_a_switch_then_sends_nothing(tmp_path):
    """What the page does after a pause (ui/ahead.py): every kept view tells it what it shows (None: not in the
    page); an ask reruns that view's own fragment, which draws it (hidden: the view control is unchanged) and says
    it shows what the view shown wants for it; a switch to a view drawn ahead sends no chart; a head change redraws
    only the view shown, whose asker then says what the others must catch up with."""

    async def scenario(server) -> None:
        from benchmarks.load_protocol import trigger_state

        client = Client(server.ws_url, query_string(TEXT), 120.0)
        await client.connect()
        run, _ = await client.run()
        assert not run.errors, run.errors
        askers = _askers(run)
        assert set(askers) == {"derivation", "compare", "heads", "query"}, askers
        look, wants = askers["derivation"][2]["look"], askers["derivation"][2]["wants"]
        assert look and all(askers[view][2]["look"] is None for view in ("compare", "heads", "query"))
        assert wants["derivation"] == look and set(wants) == set(askers)
        assert [askers[v][2]["order"] for v in ("derivation", "compare", "heads", "query")] == [0, 1, 2, 3]

        async def ask(view: str, asks: int, shown: str = "derivation"):
            key, fragment, _ = askers[view]
            await asyncio.sleep(0.6)  # a page asks after a pause: the server has been quiet (else it turns it down)
            run, _ = await client.run([trigger_state(key, "ask", asks)], fragment)
            assert not run.errors and run.finished == "FINISHED_FRAGMENT_RUN_SUCCESSFULLY", (run.errors, run.finished)
            assert _link(run).get("view", "derivation") == shown, run.query_string  # the view shown stays
            assert set(_askers(run)) == {view}  # that view's fragment alone ran
            return run

        for asks, view in enumerate(("compare", "heads", "query"), start=1):
            run = await ask(view, asks)
            assert charts(run) > 0 and _askers(run)[view][2]["look"] == wants[view], (view, _askers(run))
            askers.update(_askers(run))

        for view in ("heads", "query", "compare"):
            run, _, _ = await client.change("View", (VIEW_LABELS[view],))
            assert run is not None and not run.errors and charts(run) == 0, (view, run and run.kinds)
            # its slides buttons drawn again only when a setting they record changed since: the query picked below
            assert run.kinds["download_button"] == (2 if view == "compare" else 0), (view, run.kinds)
            if view == "query":  # a query picked: Core vs model shows the same (its look leaves the query out)
                run, _, _ = await client.change("Query token", "next")
                assert run is not None and not run.errors and set(_askers(run)) == {"query"}, run and run.errors
                assert _askers(run)["query"][2]["wants"]["compare"] == wants["compare"]
        run, _, _ = await client.change("Head", "next")  # Core vs model redrawn; the others are stale now
        assert run is not None and not run.errors and charts(run) > 0
        new_wants = _askers(run)["compare"][2]["wants"]
        assert new_wants["derivation"] != look and set(_askers(run)) == {"compare"}
        assert _askers(run)["compare"][2]["look"] == new_wants["compare"]
        run = await ask("derivation", 4, shown="compare")
        assert charts(run) > 0 and _askers(run)["derivation"][2]["look"] == new_wants["derivation"]
        await client.close()

    with app_server(log_dir=tmp_path, env=AHEAD_ON) as server:
        asyncio.run(scenario(server))


def test_an_ask_while_another_session_s_run_is_in_progress_is_turned_down_and_the_page_stops_asking(tmp_path):
    """Drawing ahead uses only a quiet server, for a visitor alone on it: while another visitor's page is being
    computed, an ask draws nothing, and the view's fragment draws no asker (the page then has nothing to ask for);
    once the other session has been quiet for ``ahead.ALONE_S``, an ask draws the view and its asker comes back."""

    async def scenario(server) -> None:
        from benchmarks.load_protocol import rerun_message, trigger_state
        from ui import ahead

        mine, other = Client(server.ws_url, query_string(TEXT), 120.0), None
        await mine.connect()
        run, _ = await mine.run()
        key, fragment, data = _askers(run)["heads"]
        assert data["look"] is None and data["declined"] == 0
        other = Client(server.ws_url, query_string(TEXT + " A longer text. " * 20, max_tokens=256), 120.0)
        await other.connect()
        await other.ws.send(rerun_message(other.query_string))  # a new text: the model runs, a view is built
        await asyncio.sleep(0.3)
        run, _ = await mine.run([trigger_state(key, "ask", 1)], fragment)
        assert not run.errors and charts(run) == 0, run.kinds
        assert _askers(run) == {}  # not alone on the server: no asker, so the page asks for nothing
        other_run, _ = await other.run()  # (its answer to a plain rerun: the other page is done)
        await asyncio.sleep(ahead.ALONE_S + 0.5)  # the other session quiet for long enough
        run, _ = await mine.run([trigger_state(key, "ask", 2)], fragment)
        assert not run.errors and charts(run) > 0 and _askers(run)["heads"][2]["look"] is not None
        assert _askers(run)["heads"][2]["declined"] == 1  # the one turned down, counted
        await other.close()
        await mine.close()

    with app_server(log_dir=tmp_path, env=AHEAD_ON) as server:
        asyncio.run(scenario(server))


LATER = {"fig_scaled", "fig_masked", "fig_weights", "fig_output"}  # the derivation's steps 4-7
EARLIER = {"fig_x", "fig_q", "fig_k", "fig_v", "fig_scores"}  # steps 1-3: a scaling or mask change cannot change them


def _figures(run) -> set[str]:
    return {key.rsplit("-", 1)[-1] for key in run.components if "-fig_" in key}


def test_a_scaling_or_mask_change_on_the_derivation_sends_the_header_and_steps_4_to_7_only(tmp_path):
    """On the derivation, a change of the scaling, the mask (its window) or the fill reruns the header and steps
    4-7 alone (app.py ``_later_steps_alone``): steps 1-3 stay in the page, the header (its check and its notices),
    steps 4-7 and the slides buttons come again for the new numbers, and the link says it. A view kept in the
    page, hidden, is cleared by it (it showed the old numbers): a switch to it draws it again. The padding (in the
    mask's group) still reruns the whole script, the encoding the whole panel."""

    async def scenario(server) -> None:
        client = Client(server.ws_url, query_string(TEXT), 120.0)
        await client.connect()
        run, _ = await client.run()
        assert not run.errors and (LATER | EARLIER) <= _figures(run), _figures(run)
        scaling = "Divide the scores by"
        for label in ("none", "sqrt_dk"):
            run, _, _ = await client.change(scaling, (SCALING_LABELS[label],))
            assert run is not None and not run.errors and run.finished == "FINISHED_FRAGMENT_RUN_SUCCESSFULLY"
            assert _figures(run) == LATER, _figures(run)
            assert run.kinds["metric"] >= 4 and run.kinds["download_button"] >= 1, run.kinds  # header, slides
            assert "View" not in run.widgets and "Head" not in run.widgets
            assert _link(run).get("scaling", "sqrt_dk") == label, run.query_string
        run, _, _ = await client.change(scaling, (SCALING_LABELS["custom"],))  # its temperature slider appears
        assert run is not None and not run.errors and "Temperature" in run.widgets and _figures(run) == LATER
        run, _, _ = await client.change("Temperature", "next")
        assert run is not None and not run.errors and _figures(run) == LATER and _link(run)["scaling"] == "custom"

        async def switch(view: str):
            run, _, _ = await client.change("View", (VIEW_LABELS[view],))
            assert run is not None and not run.errors, run and run.errors
            return run

        assert charts(await switch("heads")) > 0
        assert charts(await switch("derivation")) == 0  # kept in the page: shown, not sent
        # a first visit after such a change draws the scaling the page shows, not the panel's last run's (a view's
        # fragment used to take the settings it was handed then), and writes it in the link
        run = await switch("compare")
        fresh = Client(
            server.ws_url,
            query_string(TEXT, scaling="custom", temperature=_link(run).get("temperature"), view="compare"),
            120.0,
        )
        await fresh.connect()
        opened, _ = await fresh.run()
        await fresh.close()
        assert _link(run)["scaling"] == "custom" and _link(run).get("temperature"), run.query_string
        compare = [key for key in run.payloads if key.endswith("-fig_compare")]
        assert compare and run.payloads[compare[0]] == opened.payloads[compare[0]]
        assert charts(await switch("derivation")) == 0
        run, _, _ = await client.change(scaling, (SCALING_LABELS["sqrt_dk"],))
        assert run is not None and not run.errors and _figures(run) == LATER
        assert charts(await switch("heads")) > 0  # cleared by the scaling change: drawn again, for it
        assert charts(await switch("derivation")) == 0  # kept in the page and current (it drew the new scaling)

        # the mask, its own sizes and the fill: steps 4-7 too (the mask's group drawn again when its shape changes)
        run, _, _ = await client.change("Mask", (MASK_LABELS["causal"],))
        assert run is not None and not run.errors and _figures(run) == LATER, _figures(run)
        assert "View" not in run.widgets and _link(run)["mask"] == "causal", run.query_string
        run, _, _ = await client.change("Mask", (MASK_LABELS["sliding_window"],))  # its window's own controls
        assert run is not None and not run.errors and _figures(run) == LATER and "Window width" in run.widgets
        run, _, width = await client.change("Window width", "next")
        assert run is not None and not run.errors and _figures(run) == LATER and "Window width" not in run.widgets
        assert _link(run)["window"] == str(int(width[0] if isinstance(width, list) else width)), run.query_string
        run, _, fill = await client.change("Fill for blocked scores", "next")
        assert run is not None and not run.errors and _figures(run) == LATER
        assert _link(run).get("fill") == (fill[0] if isinstance(fill, list) else fill), run.query_string
        assert charts(await switch("heads")) > 0  # cleared by the mask change: drawn again, for it
        assert charts(await switch("derivation")) == 0

        # not these: the padding adds tokens (the whole script), the encoding changes X on (the whole panel)
        pad = client.widgets["Pad input to (tokens, 0 = off)"]
        run, _ = await client.run([widget_state(pad, 16.0)], pad.fragment_id)
        assert not run.errors and run.finished == "FINISHED_SUCCESSFULLY" and "Text" in run.widgets, run.finished
        assert (LATER | EARLIER) <= _figures(run) and _link(run)["pad_to"] == "16", run.query_string
        run, _, _ = await client.change("Positional encoding (own core)", "next")
        assert run is not None and not run.errors and run.finished == "FINISHED_FRAGMENT_RUN_SUCCESSFULLY"
        assert (LATER | EARLIER) <= _figures(run), _figures(run)
        await client.close()

    with app_server(log_dir=tmp_path) as server:
        asyncio.run(scenario(server))
