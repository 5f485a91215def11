"""Views drawn ahead: while a person reads, the views kept in the page (hidden) are drawn for what is shown now.

A view switch to a view already in the page shows it (app.py, ``KEPT_VIEWS``): no run of the view, no chart sent,
nothing mounted, nothing drawn; the first visit of a view had to do all of that on the click's path (at 64
MiniLM tokens 0.44-0.51 s for Heads & layers, Query inspector and Core vs model, against 0.16-0.20 s for a
return). Here the page asks for the kept views it lacks once the person has paused (``IDLE_MS`` with no click,
key press or change on the page), one view per ask; the view is drawn hidden, laid out at its real width, and
its charts are drawn by plotly while the browser is idle (``ui/components/lens_chart/chart.js``), so that the
switch finds a view ready to show. A person clicking faster than that never waits on it; a long input
(``UP_TO``) is not drawn ahead (a view there costs seconds of server and browser time). Done only for a visitor
alone on the server (``takes_part``): with others on it, no page is asked to take part.

Each kept view's fragment draws a small component (``ui/components/lens_ahead/ahead.js``) that draws nothing
and tells the page what that view shows (``look``, None when it is not in the page); the page compares it with
what the view shown shows and asks for the first view that differs; the "ask" trigger reruns that view's own
fragment, which draws it hidden (an ordinary fragment run: a click that comes meanwhile waits for it instead of
cutting it short, which a callback naming fragments to rerun did, and the page then failed to place the rest).
The server draws ahead for one visitor at a time, and only for one who has it to itself (``claim``, ``ALONE_S``):
with ten visitors, their clicks come first. Streamlit glue and a lock; no computation.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path

import streamlit as st

from . import prefetch
from .policy import env_number

FOLDER = Path(__file__).resolve().parent / "components" / "lens_ahead"
IDLE_MS = int(env_number("ATTENTION_LENS_AHEAD_IDLE_MS", 1000, 100))  # the pause before the first ask
GAP_MS = 300  # between asks with no click in between: the page only needs to have settled
BUSY_MS = 3000  # after an ask the server turned down (another session's run in progress): the page waits this long
# Tokens; above this no view is drawn ahead (0: never). On by default since the thirty-fourth session, for a visitor
# alone on the server only (``takes_part``): before, with it on for every visitor, the ten-browser test lost
# one click in three runs of a minute (a radio click that never reached the server, no error in the page; not
# reproduced in three more runs, report section 7, "thirty-fourth"). At 512 tokens a first visit is within its budget.
UP_TO = int(env_number("ATTENTION_LENS_AHEAD_UP_TO", 256, 0))
KEY = "lens_ahead"

# A view not shown (app.py writes this for the box of every view but the chosen one): laid out at its real width
# but of no height (max-height: the box is a flex item that would stretch), clipped and invisible (not
# display: none), so that the charts of a view drawn ahead are drawn by plotly at their size while the page is
# idle, and a switch to it only shows it. --lens-hidden tells ui/components/lens_chart/chart.js that a chart is in
# such a view (inherited, which Streamlit's own styles do not undo: its markdown sets visibility: visible).
# content-visibility: hidden lets the browser skip the style and layout of everything inside (a forced layout
# still lays out what a script measures there, so plotly draws a hidden chart at its width): a switch used to
# restyle and re-lay out every element of every view kept in the page, the twelve-figure derivation among them
# (style recalculation per switch at 64 MiniLM tokens 53-64 -> 32-38 ms; a return to a kept view 36-42 -> 17-18 ms).
HIDDEN_STYLE = (
    "max-height: 0 !important; min-height: 0 !important; overflow: hidden !important; "
    "visibility: hidden !important; pointer-events: none !important; contain: layout paint; --lens-hidden: 1; "
    "content-visibility: hidden"
)


def hiding_css(selectors: list[str]) -> str:
    """The CSS that hides these boxes (``HIDDEN_STYLE``), their every descendant invisible too: Streamlit's markdown
    sets visibility: visible on its text, which a screen reader would read and a test driver would take as shown."""
    if not selectors:
        return ""
    boxes = ", ".join(selectors)
    inside = ", ".join(f"{selector} *" for selector in selectors)
    return f"{boxes} {{{HIDDEN_STYLE}}} {inside} {{visibility: hidden !important}}"


def script() -> str:
    return (
        (FOLDER / "ahead.js")
        .read_text(encoding="utf-8")
        .replace("__IDLE_MS__", str(IDLE_MS))
        .replace("__GAP_MS__", str(GAP_MS))
        .replace("__BUSY_MS__", str(BUSY_MS))
    )


_component = st.components.v2.component("attention_lens_ahead", html="<span></span>", js=script(), isolate_styles=False)


# One view drawn ahead at a time in the whole server: ten pages that opened and went quiet together asked at once,
# each saw a quiet server, and ten views (Heads & layers' summaries among them) held the heavy slots the first
# clicks then waited 10 s for. A claim not released (its run never came) lapses after CLAIM_S.
CLAIM_S = 10.0
# ... and only for a visitor who has had the server to itself for this long (no other session's run): with ten
# browsers opening and clicking on one two-core machine, views drawn ahead for the pages that had opened first held
# up every page's first click (10 pages x 30 s: max 3.4 -> 10.5 s, 161 -> 128 updates).
ALONE_S = 3.0
_claim_lock = threading.Lock()
_claimed: tuple[Hashable, float] | None = None  # (session, when)


def claim(owner: Hashable) -> bool:
    """Take the server's one turn to draw a view ahead for ``owner`` (a session); False while another has it."""
    global _claimed
    with _claim_lock:
        now = time.monotonic()
        if _claimed is not None and _claimed[0] != owner and now - _claimed[1] < CLAIM_S:
            return False
        _claimed = (owner, now)
        return True


