"""The Query inspector's box moves its step-through in the page: a query picked in the box is shown in the chart at
once, from the rows the page holds (``viz/query_flip.py``), while the server's run for the pick is under way.

A small component (``components/lens_chart/follow.js``, loaded with the chart's own module) watches the box's
text and, when a choice is made, flips the chart to that query as the chart's own slider does
(``components/lens_chart/query_rows.js``). The figure the server then sends for that query shows what the page
shows already (the same frame, rows and query, named by ``viz.query_flip.with_flip``), so the chart does not draw
it again: the pick's last work in the page is Streamlit's own update of the widgets. Without the rows (a text too
long to send them) or without JavaScript (AppTest), the server's figure is drawn as before. Glue, no computation.
"""

from __future__ import annotations

import json

import streamlit as st

from .chart import LOADER
from .switch import element_class

FOLLOW_CLASS = "lens-follow"  # chart.js hands an element holding this to follow.js
KEY = "lens_query_follow"

# drawn by the charts' own loader (the script sent with each element stays small): chart.js sees FOLLOW_CLASS
_component = st.components.v2.component(
    "attention_lens_follow", html=f'<span class="{FOLLOW_CLASS}"></span>', js=LOADER, isolate_styles=False
)


def query_box(box: str, chart: str, chosen: int, live: str) -> None:
    """Flip the chart that has the key ``chart`` to each query chosen in the selectbox that has the key ``box`` (its
    options' labels start with "i:"), and show that query in the live temperature that has the key ``live`` (when
    it is open); ``chosen``: the server's choice (a new one makes the page look again for the box, which a rerun may
    have put in a new element)."""
    classes = {"box": element_class(box), "chart": element_class(chart), "live": element_class(live)}
    text = json.dumps({**classes, "chosen": int(chosen)})
    _component(key=KEY, data=text.encode("utf-8"))  # bytes: see ui/switch.py
