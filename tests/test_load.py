"""Issue 8, load: ten browser sessions interact with one server for a minute, with no errors.

The engine is scripts/load_test.py (one Chromium, ten contexts, asyncio); each session flips the
scaling control and waits for the "Core vs model" chart to show the new numbers. Latency and memory are
printed, not asserted against a target: on a 2-core machine ten Chromium renderers take most of the
CPU, so the latency measures the machine more than the server. Memory is asserted loosely: after
the sessions close, the server holds no more than its peak and at most a bounded amount over its
warm baseline (caches are bounded; a leak would grow with every session).
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.browser import ROOT, chromium_path

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SESSIONS = 10
SECONDS = 60.0
VIEW = "compare"  # one chart per page: ten pages of the 12-chart derivation view take ~3.5 min on 2 cores
RETAINED_MB = 768  # caches (captures, traces, the model's allocations) stay below this after a run


def _engine():
    spec = importlib.util.spec_from_file_location("load_test", ROOT / "scripts" / "load_test.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Alone: beside the suite's other browser tests the ten pages lost clicks (a page waited past its 120 s for the
# chart), and those tests' own waits for an idle browser ran out.
@pytest.mark.alone
def test_ten_sessions_for_a_minute():
    if not chromium_path():
        pytest.skip("Debian chromium is not installed (make test installs it: apt-get install chromium)")
    engine = _engine()
    numbers = engine.run(sessions=SESSIONS, seconds=SECONDS, settle_s=8.0, timeout_s=120.0, view=VIEW)
    print("\n" + engine.summary(numbers))
    assert numbers["errors"] == 0, numbers["error_samples"]
    assert numbers["interaction_s"] >= SECONDS
    assert numbers["min_updates_per_session"] >= 1  # every session was answered
    assert numbers["rss_after_mb"] <= numbers["rss_peak_mb"]
    assert numbers["rss_after_mb"] - numbers["rss_baseline_mb"] < RETAINED_MB, numbers


def test_a_failed_click_reports_the_page_s_connection_state():
    """A click that times out on a disabled control (Streamlit disables every widget while its websocket is not
    CONNECTED) is reported with the connection state the page showed, or why it could not be read."""
    import asyncio

    engine = _engine()

    class Page:
        def __init__(self, answer):
            self.answer, self.asked = answer, []

        async def evaluate(self, script):
            self.asked.append(script)
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

    page = Page("DISCONNECTED_FOREVER")
    assert asyncio.run(engine._connection(page)) == "DISCONNECTED_FOREVER"
    assert page.asked == [engine.CONNECTION] and "data-test-connection-state" in engine.CONNECTION
    assert asyncio.run(engine._connection(Page(RuntimeError("page closed")))) == "unreadable (RuntimeError)"


def test_a_failed_click_carries_the_page_s_last_console_error():
    """Streamlit's frontend logs why it gave its connection up (a websocket message it could not process) as a
    console error: a failed click's sample carries the page's last one, and nothing from other pages or levels."""
    from types import SimpleNamespace

    engine = _engine()

    class Page:
        def on(self, event, handler):
            self.event, self.handler = event, handler

    page, other = Page(), Page()
    engine._watch_console(page)
    engine._watch_console(other)
    assert page.event == "console" and engine._last_console_error(page) == ""
    page.handler(SimpleNamespace(type="error", text="Failed to process a Websocket message. Cached ForwardMsg MISS"))
    page.handler(SimpleNamespace(type="warning", text="Heartbeat ack not received"))
    other.handler(SimpleNamespace(type="error", text="another page"))
    assert (
        engine._last_console_error(page)
        == "; last console error: Failed to process a Websocket message. Cached ForwardMsg MISS"
    )