def release(owner: Hashable) -> None:
    """Give the turn back (the view is drawn, or its run ended otherwise)."""
    global _claimed
    with _claim_lock:
        if _claimed is not None and _claimed[0] == owner:
            _claimed = None


def eligible(shown: str, view: str, kept: Sequence[str], num_tokens: int) -> bool:
    """Whether ``view`` takes part while ``shown`` is the chosen view (drawn ahead when it is not the one shown,
    the one shown telling the page what the others must show): both kept views, an input of at most ``UP_TO``
    tokens."""
    return shown in kept and view in kept and num_tokens <= UP_TO


# What each kept view does not show of the view-only settings (ui.settings.VIEW_ONLY): its look leaves them out, so
# that a change of one leaves it as drawn. A query picked in the Query inspector made Core vs model and Heads & layers
# stale: the page asked for both again (at 64 MiniLM tokens 184 kB within 3 s of each pick, Core vs model's chart
# drawn again, and at times Heads & layers' four from scratch, 1 MB; benchmarks/reading_picks.py), and an ask
# turned down (the pick's neighbours being built, most likely) cleared the view. Their slides buttons, which record
# every setting, are drawn again on a switch to the view when one of these changed (app.py ``_slides_keys``).
NOT_SHOWN = {
    "derivation": ("statistic", "query_set", "pair_text"),
    "compare": ("query", "query_set", "statistic", "pair_text", "hide_special", "words", "fixed_range"),
    "heads": ("query", "query_set", "pair_text"),
    "query": ("statistic", "pair_text"),
}


def look(run, values: dict, view: str | None) -> str:
    """What ``view`` shows besides being the view: the numbers panel's run (first: the page compares runs) and the
    view-only settings (``values``: all of them) it shows; every one for ``view`` None."""
    left_out = ("view", *NOT_SHOWN.get(view, ()))
    return f"{run}|{sorted((k, v) for k, v in values.items() if k not in left_out)!r}"


ASKED = "_draw_ahead"  # session state: (view, the numbers panel's run) the page asked for and the server agreed to
DECLINED = "_ahead_declined"  # session state: how many of this session's asks were turned down
DRAWN = "_views_drawn"  # session state: view -> what it shows in the page (app.py keeps it)
DRAWN_ALL = "_views_drawn_all"  # ... and its look with every view-only setting (what its slides buttons record)


def takes_part(shown: str, view: str, kept: Sequence[str], num_tokens: int, me: Hashable) -> bool:
    """Whether ``view``'s fragment draws its asker while ``shown`` is the chosen view (``eligible``), for a visitor
    (``me``, the session) alone on the server (no other session's run for ``ALONE_S``): with others on it, the page
    never asks."""
    return eligible(shown, view, kept, num_tokens) and prefetch.alone(me, ALONE_S)


def declined() -> int:
    return st.session_state.get(DECLINED, 0)


def decline(view: str) -> None:
    """One more ask turned down (the page waits before it asks again); what ``view`` showed leaves the page."""
    st.session_state[DECLINED] = declined() + 1
    st.session_state.get(DRAWN, {}).pop(view, None)


def on_ask(view: str, me: Hashable) -> Callable[[], None]:
    """The "ask" callback of ``view``'s asker: its fragment, which runs next, draws it hidden, unless another
    session has run anything in the last ``ALONE_S`` seconds, or another view is being drawn ahead (ten visitors: a
    view drawn ahead for one took the cores the others' answers needed); then it draws its asker again, which tells
    the page to wait."""

    def asked() -> None:
        if prefetch.quiet() and prefetch.alone(me, ALONE_S) and claim(me):
            st.session_state[ASKED] = (view, st.session_state.get("_panel_run"))
        else:  # its fragment draws only its asker: what it showed (stale, or nothing) leaves the page
            decline(view)

    return asked


def asker(view: str, box: str, look: str | None, wants: dict, order: int, me: Hashable) -> None:
    """The page's asker for ``view`` (drawn by that view's fragment): the class of its box, what it shows (``look``;
    None: not in the page), what each kept view must show now (``wants``: view -> look) and its place in the order.
    When the page asks, ``on_ask`` runs and then, as for any widget, the fragment that drew it: the view's own
    (``me``: its session). It also carries how many asks of this session the server turned down (``declined``): a new
    count is a new answer, and the page waits before asking again."""
    data = {"view": view, "box": box, "look": look, "wants": wants, "order": order, "declined": declined()}
    _component(key=f"{KEY}_{view}", data=data, on_ask_change=on_ask(view, me))
