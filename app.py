"""Attention Lens: type text, see attention computed step by step beside a real transformer.

Streamlit only: read widgets into one Settings, call cached pure functions, place figures.
Run: make run   (or: .venv/bin/python -m streamlit run app.py)
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st
from streamlit.errors import StreamlitAPIException

from attention_core.device import configure_threads, pick_device
from ui import ahead, chart, compute, controls, export, header, loading, prefetch, sidebar, switch, views, yielding
from ui.settings import URL_TEXT_CHARS, VIEW_LABELS, VIEWS, from_query_params, to_query_params
from ui.text import plain
from ui.views import common as view_common
from ui.views import derivation

EXPORTABLE = {"derivation": "derivation", "compare": "compare", "heads": "heads,lines,rollout", "query": "query"}

st.set_page_config(page_title="Attention Lens", page_icon="🔍", layout="wide")


@st.cache_resource
def _threads() -> int:
    compute.return_freed_memory()  # once per server, like the thread count
    return configure_threads()


def main() -> None:
    _threads()
    if "_seeded" not in st.session_state:
        settings, notices = from_query_params(st.query_params)
        sidebar.seed_state(settings)
        st.session_state["_url_notices"] = notices
        st.session_state["_seeded"] = True
    sidebar.keep_state()
    view_common.new_page()
    chart.preload()
    with st.container():  # one element every run, however many notices: the page below keeps its place
        for notice in st.session_state.pop("_url_notices", []):
            st.warning(f"Link setting fixed: {plain(notice)}", icon=":material/link:")

    st.title("Attention Lens")
    st.caption(
        "Attention derived step by step: your own from-scratch core beside a real transformer, number for number."
    )
    with st.sidebar:
        st.header("Controls")
        text, model = sidebar.text_and_model()

    # Each run draws the same number of elements above the numbers panel (what varies sits in a container): a
    # panel whose place moves is drawn anew by the page, every chart remounted (a progress bar drawn in the first
    # run only did that to the full rerun that follows a page's opening).
    with st.container():
        loaded, model = loading.load(model)
    said = st.container()
    if not text.strip():
        said.info("Type some text in the sidebar (or pick an example) to see its attention.", icon=":material/edit:")
        return
    text, fixes = loading.fit_resources(loaded, text)
    try:
        cap = compute.first_look(model, text, *_sizes(), st.session_state.get("layer", 0))  # (its tokens)
    except ValueError as err:
        with said:
            loading.show_fixes(fixes)
            st.error(plain(str(err), 600), icon=":material/warning:")
        return
    with said:
        loading.show_fixes(fixes)
        if len(text) > URL_TEXT_CHARS:
            st.caption(f"The page's link keeps only the first {URL_TEXT_CHARS:,} characters of the text.")
    num_tokens = len(cap.tokens.labels)
    with st.sidebar:  # the layer and head sliders' slots (containers the fragments draw into), then the controls
        layer_slot, head_slot = sidebar.layer_and_head_slots()
        for controls_panel in CONTROL_PANELS.values():
            controls_panel(loaded.facts, num_tokens, layer_slot)
    st.session_state[WHOLE_RUN] = True  # the panel below runs as part of the whole script, not as a fragment
    st.session_state[CAPTURE_SIZES] = _sizes()
    numbers_panel(model, text, loaded.facts, num_tokens, _sizes())
    head_control(head_slot, st.session_state.get(NUM_HEADS, 1))  # into its slot: after the panel counted the heads


def _sizes() -> tuple[int, int]:
    """The two settings that decide the capture itself (how many tokens): main() computes it with these."""
    return int(st.session_state.get("max_tokens", 128)), int(st.session_state.get("pad_to", 0))


WHOLE_RUN = "_whole_run"  # set by main() for the numbers panel's run inside the whole script
CAPTURE_SIZES = "_capture_sizes"  # the sizes main() computed the capture with (``_sizes()``)
NUM_HEADS = "_num_heads"  # the heads of the trace the panel last computed: the head slider's range
CONTROLS_KEY = "lens-controls-"  # each group of the numbers' controls: its fragment's key is this + its name
PANEL_KEY = "lens-panel"  # the numbers panel's fragment


def _control_changed(group: str):
    """The callback of every control of ``group``: the numbers panel reruns; the group is drawn again only when the
    change decides which of its controls are drawn (``controls.ControlGroup.shape``: the temperature slider, a
    mask's own sizes, the scratch sizes). A scaling click re-sent the sixteen controls and five drawers of the
    sidebar, every one re-rendered by the page, for nothing (report section 7, "twenty-first")."""

    def changed() -> None:
        keys = [PANEL_KEY]
        if group in LATER_GROUPS and _later_steps_alone():
            # the header and the derivation's steps 4-7 (and its slides button) alone: steps 1-3 cannot change
            keys = [HEADER_KEY, derivation.LATER_KEY, export.SLIDES_KEY + "derivation"]
            # a view kept in the page, hidden, shows the old numbers: its fragment runs and clears it
            keys += [VIEW_KEY + name for name in st.session_state.get(ahead.DRAWN, {}) if name != "derivation"]
            st.session_state[LATER_ALONE] = True
        if controls.CONTROL_GROUPS[group].shape() != st.session_state.get("_controls_shape", {}).get(group):
            keys.insert(0, CONTROLS_KEY + group)  # first: the panel shows what it fitted
        _rerun(keys)

    return changed


# The groups whose changes show in the derivation's steps 4-7 only (the scores scaled, masked, their softmax, AV):
# steps 1-3 (X, the projections, QKᵀ) are made before any of them. The padding, in the masking group, adds tokens.
LATER_GROUPS = ("scaling", "masking")


def _later_steps_alone() -> bool:
    """Whether a change of the scaling or the mask may rerun only the header and the derivation's steps 4-7: the
    derivation is shown, as the last run drew it, and the capture's sizes are still main()'s (the padding adds
    tokens: the whole script). The derivation's asker (ui/ahead.py) is not drawn again then; the page takes what
    it shows from the views drawn ahead after it, which carry the newer run (ahead.js ``currentWants``)."""
    view, drawn = chosen_view(), st.session_state.get(ahead.DRAWN, {})
    return view == "derivation" and drawn.get(view) == _look(view) and _sizes() == st.session_state.get(CAPTURE_SIZES)


def _controls_fragment(group: str):
    def controls_panel(facts, num_tokens: int, layer_slot) -> None:
        """One group of the controls of the numbers, in the sidebar: the settings kept and brought within what
        the model and the text allow first (a slider handed a value beyond its end refuses to draw), then its
        widgets, each with ``_control_changed`` as callback. Notices go to the numbers panel, which runs after
        it (``_fit_notices``)."""
        try:
            spec = controls.CONTROL_GROUPS[group]
            sidebar.keep_state(only=spec.keys)  # as main() does: a hidden one (the temperature) keeps its value
            fixes = sidebar.fit_to_model(facts, num_tokens)
            st.session_state["_fit_notices"] = [*st.session_state.get("_fit_notices", []), *fixes]
            spec.draw(facts, num_tokens, layer_slot, on_change=_control_changed(group))
            st.session_state.setdefault("_controls_shape", {})[group] = spec.shape()
        except Exception as err:  # a fragment rerun is not inside main()'s guard: a message, never a traceback
            view_common.went_wrong(err)

    controls_panel.__qualname__ = f"controls_panel_{group}"
    return st.fragment(key=CONTROLS_KEY + group)(controls_panel)


CONTROL_PANELS = {group: _controls_fragment(group) for group in controls.CONTROL_GROUPS}


@st.fragment(key=PANEL_KEY)
def numbers_panel(model: str, text: str, facts, num_tokens: int, sizes: tuple[int, int]) -> None:
    """What the controls of the numbers decide (``controls_panel``): the trace, the header (``header_panel``) and
    the view (the head slider is main()'s, ``head_control``). A change of one of those controls reruns this panel
    only (their callback): the title, the text and model controls, the capture and the controls themselves stay on
    the page as they are (a whole-script rerun cost the browser about 0.15 s more per click at 64 tokens, report
    section 7). Max tokens and padding decide
    the capture, which main() computes: a change of either reruns the whole script."""
    whole = st.session_state.pop(WHOLE_RUN, False)
    # (a fragment rerun is not inside main()'s guard: a message, never a traceback)
    with prefetch.running(compute.session_id()), view_common.guarded():
        if _sizes() != sizes:
            st.rerun()  # the capture is main()'s: it must run again with the new sizes
        # as main() does, for the widgets drawn below (the controls may be drawn already in this run)
        sidebar.keep_state(skip=sidebar.TEXT_AND_MODEL + controls.CONTROL_KEYS)
        view_common.new_page()
        _numbers_panel(model, text, facts, num_tokens, whole)


def _numbers_panel(model: str, text: str, facts, num_tokens: int, whole: bool) -> None:
    """``whole``: this run is the whole script's (main() called the panel), else the panel's own (a fragment run)."""
    # Everything above the view sits in one container: the view's fragment keeps its place (a nested fragment's
    # identity is its position), however many notices the header shows this time.
    with st.container():
        drawn = header_panel(model, text, facts, num_tokens)
    if drawn is None:  # no trace (a message says why): no view
        return
    settings, replay_slot, num_heads, fixes = drawn
    if st.session_state.get(NUM_HEADS) != num_heads:  # (the scratch core's heads, or its source)
        st.session_state[NUM_HEADS] = num_heads
        if not whole:  # the head slider is main()'s: the whole script draws it again, for this many heads
            st.session_state["_fit_notices"] = fixes  # (what was fitted here is said there)
            st.rerun()
    st.session_state["_panel_tokens"] = num_tokens
    st.session_state[ahead.DRAWN] = {}  # this run draws the chosen view and clears the others
    view_switch(settings)
    for view_panel in VIEW_PANELS.values():
        view_panel(settings)
    if not header.replay_check(replay_slot, settings.request()):
        st.fragment(run_every=1.0)(header.replay_poll)(replay_slot, settings.request())


HEADER_KEY = "lens-header"  # the header's fragment, inside the numbers panel
HEADER_SETTINGS = "_header_settings"  # the settings of the header's last run
LATER_ALONE = "_later_alone"  # set by a scaling or mask callback that reruns the header and steps 4-7 alone


@st.fragment(key=HEADER_KEY)
def header_panel(model: str, text: str, facts, num_tokens: int):
    """The settings fitted to the model and written to the link, the trace, and the header (what the model and
    the core are, how far apart). Returns (settings, the all-layers check's slot, the number of heads, what was
    fitted), or None when there is no trace (its message is shown). Rerun alone, with the derivation's steps 4-7,
    by a change of the scaling or the mask (``_control_changed``): then it also fills the check and marks the views."""
    with view_common.guarded(), prefetch.running(compute.session_id()):  # (re-entrant: the panel holds it too)
        return _header_panel(model, text, facts, num_tokens)
    return None  # (an error, said by the guard)


def _header_panel(model: str, text: str, facts, num_tokens: int):
    # what the controls fitted before they were drawn in this run, and what is left to fit (a panel alone)
    fixes = st.session_state.pop("_fit_notices", []) + sidebar.fit_to_model(facts, num_tokens)
    loading.show_fixes(fixes)
    settings = replace(sidebar.read_settings(model), text=text)
    st.query_params.from_dict(to_query_params(settings))
    try:
        device = pick_device(settings.device)
        trace = compute.trace_for(settings.request(), view=chosen_view())
    except ValueError as err:
        st.error(plain(str(err), 600), icon=":material/warning:")
        return None
    st.session_state[HEADER_SETTINGS] = settings  # what the views show (``_shown_settings``)
    replay_slot = header.render(trace, str(device), settings)
    st.session_state["_panel_run"] = st.session_state.get("_panel_run", 0) + 1
    if st.session_state.pop(LATER_ALONE, False):  # the panel does not run: what it would do after the view
        st.session_state[ahead.DRAWN] = {"derivation": _look("derivation")}  # steps 4-7 are drawn next, in this run
        header.replay_check(replay_slot, settings.request())  # (a long input's poll, drawn by the panel, goes on)
    return settings, replay_slot, trace.core.num_heads, fixes


# Views kept in the page, hidden, after a switch away (switching back shows them at once when nothing they show has
# changed). Their widget and chart keys are their own; the others share a key ("query") or run work of their own
# (the training lab), so they are cleared when left, and every kept one is cleared when one of them is opened.
KEPT_VIEWS = ("derivation", "compare", "heads", "query")
SWITCH_KEY = "lens-views"  # the fragment of the view control; each view's fragment is VIEW_KEY + its name
VIEW_KEY = "lens-view-"
BOX_KEY = "lens-box-"  # the container of each view's fragment (its CSS class: st-key-lens-box-<name>)
BOX_CLASS = switch.element_class(BOX_KEY)


def _shown_settings(handed):
    """What a view (and the link) shows: the header's last settings, newer than those the panel ``handed`` the views
    after a scaling or mask click that reran steps 4-7 alone, with the view-only ones as the widgets hold them."""
    return replace(st.session_state.get(HEADER_SETTINGS, handed), **sidebar.view_only())


def chosen_view() -> str:
    return st.session_state.get("view") or "derivation"


def _look(view: str | None) -> str:
    """What ``view`` shows besides being the view: the numbers panel's run and the view-only settings it shows (None:
    every one, what the slides buttons record)."""
    return ahead.look(st.session_state.get("_panel_run"), sidebar.view_only(), view)


def _rerun(keys: list[str]) -> None:
    """Rerun only these fragments (Streamlit 1.67: a widget callback may name them)."""
    try:
        st.rerun(keys)
    except StreamlitAPIException:  # a fragment the last run did not register (it failed before it): the whole page
        st.rerun()


def _view_changed() -> None:
    """The view control's callback. The page itself has shown the chosen view and hidden the rest (ui/switch.py);
    the chosen view's fragment runs only when what it shows is not already in the page (its run also writes the
    link), else the control's own fragment runs, to write the link (and the view's slides buttons, ``_slides_keys``)."""
    new, drawn = chosen_view(), st.session_state.setdefault(ahead.DRAWN, {})
    keys = [VIEW_KEY + new] if drawn.get(new) != _look(new) else [SWITCH_KEY, *_slides_keys(new)]
    for name in list(drawn):
        if name != new and (name not in KEPT_VIEWS or new not in KEPT_VIEWS):
            keys.append(VIEW_KEY + name)  # its fragment runs, finds it is not the chosen view, and draws nothing
            del drawn[name]
    _rerun(keys)


def _slides_keys(view: str) -> list[str]:
    """The view's slides buttons, when a setting they record, which its look leaves out (ui/ahead.py ``NOT_SHOWN``),
    has changed since they were drawn: drawn again, with the settings as they are now."""
    drawn_all = st.session_state.setdefault(ahead.DRAWN_ALL, {})
    if view not in EXPORTABLE or drawn_all.get(view) == _look(None):
        return []
    drawn_all[view] = _look(None)
    return [export.SLIDES_KEY + view]


def _asker(name: str, look: str | None) -> None:
    wants = {view: _look(view) for view in KEPT_VIEWS}
    ahead.asker(name, BOX_CLASS + name, look, wants, KEPT_VIEWS.index(name), compute.session_id())


def _draws_ahead(shown: str, name: str) -> bool:
    return ahead.takes_part(shown, name, KEPT_VIEWS, st.session_state.get("_panel_tokens", 0), compute.session_id())


def _head_changed() -> None:
    _rerun([VIEW_KEY + chosen_view()])  # the other views kept in the page are redrawn when opened again


@st.fragment
def head_control(slot, num_heads: int) -> None:
    """The head slider, alone in a fragment (drawn into the sidebar's slot): its callback reruns only the view
    shown. While the callback's run ends early, the page marks the elements of the fragment that drew the widget
    stale and then fresh again: drawn by the numbers panel, that was every element of the panel, twice a click
    (a head change at 64 tokens 0.23 -> 0.30 s); here it is the slider alone.

    main() draws it, after the numbers panel, not the panel: the panel's own runs (every recompute click) leave it
    in the page as it is. Drawn by the panel, it was sent again with each of them, and the page re-rendered it and
    laid itself out in the middle of the update to measure it (about 9 ms of forced layout a click, profiled;
    report section 7, "twenty-fifth"). A panel run that finds another number of heads reruns the whole script."""
    sidebar.head_slider(slot, num_heads, on_change=_head_changed)


@st.fragment(key=SWITCH_KEY)
def view_switch(settings) -> None:
    """The view control, and the style that shows the chosen view's fragment and hides the others."""
    st.segmented_control(
        "View",
        VIEWS,
        key="view",
        format_func=VIEW_LABELS.get,
        selection_mode="single",
        label_visibility="collapsed",
        on_change=_view_changed,
    )
    view = chosen_view()
    st.html(f"<style>{switch.css(VIEWS, '.' + BOX_CLASS, view)}</style>")
    switch.follow(VIEWS, switch.element_class("view"), view, "derivation")
    st.query_params.from_dict(to_query_params(_shown_settings(settings)))


def _view_fragment(name: str):
    def view_panel(settings) -> None:
        """Everything that only chooses what to look at (head, query, statistic) reruns only this view: the
        trace is the cached one (looked up, not handed in: a fragment's arguments live until the next full run
        has finished, so an old trace would stay alive while its replacement is built), nothing is recomputed,
        and only this view is sent and redrawn. Afterwards the neighbouring heads' figures are built in the
        background while nobody waits (ui.prefetch). Not the chosen view: only its asker (ui/ahead.py), and what it
        drew is cleared; unless the page asked for it: then it is drawn as the chosen one would be, hidden."""
        view = chosen_view()
        shown = view == name
        asks = _draws_ahead(view, name)
        asked = st.session_state.get(ahead.ASKED) == (name, st.session_state.get("_panel_run"))
        if asked:
            del st.session_state[ahead.ASKED]  # asked by the page (ui/ahead.py): drawn hidden, once
        elif not shown:
            if asks:  # not in the page: the page may ask for it while nobody clicks
                _asker(name, None)
            return
        try:
            with prefetch.running(compute.session_id()), st.container(key=BOX_KEY + name), yielding.drawing(asked):
                _view_panel(name, settings, shown=shown)
        except yielding.Yielded:  # a click came while it was drawn ahead: the rest waits, the click's run comes next
            ahead.decline(name)
            _asker(name, None)
            return
        finally:
            if asked:
                ahead.release(compute.session_id())  # the server's turn to draw a view ahead
        look = _look(name)
        st.session_state.setdefault(ahead.DRAWN, {})[name] = look
        st.session_state.setdefault(ahead.DRAWN_ALL, {})[name] = _look(None)  # (every view-only setting)
        if asks:  # what it shows: the page compares the others' with the shown one's
            _asker(name, look)
        if shown:
            prefetch.schedule(owner=compute.session_id())  # its new queue replaces its old one
        else:
            prefetch.forget()  # the view shown keeps its queue

    view_panel.__qualname__ = f"view_panel_{name}"
    return st.fragment(key=VIEW_KEY + name)(view_panel)


VIEW_PANELS = {name: _view_fragment(name) for name in VIEWS}


def _view_panel(view: str, settings, shown: bool = True) -> None:
    """``shown``: the view chosen (else one drawn ahead, hidden, which queues no figures of other views)."""
    with view_common.guarded():  # a fragment rerun is not inside main()'s guard: same message, never a traceback
        settings = _shown_settings(settings)
        st.query_params.from_dict(to_query_params(settings))
        trace = compute.with_head(compute.trace_for(settings.request(), view=view), settings.head)
        views.render(view, trace, settings)
        if shown and trace.complete:  # (a first look has one layer: the other views wait for the whole capture)
            views.ahead(view, trace, settings)
        if view in EXPORTABLE:
            SLIDES[view](settings.model, settings.text)


SLIDES = {view: export.slides_fragment(view, views) for view, views in EXPORTABLE.items()}


with view_common.guarded(), prefetch.running(compute.session_id()):  # last line of defence: never a traceback
    main()
