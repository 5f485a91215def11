"""A view drawn ahead (ui/ahead.py) gives way to a click that comes while it is drawn: every chart drawn
(ui/chart.py ``draw``) first calls ``yield_to_click``. Streamlit glue only, with nothing of the app's imported, so
that the chart stays light to import."""

from __future__ import annotations

import threading
from contextlib import contextmanager

from streamlit.runtime.scriptrunner_utils.script_requests import ScriptRequestType
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx


class Yielded(BaseException):
    """A view drawn ahead stopped for a click that came meanwhile (``yield_to_click``). Not an ``Exception``: the
    views' guard, which turns every error into a message, lets it through, as it does Streamlit's rerun."""


_run = threading.local()  # this script thread's run: drawing a view ahead or not (``drawing``)


@contextmanager
def drawing(on: bool = True):
    """Mark this run as drawing a view ahead (when ``on``), for ``yield_to_click``."""
    before = getattr(_run, "ahead", False)
    _run.ahead = on
    try:
        yield
    finally:
        _run.ahead = before


def click_waiting() -> bool:
    """Whether this session's page has asked for another run while this one goes on (a click, a key): Streamlit
    holds that request until the run ends (a fragment's rerun does not cut another fragment's run short)."""
    requests = getattr(get_script_run_ctx(), "script_requests", None)
    return getattr(requests, "_state", None) == ScriptRequestType.RERUN


def yield_to_click() -> None:
    """In a run drawing a view ahead, stop before the next chart when a click is waiting (``Yielded``): the click
    waited for the whole view (at 64 tokens a head click 1.3 s after the page settled: 0.54 s instead of 0.2 s);
    now it waits for one chart at most. The view stays half drawn and hidden; a switch to it draws it again."""
    if getattr(_run, "ahead", False) and click_waiting():
        raise Yielded
