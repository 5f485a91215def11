"""Views drawn ahead: while a person reads, the views kept in the page (hidden) are drawn for what is shown now.

A view switch to a view already in the page shows it (app.py, ``KEPT_VIEWS``): no run of the view, no chart sent,
nothing mounted, nothing drawn; the first visit of a view had to do all of that on the click's path (at 64
MiniLM tokens 0.44-0.51 s for Heads & layers, Query inspector and Core vs model, against 0.16-0.20 s for a
return). Here the page asks for the kept views it lacks once the person has paused (``IDLE_MS`` with no click,
key press or change on the page), one view per ask; the view is drawn hidden, laid out at its real width, and
its charts are drawn by plotly while the browser is idle (``ui/components/lens_chart/chart.js``), so that the
switch finds a view ready to show. A person clicking faster than that never waits on it; a long input
(``UP_TO``) is not drawn ahead (a view there costs seconds of server and browser time).

The component (``ui/components/lens_ahead/ahead.js``) draws nothing; its "ask" trigger calls back into app.py.
Streamlit glue only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import streamlit as st

from .policy import env_number

FOLDER = Path(__file__).resolve().parent / "components" / "lens_ahead"
IDLE_MS = int(env_number("ATTENTION_LENS_AHEAD_IDLE_MS", 1000, 100))  # the pause before the first ask
GAP_MS = 300  # between asks with no click in between: the page only needs to have settled
UP_TO = int(env_number("ATTENTION_LENS_AHEAD_UP_TO", 256, 0))  # tokens; above this no view is drawn ahead
KEY = "lens_ahead"

# A view not shown (app.py writes this for the box of every view but the chosen one): laid out at its real width
# but of no height (max-height: the box is a flex item that would stretch), clipped and invisible (not
# display: none), so that the charts of a view drawn ahead are drawn by plotly at their size while the page is
# idle, and a switch to it only shows it. --lens-hidden tells ui/components/lens_chart/chart.js that a chart is in
# such a view (inherited, which Streamlit's own styles do not undo: its markdown sets visibility: visible).
HIDDEN_STYLE = (
    "max-height: 0 !important; min-height: 0 !important; overflow: hidden !important; "
    "visibility: hidden !important; pointer-events: none !important; contain: layout paint; --lens-hidden: 1"
)


def script() -> str:
    return (
        (FOLDER / "ahead.js")
        .read_text(encoding="utf-8")
        .replace("__IDLE_MS__", str(IDLE_MS))
        .replace("__GAP_MS__", str(GAP_MS))
    )


_component = st.components.v2.component(
    "attention_lens_ahead", html="<span></span>", js=script(), isolate_styles=False
)


def pending(shown: str, kept: Sequence[str], drawn: dict, look: str, num_tokens: int) -> list[str]:
    """The kept views to draw ahead, in their order: not the one shown, not in the page for ``look`` (what the
    views show now), none when the view shown is not a kept one or the input is longer than ``UP_TO``."""
    if shown not in kept or num_tokens > UP_TO:
        return []
    return [name for name in kept if name != shown and drawn.get(name) != look]


def asker(views: list[str], answered: int, on_ask: Callable[[], None]) -> None:
    """The page's asker, told which views are still to draw and how many asks were answered; ``on_ask`` runs when
    the page asks."""
    _component(key=KEY, data={"pending": list(views), "answered": answered}, on_ask_change=on_ask)
