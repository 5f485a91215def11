"""Look again later, from the page: a fragment that waits for background work draws ``rerun_after``; the page
reruns that fragment alone once the wait is over (``components/lens_wait/wait.js``).

The header's all-layers check of a long input runs in the background (``ui.compute.replay_if_ready``). It used
to be polled by a ``run_every`` fragment, and a timer of Streamlit's can only be stopped by a full rerun of the
page: the check's arrival reran the whole script, which sent the shown view again (2.7 MB at 512 MiniLM tokens)
and cleared every view kept in the page. A trigger of a component drawn in a fragment reruns only that fragment,
as any widget there does: the fragment draws the check once it is done, and no waiter, so nothing waits on.
With no JavaScript (Streamlit's AppTest) nothing reruns; the next run of the page shows the check. Glue only.
"""

from __future__ import annotations

import json
from pathlib import Path

import streamlit as st

FOLDER = Path(__file__).resolve().parent / "components" / "lens_wait"

_component = st.components.v2.component(
    "attention_lens_wait",
    html="<span></span>",
    js=(FOLDER / "wait.js").read_text(encoding="utf-8"),
    isolate_styles=False,
)


def _waited() -> None:
    """The trigger's callback: nothing to do; the fragment that drew the waiter reruns after it, as for any widget."""


def rerun_after(ms: int, key: str) -> None:
    """Rerun the fragment this is drawn in ``ms`` milliseconds from now (one waiter per ``key`` in the page)."""
    waits = st.session_state.get("_waits", 0) + 1  # a new round each drawing: the page waits again
    st.session_state["_waits"] = waits
    _component(key=key, data=json.dumps({"ms": int(ms), "round": waits}).encode(), on_due_change=_waited)
