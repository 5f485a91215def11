"""The views' show and hide, done in the browser: a click on the View control shows its view in the click's frame.

Every view has a box in the page (app.py, ``BOX_CLASS`` + its name); the views not chosen are hidden by CSS
(``ui.ahead.HIDDEN_STYLE``). That CSS used to name the hidden boxes, so it changed only when the server's run for
the click came back: a view kept in the page (drawn before, nothing it shows changed) waited for that answer to
be shown. Here the CSS keys every box on an attribute of the page's <body> (``ATTRIBUTE``), and a small component
(``components/lens_view/view.js``) sets that attribute from the control itself, as React marks the option chosen
(its aria-checked): the page shows a kept view before the server has heard of the click, and a first visit shows
its box (and what the server then sends) without the old view lingering. Until the component has run (or with no
JavaScript, as in Streamlit's AppTest) the server's own choice holds (``css``'s fallback rule). Glue, no
computation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import streamlit as st

from .ahead import HIDDEN_STYLE

ATTRIBUTE = "data-lens-view"  # on <body>: the view the View control shows
FOLDER = Path(__file__).resolve().parent / "components" / "lens_view"
KEY = "lens_view_follow"


def element_class(key: str) -> str:
    """The CSS class Streamlit gives the element of the widget, container or component that has ``key``."""
    return f"st-key-{key}"


def css(views: Sequence[str], box: str, chosen: str) -> str:
    """The CSS that hides every view's box (``box`` + its name) but the one ``ATTRIBUTE`` names; before the
    attribute is set, every box but ``chosen``'s (the server's choice). One rule (a switch resends it: 1 KB)."""
    named = [f'body[{ATTRIBUTE}]:not([{ATTRIBUTE}="{view}"]) {box}{view}' for view in views]
    before = [f"body:not([{ATTRIBUTE}]) {box}{view}" for view in views if view != chosen]
    return f"{', '.join(named + before)} {{{HIDDEN_STYLE}}}"


_component = st.components.v2.component(
    "attention_lens_view",
    html="<span></span>",
    js=(FOLDER / "view.js").read_text(encoding="utf-8"),
    isolate_styles=False,
)


def follow(views: Sequence[str], control: str, chosen: str, default: str) -> None:
    """The component that keeps ``ATTRIBUTE`` on the option chosen in the segmented control whose element has
    the CSS class ``control`` (its n-th option is ``views[n]``; none chosen: ``default``). ``chosen``: the
    server's choice, used while the control is not in the page."""
    # JSON as bytes, which Streamlit forwards as they are: a dict (or a str) is first checked for dataframes, which
    # imports pandas and pyarrow into the server (its RSS +65 MB after the first page, measured)
    text = json.dumps({"views": list(views), "control": control, "chosen": chosen, "default": default})
    _component(key=KEY, data=text.encode("utf-8"))
