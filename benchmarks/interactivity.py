"""Section "interactivity" (issue 12): a click until the updated page is painted, per control, model and size.

    .venv/bin/python -m benchmarks.interactivity [--app-dir DIR] [--quick] [--json out.json]
    .venv/bin/python -m benchmarks --sections interactivity          # inside make bench

What is measured, in headless Debian Chromium (Playwright) against a warm server (``streamlit run
app.py`` of ``--app-dir`` / $ATTENTION_LENS_APP_DIR / this checkout, see ``benchmarks/appserver.py``):

- per model (MiniLM, SmolLM2) and token count n (16, 64, 256, 512; SmolLM2 also 1,024 when the app
  computes that many: the table shows the count the app's "Tokens" metric reports), one page opened
  by a link that carries the settings (``text``, ``max_tokens``, ``model``), then these changes,
  ``--repeats`` times each (default 5), each on a value not shown before on that page:
  view-only: Head (+1 on the "Head" slider, keyboard ArrowRight), Query (Query inspector's "Query
  token" selectbox, the next token), Query picked (the same box, ``PICK_STRIDE`` tokens on: not built ahead), Query
  flipped (a click on the step-through's own query slider, ``PICK_STRIDE`` steps on: switched in the browser alone), View (the "View" segmented control: Heads & layers, Query inspector, Core vs
  model, Derivation), View after reading (the same switches, each after 3 s on the page, from the derivation just
  after a layer change: the app draws the views kept in the page ahead while nobody clicks), Statistic (the next of the statistic buttons above Heads & layers' overview chart, switched in the
  browser alone; an older app's "Statistic" selectbox where there are no buttons), Flip (a click on the next head
  of the plotly slider inside Heads & layers' one-head-at-a-time chart: switched in the browser alone);
  recompute: scaling (the "Divide the scores by" radio), Temperature (slider, with scaling set to the
  temperature), Mask and Positional encoding (selectboxes), Fill (radio);
- opening a link at n (the model already loaded by a warm-up page): navigation start until the first
  chart is painted, and until the page settled; the median of ``--repeats`` opens (item 3 asks for medians), each
  of a text the server has not seen, in a fresh page, once the server has gone quiet (``benchmarks/open_link.py``'s
  method; the last of them is the page the changes below are made on). Until the twenty-seventh session this was
  one open, right after the page of the size before had closed;
- websocket bytes per change: the payload lengths of every frame the page received (Chromium CDP
  ``Network.webSocketFrameReceived``; these are uncompressed message bytes, before any
  permessage-deflate), between the input and the settled page;
- the server's peak RSS (psutil: the streamlit process and its children, sampled every 0.2 s) while
  each n was open;
- the load tests: ``benchmarks/load_protocol.py`` (30 protocol-level sessions, 60 s) and
  ``scripts/load_test.py`` (10 browser sessions, 60 s).

Controls are found by their accessible label (``page.get_by_label(label, exact=True)``: a slider's
group, a radio group, a selectbox's combobox), so they may move (sidebar, main area, fragments); a
control that is missing (also after opening collapsed expanders) is reported as n/a, not a crash.
Options are chosen by position (the next option of a radio group or selectbox; ``query_pick``: ``PICK_STRIDE``
options on), not by their text.

Click-to-paint, detected generically (no knowledge of which chart should change): a script installed
before the page loads keeps ``lastChange``, the ``performance.now()`` of the last DOM mutation
(MutationObserver on the whole document, ignoring Streamlit's header/toolbar, its running indicator
``[data-testid="stStatusWidget"]``, plotly's hover layer and tooltips) or ``plotly_afterplot`` event of
any ``.js-plotly-plot`` (hooked as plots appear), and ``lastPaint``, the time of the second
``requestAnimationFrame`` after each such change (the frame after it was painted). The input time is
the capturing ``pointerdown``/``keydown`` listener's ``performance.now()``. The page has settled when
(a) the server's ``script_finished`` ForwardMsg arrived over the websocket after the input (decoded
from the CDP frames; after 3 s without one the change is taken as client-only), (b) the running
indicator is gone and (c) nothing changed for 300 ms. The time reported is ``lastPaint - input`` (or
``lastChange - input`` when no frame followed): the last paint-related change before the page went
idle. Before each control's clicks the page is scrolled so that the view's main chart is in the middle of
the screen (``LOOK``: the derivation's softmax weights, else the view's first chart), as a person looks
at a chart while changing it; since the sixth session the app draws a chart out of view only when it
comes near the view, so what is timed is what is on screen (both "before" and "after" are measured
this way). All times are medians of the repeats (the machine is shared: expect noise).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import sys
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import HERE, Config, SectionResult, Target, table

TITLE = "7. Interactivity (issue 12): click to painted chart, opening a link, websocket bytes, memory, load"
MODELS = ("minilm", "smollm2")
SIZES = (16, 64, 256, 512)
LARGE = {"smollm2": (1024,)}  # measured when the app computes that many tokens
QUICK_SIZES = (64, 512)
QUIET_MS = 300.0
NO_SERVER_S = 3.0
URL_TEXT_CHARS = 1950  # a link keeps at most 2,000 characters of text (ui/settings.py)
WORDS = "I am a cat. It is on a mat. We go to it so do you. "  # ~2.7 characters a token (MiniLM and SmolLM2)
DENSE = "a.b.c.d."  # one character a token: 1,024 SmolLM2 tokens fit in a link
VIEW_ONLY, RECOMPUTE = "view-only", "recompute"
ACTIONS = (  # (name, kind, label of the control) in the order they are measured on one page
    ("head", VIEW_ONLY, "Head"),
    ("head_paused", VIEW_ONLY, "Head"),
    ("scaling", RECOMPUTE, "Divide the scores by"),
    ("temperature", RECOMPUTE, "Temperature"),
    ("mask", RECOMPUTE, "Mask"),
    ("encoding", RECOMPUTE, "Positional encoding (own core)"),
    ("fill", RECOMPUTE, "Fill for blocked scores"),
    ("view", VIEW_ONLY, "View"),
    ("view_read", VIEW_ONLY, "View"),
    ("statistic", VIEW_ONLY, "Statistic"),
    ("flip", VIEW_ONLY, "Head (the slider inside the one-head-at-a-time chart)"),
    ("query", VIEW_ONLY, "Query token"),
    ("query_pick", VIEW_ONLY, "Query token"),
    ("query_flip", VIEW_ONLY, "Query (the slider inside the step-through chart)"),
)
NEEDS_VIEW = {
    "statistic": "Heads & layers",
    "query": "Query inspector",
    "query_pick": "Query inspector",
    "query_flip": "Query inspector",
    "flip": "Heads & layers",
}  # the view a control lives in
QUERY_CHART = ".st-key-fig_query"  # the Query inspector's step-through (ui/views/query.py), its slider in the page
# "query_flip": a click on the step-through's own query slider, PICK_STRIDE steps on each time (viz/query_flip.py:
# the rows of every query are in the page; the chart fills the chosen one without a server run). Added in the
# thirtieth session. Up to viz.query_flip.FLIP_BYTES of rows only: at longer texts the chart has no slider (n/a).
# "query_pick": the query picked from the box PICK_STRIDE options on each time (a reader choosing a word), not the
# next one ("query"), which the server has built ahead while the page was read (ui/prefetch.py: the queries next
# to the one shown). From 64 tokens on, no pick is a query shown before on the page or next to one (at 16 tokens
# some are). Added in the twenty-ninth session; earlier runs have no such column.
PICK_STRIDE = 9
VIEW_STEPS = ("Heads & layers", "Query inspector", "Core vs model", "Derivation", "Heads & layers")
# "view_read": the same switches, each after READ_S seconds on the page (a person looks at a view before leaving
# it; the app draws the kept views ahead once nobody has clicked for a second, ui/ahead.py), starting from the
# derivation just after a layer change (which clears the views kept in the page): first visits, as in "view".
READ_S = 3.0
# "head_paused": Head +1, each after PAUSED_S seconds on the page (a person who looks a little before the next
# click): the page has begun to draw a kept view ahead (ui/ahead.py, after a second), and the click may wait for
# that view's run. Added in the thirty-fourth session, when drawing ahead was turned on by default.
PAUSED_S = 1.3
BUDGETS = {  # kind -> (seconds at 64 tokens, seconds at 512 tokens), issue 12 item 1 (MiniLM; SmolLM2 2x)
    VIEW_ONLY: (0.25, 0.6),
    RECOMPUTE: (0.4, 1.0),
}
BYTES_BUDGET = {"head": 1.5e6, "view": 1.5e6, "view_read": 1.5e6}
OPEN_BUDGET_S = 3.0

WATCH = r"""
(() => {
  if (window.__lens) return;
  const L = window.__lens = {armed: false, inputAt: null, lastChange: 0, lastPaint: 0, changes: 0,
                             afterplots: 0, lastPlotPaint: null, firstChartAt: null};
  const IGNORE = '[data-testid="stHeader"], [data-testid="stToolbar"], [data-testid="stStatusWidget"], ' +
                 '[data-testid="stDecoration"], .hoverlayer, [role="tooltip"], [data-baseweb="tooltip"]';
  const ignored = (node) => {
    const el = node && (node.nodeType === 1 ? node : node.parentElement);
    return !el || !!el.closest(IGNORE) || (el.matches && el.matches(IGNORE));
  };
  const mark = () => {
    L.lastChange = performance.now(); L.changes++;
    requestAnimationFrame(() => requestAnimationFrame(() => { L.lastPaint = performance.now(); }));
  };
  const hook = () => {
    for (const el of document.querySelectorAll('.js-plotly-plot')) {
      if (!el.__lensHooked && typeof el.on === 'function') {
        el.__lensHooked = true;
        el.on('plotly_afterplot', () => { L.afterplots++; mark();
          requestAnimationFrame(() => requestAnimationFrame(() => { L.lastPlotPaint = performance.now(); })); });
      }
      if (L.firstChartAt === null && el.querySelector('svg.main-svg')) {
        L.firstChartAt = performance.now();
      }
    }
  };
  new MutationObserver((records) => {
    for (const r of records) {
      if (r.type === 'childList') {
        const nodes = [...r.addedNodes, ...r.removedNodes];
        if (nodes.length && nodes.every(ignored)) continue;
      }
      if (!ignored(r.target)) { mark(); break; }
    }
    hook();
  }).observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
  setInterval(hook, 100);
  const input = () => { if (L.armed && L.inputAt === null) L.inputAt = performance.now(); };
  document.addEventListener('pointerdown', input, true);
  document.addEventListener('keydown', input, true);
})();
"""
STATE = """() => { const L = window.__lens || {}; return {now: performance.now(), inputAt: L.inputAt,
  lastChange: L.lastChange, lastPaint: L.lastPaint, changes: L.changes, afterplots: L.afterplots,
  lastPlotPaint: L.lastPlotPaint,
  firstChartAt: L.firstChartAt, running: !!document.querySelector('[data-testid="stStatusWidget"]'),
  plots: document.querySelectorAll('.js-plotly-plot').length,
  errors: document.querySelectorAll('[data-testid="stException"], [data-testid="stAlertContentError"]').length}; }"""
IDLE = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
ARM = (
    "() => { const L = window.__lens; L.armed = true; L.inputAt = null; L.changes = 0; L.afterplots = 0; "
    "L.lastPlotPaint = null; }"
)
TOKENS = """() => { for (const m of document.querySelectorAll('[data-testid="stMetric"]')) {
  const label = m.querySelector('[data-testid="stMetricLabel"]'), value = m.querySelector('[data-testid="stMetricValue"]');
  if (label && value && label.innerText.trim() === 'Tokens') return value.innerText.trim(); } return null; }"""


# ---------------------------------------------------------------- pure helpers


def text_for(n: int) -> str:
    """A text of at least n tokens (MiniLM and SmolLM2) that fits in a link: short words, or one
    character a token beyond what words can hold. Different n give different texts."""
    chars = min(URL_TEXT_CHARS, int(n * 3.2) + 24)
    if n * 2.9 <= URL_TEXT_CHARS:
        return (WORDS * (chars // len(WORDS) + 1))[:chars].strip()
    chars = min(URL_TEXT_CHARS, n + 64)
    return (DENSE * (chars // len(DENSE) + 1))[:chars]


def link(base: str, model: str, n: int, **extra) -> str:
    params = {"text": text_for(n), "max_tokens": n, **extra}
    if model != "minilm":
        params["model"] = model
    return f"{base}/?{urllib.parse.urlencode(params)}"


def frame_bytes(payload: str, opcode: int) -> int:
    """Bytes of one websocket frame as CDP reports it (binary frames come base64-encoded)."""
    if opcode == 2:
        return len(payload) * 3 // 4 - (payload.endswith("=") + payload.endswith("=="))
    return len(payload.encode())


def is_script_finished(payload: str, opcode: int) -> bool:
    """Whether a received frame is Streamlit's ``script_finished`` ForwardMsg of a run that ended. A run cut
    short for the rerun that follows it (``FINISHED_EARLY_FOR_RERUN``: a widget callback that names the fragments
    to rerun, app.py) is not the end of the click's answer."""
    if opcode != 2:
        return False
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    msg = ForwardMsg()
    try:
        msg.ParseFromString(base64.b64decode(payload))
    except Exception:  # noqa: BLE001 - not a ForwardMsg: not the end of a run
        return False
    return msg.WhichOneof("type") == "script_finished" and msg.script_finished != msg.FINISHED_EARLY_FOR_RERUN


def med(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(statistics.median(values)) if values else None


def budget_for(kind: str, n: int, model: str) -> float | None:
    """The issue's budget for a change of ``kind`` at n tokens (64 and 512 only), doubled for SmolLM2."""
    at64, at512 = BUDGETS[kind]
    budget = {64: at64, 512: at512}.get(n)
    if budget is None:
        return None
    return budget * (2 if model == "smollm2" else 1)


def fmt_s(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def fmt_mb(value: float | None) -> str:
    return "n/a" if value is None else f"{value / 1e6:.2f}"


# ---------------------------------------------------------------- the browser side


@dataclass
class Frames:
    """Websocket frames the page received, counted from CDP events."""

    bytes: int = 0
    finished: int = 0

    def on_frame(self, params: dict) -> None:
        response = params.get("response", {})
        payload, opcode = response.get("payloadData", ""), int(response.get("opcode", 1))
        self.bytes += frame_bytes(payload, opcode)
        if is_script_finished(payload, opcode):
            self.finished += 1


class Page:
    """One page of the app with the watcher installed and its websocket frames counted."""

    def __init__(self, browser, timeout_s: float):
        self.page = browser.new_page(viewport={"width": 1366, "height": 900})
        self.page.add_init_script(WATCH)
        self.frames = Frames()
        cdp = self.page.context.new_cdp_session(self.page)
        cdp.on("Network.webSocketFrameReceived", self.frames.on_frame)
        cdp.send("Network.enable")
        self.timeout_s = timeout_s

    def state(self) -> dict:
        return self.page.evaluate(STATE)

    def settle(self, since_finished: int, armed: bool = True) -> dict:
        """Wait until the page settled (see the module doc); returns the last state."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            s = self.state()
            start = s["inputAt"] if armed else 0.0
            if start is not None:
                quiet = s["now"] - max(s["lastChange"] or 0.0, start) >= QUIET_MS
                server_done = self.frames.finished > since_finished
                client_only = s["now"] - start >= NO_SERVER_S * 1e3
                if quiet and not s["running"] and (server_done or client_only):
                    s["server_run"] = server_done
                    return s
            if time.monotonic() > deadline:
                raise TimeoutError(f"the page did not settle within {self.timeout_s:.0f} s")
            self.page.wait_for_timeout(50)

    def open(self, url: str) -> dict:
        finished = self.frames.finished
        self.page.goto(url, timeout=self.timeout_s * 1e3)
        self.page.wait_for_function(
            "() => window.__lens && window.__lens.firstChartAt !== null", timeout=self.timeout_s * 1e3, polling=50
        )
        s = self.settle(finished, armed=False)
        return {
            "first_chart_s": s["firstChartAt"] / 1e3,
            "settled_s": max(s["lastPaint"], s["lastChange"]) / 1e3,
            "plots": s["plots"],
            "errors": s["errors"],
            "tokens": self.page.evaluate(TOKENS),
        }

    def measure(self, act) -> dict:
        """Arm, run ``act()`` (which performs exactly one input), wait until settled; the click's numbers."""
        finished, received = self.frames.finished, self.frames.bytes
        self.page.evaluate(ARM)
        act()
        s = self.settle(finished)
        end = max(s["lastPaint"], s["lastChange"])
        return {
            "painted_s": max(0.0, end - s["inputAt"]) / 1e3,
            # the last chart drawn (plotly_afterplot) until the frame after it: the chart alone, not the page
            "chart_s": None if s["lastPlotPaint"] is None else max(0.0, s["lastPlotPaint"] - s["inputAt"]) / 1e3,
            "bytes": self.frames.bytes - received,
            "server_run": s["server_run"],
            "dom_changes": s["changes"],
            "afterplots": s["afterplots"],
            "plots": s["plots"],
            "errors": s["errors"],
        }

    def look(self) -> None:
        """Scroll the view's main chart into view and let the page settle (``LOOK``)."""
        self.page.evaluate(LOOK)
        self.page.wait_for_timeout(QUIET_MS)
        self.settle(self.frames.finished, armed=False)

    # -- finding controls by label

    def control(self, label: str):
        """The element labelled ``label`` (slider group, radio group, combobox), or None."""
        found = self.page.get_by_label(label, exact=True)

        def visible():
            shown = [found.nth(i) for i in range(found.count()) if found.nth(i).is_visible()]
            return shown[0] if shown else None

        for _ in range(10):  # a rerun may be redrawing the page: give the control two seconds to be shown
            if visible() is not None:
                return visible()
            self.page.wait_for_timeout(200)
        if visible() is None:  # not on the page, or inside a collapsed expander: open them all
            for summary in self.page.locator("details:not([open]) > summary").all():
                try:
                    summary.click(timeout=2000)
                except Exception:  # noqa: BLE001 - an expander we cannot open stays closed
                    pass
            self.page.wait_for_timeout(400)
        return visible()

    def change(self, label: str, step: int) -> dict | None:
        """Change the control ``label`` once (to a value not shown before when ``step`` grows); None if missing."""
        el = self.control(label)
        if el is None:
            return None
        role = el.get_attribute("role") or ""
        if role == "combobox" or el.evaluate("e => e.tagName") in ("INPUT", "SELECT"):
            el.click()
            if el.get_attribute("aria-expanded") != "true":  # React Aria's combobox opens on ArrowDown
                el.press("ArrowDown")
            listbox = el.get_attribute("aria-controls")
            options = (
                self.page.locator(f'[id="{listbox}"] [role="option"]') if listbox else self.page.get_by_role("option")
            )
            options.first.wait_for(timeout=10_000)
            count = options.count()
            target = options.nth(step % count if count else 0)
            return self.measure(lambda: target.click())
        if role == "radiogroup":
            radios = el.get_by_role("radio")
            count = radios.count()
            if count < 2:
                return None
            checked = [i for i in range(count) if radios.nth(i).is_checked()]
            current = checked[0] if checked else 0
            target = radios.nth((current + 1) % count)
            target = _clickable(target)
            return self.measure(lambda: target.click())
        thumb = el.locator('[role="slider"], input[type="range"]').first
        if thumb.count() == 0:
            return None
        value, high = thumb.get_attribute("aria-valuenow"), thumb.get_attribute("aria-valuemax")
        key = "ArrowLeft" if value is not None and high is not None and float(value) >= float(high) else "ArrowRight"
        thumb.focus()
        return self.measure(lambda: self.page.keyboard.press(key))

    def flip(self, head: int, within: str = "") -> dict | None:
        """Click step ``head`` of the plotly slider of the Heads view's flip chart, or of the chart inside the
        element ``within`` (a CSS selector: the Query inspector's step-through, ``QUERY_CHART``); a change in the
        browser alone: no server run is expected, so the page settles after ``NO_SERVER_S``. None if missing."""
        chart = self.page.locator(f"{within} .js-plotly-plot", has=self.page.locator(".slider-container")).first
        self._bring_near(chart, within)
        try:  # the view may still be drawing after the switch to it: wait for the chart and an idle page
            chart.wait_for(state="attached", timeout=self.timeout_s * 1e3)
            self.page.wait_for_function(IDLE, timeout=self.timeout_s * 1e3, polling=100)
        except Exception:  # noqa: BLE001 - no flip chart on this page: reported as n/a
            return None
        slider = chart.locator(".slider-container").first
        slider.scroll_into_view_if_needed()  # boxes are viewport coordinates: the slider must be on screen
        self.page.wait_for_timeout(300)
        steps = slider.get_by_text(str(head), exact=True)
        if steps.count() == 0:  # a long slider's steps have no label (viz/query_flip.py): the step's own tick
            steps = slider.locator(".slider-tick-rect").nth(head)
        rail = chart.locator(".slider-rail-touch-rect").first.bounding_box()
        if steps.count() == 0 or rail is None:
            return None
        box = steps.first.bounding_box()
        x, y = box["x"] + box["width"] / 2, rail["y"] + rail["height"] / 2
        return self.measure(lambda: self.page.mouse.click(x, y))

    def _bring_near(self, chart, within: str) -> None:
        """A chart is drawn only once it comes near the screen (chart.js): when no chart with a slider is drawn yet
        (the view's first chart, scrolled to by ``look``, is a tall grid above it), scroll the view's charts into
        view one by one until one is (before the thirty-ninth session the flip was then n/a)."""
        if chart.count():
            return
        boxes = self.page.locator(f"{within} .lens-chart")
        for i in range(boxes.count()):
            if not boxes.nth(i).is_visible():  # a chart of a view kept hidden
                continue
            boxes.nth(i).scroll_into_view_if_needed()
            self.page.wait_for_timeout(400)
            if chart.count():
                return

    def statistic(self, step: int) -> dict | None:
        """Click button ``step`` (mod their count) of the buttons above Heads & layers' overview chart, which
        switch the statistic in the browser alone; None if missing (an app whose Statistic is a selectbox
        is measured through ``change`` instead)."""
        overview = self.page.locator(".st-key-fig_overview .lens-chart").first
        if overview.count():  # drawn only when near the screen (chart.js): brought there first
            overview.evaluate("el => el.scrollIntoView({block: 'center'})")
        chart = self.page.locator(".js-plotly-plot", has=self.page.locator(".updatemenu-container")).first
        try:
            chart.wait_for(state="attached", timeout=10_000)
            self.page.wait_for_function(IDLE, timeout=self.timeout_s * 1e3, polling=100)
        except Exception:  # noqa: BLE001 - no buttons: the app's Statistic selectbox, if any
            return self.change("Statistic", step)
        chart.evaluate("el => el.scrollIntoView({block: 'center'})")
        self.page.wait_for_timeout(300)
        buttons = chart.locator(".updatemenu-button")
        count = buttons.count()
        if count < 2:
            return None
        target = buttons.nth(step % count)
        return self.measure(lambda: target.click())

    def pick(self, label: str, option: str) -> dict | None:
        """Click the option named ``option`` of the radio group / segmented control ``label``; None if missing."""
        el = self.control(label)
        if el is None:
            return None
        target = el.get_by_role("radio", name=option, exact=True)
        if target.count() == 0:
            target = el.get_by_text(option, exact=True)
        if target.count() == 0:
            return None
        target = _clickable(target.first)
        return self.measure(lambda: target.click())

    def ensure(self, label: str, option: str) -> None:
        """Select ``option`` of the radio group / segmented control ``label`` unless it is selected (unmeasured)."""
        el = self.control(label)
        if el is None:
            return
        target = el.get_by_role("radio", name=option, exact=True)
        if target.count() and not target.first.is_checked():
            self.pick(label, option)

    def restore(self, label: str) -> None:
        """Put a selectbox back on its first option (unmeasured), so later controls see the defaults."""
        el = self.control(label)
        if el is None or (el.get_attribute("role") or "") != "combobox":
            return
        try:
            self.change(label, 0)
        except Exception:  # noqa: BLE001 - a failed restore only changes what later clicks start from
            pass


def _clickable(target):
    """A radio's visually hidden ``<input>`` (1 px, clipped) takes no clicks: its ``<label>`` does."""
    if target.evaluate("e => e.tagName") == "INPUT":
        label = target.locator("xpath=ancestor::label[1]")
        if label.count():
            return label
    return target


# A person looks at a chart while changing it: before a control's clicks, the view's main chart is scrolled
# into the middle of the screen (derivation: the softmax weights; another view: its first chart).
LOOK = """() => { const shown = el => el.offsetParent !== null
    && getComputedStyle(el).getPropertyValue('--lens-hidden').trim() !== '1';  // not in a view kept hidden
  const charts = [...document.querySelectorAll('.js-plotly-plot, .lens-chart')].filter(shown);
  const main = [...document.querySelectorAll('.st-key-fig_weights')].find(shown)
    || charts.find(el => el.data && el.data[0] && el.data[0].name === 'weights') || charts[0];
  if (main) main.scrollIntoView({block: 'center'});
  return Boolean(main); }"""


def open_summary(samples: list[dict]) -> dict:
    """The opens of one size as one row: medians of the first chart and the settled page, every first chart kept."""
    return {
        "first_chart_s": med([s["first_chart_s"] for s in samples]),
        "settled_s": med([s["settled_s"] for s in samples]),
        "first_chart_samples_s": [s["first_chart_s"] for s in samples],
        "plots": samples[-1]["plots"],
        "errors": sum(s["errors"] for s in samples),
        "tokens": samples[-1]["tokens"],
    }


def measure_page(
    browser,
    base: str,
    model: str,
    n: int,
    repeats: int,
    timeout_s: float,
    rss=None,
    actions=None,
    server_pid: int | None = None,
) -> dict:
    """Open ``repeats`` links at n tokens (the last page stays) and run every action ``repeats`` times on it;
    returns the row's numbers. ``server_pid``: wait for a quiet server before each open."""
    from .open_link import open_fresh, wait_quiet  # (open_link imports this module)

    mark = time.monotonic()
    # texts of their own, each page closed: the last open, below, is the page the changes are made on
    opens = [open_fresh(browser, base, model, n, i, server_pid, timeout_s) for i in range(1, repeats)]
    if server_pid is not None:
        wait_quiet(server_pid)
    page = Page(browser, timeout_s)
    row: dict[str, Any] = {"model": model, "n": n, "clicks": {}, "missing": [], "failures": []}
    try:
        opens.append(page.open(link(base, model, n)))
        row["open"] = open_summary(opens)
        row["tokens"] = int(row["open"]["tokens"]) if str(row["open"].get("tokens") or "").isdigit() else None
        for name, kind, label in ACTIONS:
            if actions and name not in actions:
                continue
            samples = []
            try:
                if name in NEEDS_VIEW:
                    page.ensure("View", NEEDS_VIEW[name])
                if name == "view_read":
                    page.ensure("View", "Derivation")
                    page.change("Layer", 1)  # unmeasured: a numbers change, so the other views are first visits
                page.look()
                for i in range(repeats):
                    if name == "view":
                        result = page.pick(label, VIEW_STEPS[i % len(VIEW_STEPS)])
                    elif name == "view_read":
                        page.page.wait_for_timeout(READ_S * 1e3)
                        result = page.pick(label, VIEW_STEPS[i % len(VIEW_STEPS)])
                    elif name == "head_paused":
                        page.page.wait_for_timeout(PAUSED_S * 1e3)
                        result = page.change(label, i + 1)
                    elif name == "flip":
                        result = page.flip(i + 1)
                    elif name == "query_flip":
                        result = page.flip((i + 1) * PICK_STRIDE, within=QUERY_CHART)
                    elif name == "statistic":
                        result = page.statistic(i + 1)
                    elif name == "query_pick":
                        result = page.change(label, (i + 1) * PICK_STRIDE)
                    else:
                        result = page.change(label, i + 1)
                    if result is None:
                        break
                    samples.append({**result, "kind": kind})
                if name in ("mask", "encoding"):
                    page.restore(label)
            except Exception as err:  # noqa: BLE001 - one control's failure leaves the others' numbers
                row["failures"].append(f"{name}: {type(err).__name__}: {str(err).splitlines()[0][:200]}")
            if not samples:
                row["missing"].append(name)
            row["clicks"][name] = samples
    finally:
        page.page.close()
    if rss is not None:
        row["rss_peak_bytes"] = rss.peak_since(mark)
    return row


def summarize_row(row: dict) -> dict:
    """Medians per action: painted seconds, bytes, server runs."""
    out = {}
    for name, kind, _ in ACTIONS:
        samples = row["clicks"].get(name) or []
        out[name] = {
            "kind": kind,
            "count": len(samples),
            "painted_s": med([s["painted_s"] for s in samples]),
            "chart_s": med([s.get("chart_s") for s in samples]),
            "bytes": med([s["bytes"] for s in samples]),
            "errors": sum(s["errors"] for s in samples),
        }
    return out


def run_model(
    model: str, sizes, repeats: int, app_dir, env: dict, timeout_s: float, log_dir: Path | None, actions=None
) -> dict:
    """One server per model: a warm-up page (loads the model), then one page per size."""
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM_ARGS, chromium_path

    from .appserver import RssSampler, app_server

    result: dict[str, Any] = {"model": model, "rows": [], "env": env, "load_average_start": os.getloadavg()}
    with app_server(app_dir, env=env, log_dir=log_dir) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            with RssSampler(server.proc.pid) as rss:
                result["rss_idle_bytes"] = rss.now()
                warm = Page(browser, max(timeout_s, 600.0))
                started = time.perf_counter()
                warm.open(link(server.url, model, 16).replace("max_tokens=16", "max_tokens=12"))
                result["warmup_s"] = time.perf_counter() - started
                warm.page.close()
                result["rss_warm_bytes"] = rss.now()
                for n in sizes:
                    print(f"    {model} n={n}", flush=True)
                    try:
                        row = measure_page(
                            browser, server.url, model, n, repeats, timeout_s, rss, actions, server.proc.pid
                        )
                    except Exception as err:  # noqa: BLE001 - a size that fails is reported, the others go on
                        row = {"model": model, "n": n, "error": f"{type(err).__name__}: {str(err)[:300]}"}
                    row["summary"] = summarize_row(row) if "clicks" in row else {}
                    result["rows"].append(row)
                    if row.get("tokens") is not None and row["tokens"] < n:
                        break  # the app computes no more tokens than this: larger n would repeat it
                result["rss_peak_bytes"] = rss.peak_since(0)
                result["load_average_end"] = os.getloadavg()
        finally:
            browser.close()
    return result


# ---------------------------------------------------------------- the section


def collect(
    app_dir=None,
    models=MODELS,
    sizes=SIZES,
    repeats: int = 5,
    env: dict | None = None,
    load: bool = True,
    load_view: str = "compare",
    quick: bool = False,
    timeout_s: float = 180.0,
    log_dir: Path | None = None,
    actions=None,
) -> dict:
    """Every number of the section (JSON-able). ``actions``: names of ACTIONS to measure (default all)."""
    from .appserver import app_dir as resolve

    folder = resolve(app_dir)
    data: dict[str, Any] = {"app_dir": str(folder), "env": env or {}, "repeats": repeats, "models": {}, "load": {}}
    data["actions"] = list(actions) if actions else None
    data["commit"] = _commit(folder)
    started = time.perf_counter()
    for model in models:
        model_sizes = tuple(sizes) + (() if quick else LARGE.get(model, ()))
        print(f"==> interactivity: {model} at {model_sizes}", flush=True)
        data["models"][model] = run_model(model, model_sizes, repeats, folder, env or {}, timeout_s, log_dir, actions)
    if load:
        from . import load_protocol

        seconds = 30.0 if quick else 60.0
        print(f"==> interactivity: protocol load test (30 sessions, {seconds:.0f} s)", flush=True)
        try:
            data["load"]["protocol"] = load_protocol.run(folder, sessions=30, seconds=seconds, env=env)
        except Exception as err:  # noqa: BLE001
            data["load"]["protocol"] = {"error": f"{type(err).__name__}: {str(err)[:300]}"}
        print(f"==> interactivity: browser load test (10 sessions, {seconds:.0f} s, {load_view} view)", flush=True)
        try:
            data["load"]["browser"] = _browser_load(folder, seconds, load_view, env)
        except Exception as err:  # noqa: BLE001
            data["load"]["browser"] = {"error": f"{type(err).__name__}: {str(err)[:300]}"}
    data["seconds"] = time.perf_counter() - started
    return data


def _browser_load(folder, seconds: float, view: str, env) -> dict:
    import importlib.util

    spec = importlib.util.spec_from_file_location("load_test", HERE.parent / "scripts" / "load_test.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run(sessions=10, seconds=seconds, settle_s=10.0, timeout_s=60.0, view=view, app_dir=folder, env=env)


def _commit(folder: Path) -> str | None:
    import subprocess

    try:
        out = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=30
        )
        dirty = subprocess.run(
            ["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() + (" + uncommitted changes" if dirty else "") if out.returncode == 0 else None


def merge(old: dict, new: dict) -> dict:
    """``old`` with ``new``'s models and load tests put in (runs of one checkout in parts); envs kept per model."""
    out = {
        **old,
        "models": {**old.get("models", {}), **new.get("models", {})},
        "load": {**old.get("load", {}), **new.get("load", {})},
    }
    for part in ("models", "load"):
        for key in new.get(part, {}):
            if isinstance(out[part][key], dict):
                out[part][key]["env"] = new.get("env", {})
    for model, result in new.get("models", {}).items():  # a run of some actions only: merge into the old rows
        previous = old.get("models", {}).get(model)
        if not previous or not new.get("actions"):
            continue
        rows = {row["n"]: row for row in previous["rows"]}
        for row in result["rows"]:
            if row["n"] not in rows or "clicks" not in row or "clicks" not in rows[row["n"]]:
                continue
            kept = rows[row["n"]]
            for name in new["actions"]:
                kept["clicks"][name] = row["clicks"].get(name, [])
                kept["missing"] = [m for m in kept.get("missing", []) if m != name] + (
                    [name] if name in row.get("missing", []) else []
                )
                kept["failures"] = [f for f in kept.get("failures", []) if not f.startswith(name + ":")] + [
                    f for f in row.get("failures", []) if f.startswith(name + ":")
                ]
            kept["summary"] = summarize_row(kept)
        out["models"][model] = previous
    out["seconds"] = old.get("seconds", 0) + new.get("seconds", 0)
    return out


def _per_action(result: dict, cell) -> str:
    """A table of one model's sizes (rows) by action (columns), each cell ``cell(summary of that action)``."""
    rows = [
        [f"{row['n']} ({row.get('tokens') or '?'})", *[cell(row["summary"][name]) for name, _, _ in ACTIONS]]
        for row in result["rows"]
        if "summary" in row and row["summary"]
    ]
    return table(["n (tokens shown)", *[name for name, _, _ in ACTIONS]], rows)


def tables(data: dict, label: str = "") -> str:
    """Markdown: one table per model (rows: n; columns: the actions), then opening, bytes, memory, load."""
    parts = []
    for model, result in data["models"].items():
        headers = [
            "n (tokens shown)",
            *[f"{name} ({'v' if kind == VIEW_ONLY else 'r'})" for name, kind, _ in ACTIONS],
            "open link, median: first chart / settled (s)",
            "server peak RSS (MB)",
        ]
        rows = []
        for row in result["rows"]:
            if "error" in row:
                rows.append([row["n"], f"failed: {row['error'][:80]}", *[""] * (len(headers) - 2)])
                continue
            summary = row["summary"]
            opened = row.get("open", {})
            rows.append(
                [
                    f"{row['n']} ({row.get('tokens') or '?'})",
                    *[fmt_s(summary[name]["painted_s"]) for name, _, _ in ACTIONS],
                    f"{fmt_s(opened.get('first_chart_s'))} / {fmt_s(opened.get('settled_s'))}",
                    f"{row.get('rss_peak_bytes', 0) / 1e6:,.0f}",
                ]
            )
        parts.append(
            f"**{model}{label}**"
            + (f" (server environment {result['env']})" if result.get("env") else "")
            + f": seconds from the input to the last paint (median of "
            f"{data['repeats']}); v = view-only, r = recompute; warm-up {result.get('warmup_s', 0):.0f} s, "
            f"server RSS idle {result.get('rss_idle_bytes', 0) / 1e6:,.0f} MB, after warm-up "
            f"{result.get('rss_warm_bytes', 0) / 1e6:,.0f} MB."
        )
        parts.append(table(headers, rows))
        parts.append(f"**{model}{label}**: websocket bytes received per change (MB, median)")
        parts.append(_per_action(result, lambda summary: fmt_mb(summary["bytes"])))
        parts.append(
            f"**{model}{label}**: seconds from the input to the paint after the last chart drawn (plotly_afterplot), "
            "median of the clicks that drew one (a view switch that shows a view kept in the page draws none); the "
            "page's other elements may change later (the first table)"
        )
        parts.append(_per_action(result, lambda summary: fmt_s(summary.get("chart_s"))))
        problems = [
            f"n={row['n']}: {', '.join(row.get('missing', []))} n/a" for row in result["rows"] if row.get("missing")
        ]
        problems += [f"n={row['n']}: {f}" for row in result["rows"] for f in row.get("failures", [])]
        if problems:
            parts.append("Not measured: " + "; ".join(problems[:12]) + ".")
    load = data.get("load", {})
    if load:
        lines = []
        proto = load.get("protocol")
        if proto and "error" not in proto:
            lines.append(
                [
                    f"protocol: {proto['sessions']} sessions x {proto['seconds']:.0f} s, a change every {proto['interval_s']:.0f} s",
                    proto["changes"],
                    proto["errors"],
                    fmt_s(proto["all"]["p50_s"]),
                    fmt_s(proto["all"]["p95_s"]),
                    f"{proto['rss_single_warm_mb']:,.0f} / {proto['rss_peak_mb']:,.0f} / {proto['rss_after_mb']:,.0f}",
                ]
            )
        elif proto:
            lines.append(["protocol", "failed", proto["error"][:100], "", "", ""])
        browser = load.get("browser")
        if browser and "error" not in browser:
            lines.append(
                [
                    f"browser: {browser['sessions']} sessions x {browser['seconds']:.0f} s ({browser.get('view')} view)",
                    browser["updates"],
                    browser["errors"],
                    fmt_s(browser["latency_p50_s"]),
                    fmt_s(browser["latency_p95_s"]),
                    f"{browser['rss_baseline_mb']:,.0f} / {browser['rss_peak_mb']:,.0f} / {browser['rss_after_mb']:,.0f}",
                ]
            )
        elif browser:
            lines.append(["browser", "failed", browser["error"][:100], "", "", ""])
        parts.append(
            "**Load** (MiniLM; RSS of the server process tree for protocol, of the streamlit process for browser):"
        )
        parts.append(
            table(
                [
                    "test",
                    "changes",
                    "errors",
                    "p50 (s)",
                    "p95 (s)",
                    "server RSS MiB: one warm session / peak / 10 s after close",
                ],
                lines,
            )
        )
    return "\n\n".join(parts)


def targets(data: dict) -> list[Target]:
    found = []
    for model, result in data["models"].items():
        for row in result["rows"]:
            if "summary" not in row or not row["summary"]:
                continue
            for kind in (VIEW_ONLY, RECOMPUTE):
                budget = budget_for(kind, row["n"], model)
                if budget is None:
                    continue
                worst = [
                    (s["painted_s"], name)
                    for name, s in row["summary"].items()
                    if s["kind"] == kind and s["painted_s"] is not None
                ]
                if not worst:
                    continue
                value, name = max(worst)
                found.append(
                    Target(
                        f"{model} n={row['n']}: slowest {kind} click to paint",
                        f"<= {budget:.2f} s",
                        f"{value:.2f} s ({name}; {row.get('tokens')} tokens shown)",
                        value <= budget,
                    )
                )
            if row["n"] == 512:
                opened = row.get("open", {}).get("first_chart_s")
                count = len(row.get("open", {}).get("first_chart_samples_s") or [opened])
                if opened is not None:
                    found.append(
                        Target(
                            f"{model} n=512: open a link to first chart (median of {count})",
                            f"<= {OPEN_BUDGET_S:.0f} s",
                            f"{opened:.2f} s",
                            opened <= OPEN_BUDGET_S,
                        )
                    )
                for name, limit in BYTES_BUDGET.items():
                    got = row["summary"][name]["bytes"]
                    if got is not None and model == "minilm":
                        found.append(
                            Target(
                                f"minilm n=512: websocket bytes per {name} change",
                                f"<= {limit / 1e6:.1f} MB",
                                f"{got / 1e6:.2f} MB",
                                got <= limit,
                            )
                        )
    proto = data.get("load", {}).get("protocol")
    if proto and "error" not in proto:
        found.append(
            Target(
                "protocol load: 30 sessions x 60 s, errors and p95",
                "0 errors, p95 <= 3 s",
                f"{proto['errors']} errors, p95 {proto['all']['p95_s']:.2f} s",
                proto["errors"] == 0 and proto["all"]["p95_s"] <= 3.0,
            )
        )
        found.append(
            Target(
                "protocol load: RSS 10 s after close vs one warm session",
                "<= +200 MB",
                f"{proto['rss_after_minus_single_mb'] * 2**20 / 1e6:+.0f} MB",
                proto["rss_after_minus_single_mb"] * 2**20 <= 200e6,
            )
        )
    browser = data.get("load", {}).get("browser")
    if browser and "error" not in browser:
        found.append(
            Target(
                "browser load: 10 sessions x 60 s",
                "0 errors, p50 <= 2 s, p95 <= 4 s",
                f"{browser['errors']} errors, p50 {browser['latency_p50_s']:.2f} s, "
                f"p95 {browser['latency_p95_s']:.2f} s",
                browser["errors"] == 0 and browser["latency_p50_s"] <= 2 and browser["latency_p95_s"] <= 4,
            )
        )
    return found


def body(data: dict, before: dict | None) -> str:
    parts = [
        "Method: see `benchmarks/interactivity.py`'s docstring (MutationObserver + `plotly_afterplot` + "
        "Streamlit's running indicator + the websocket's `script_finished`; the time is input to the last "
        "paint before 300 ms of quiet). Each change goes to a value not shown before on that page.",
        f"App measured: `{data['app_dir']}` at {data.get('commit')}.",
        tables(data),
    ]
    if before is not None and before is not data:
        parts += [
            f"**Before** (`benchmarks/results/interactivity_before.json`: {before.get('commit')}):",
            tables(before, " (before)"),
        ]
    return "\n\n".join(parts)


def write_report_section(path: Path, data: dict, heading: str = TITLE, note: str = "") -> None:
    """Put ``data``'s tables into REPORT.md as the section ``## heading`` (replaced if there, else appended)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    section = f"## {heading}\n\n" + (note + "\n\n" if note else "") + body(data, None).rstrip() + "\n"
    start = text.find(f"## {heading}")
    if start < 0:
        text = text.rstrip() + "\n\n" + section
    else:
        end = text.find("\n## ", start + 3)
        text = text[:start] + section + (text[end + 1 :] if end >= 0 else "")
    path.write_text(text, encoding="utf-8")


def run(cfg: Config) -> SectionResult:
    result = SectionResult("interactivity", TITLE)
    from tests.browser import chromium_path

    if not chromium_path():
        result.skipped = "no chromium on this machine (apt-get install chromium)"
        return result
    if cfg.smoke:
        data = collect(models=("minilm",), sizes=(16,), repeats=1, load=False, quick=True, timeout_s=120.0)
    else:
        data = collect(quick=os.environ.get("BENCH_INTERACTIVITY_QUICK") == "1")
    before_path = HERE / "results" / "interactivity_before.json"
    before = json.loads(before_path.read_text()) if before_path.exists() else None
    result.data = data
    result.body = body(data, before)
    result.targets = targets(data)
    return result


def main(argv: list[str] | None = None) -> int:
    from .appserver import parse_env

    parser = argparse.ArgumentParser(prog="python -m benchmarks.interactivity", description=__doc__.split("\n")[0])
    parser.add_argument("--app-dir", help="checkout whose app.py runs (default: $ATTENTION_LENS_APP_DIR or this repo)")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument(
        "--sizes", default=None, help="comma-separated token counts (default 16,64,256,512; --quick 64,512)"
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="sizes 64 and 512 only, no 1,024, 30 s load tests")
    parser.add_argument("--no-load", action="store_true", help="skip the two load tests")
    parser.add_argument(
        "--load-view",
        default="compare",
        help="view of the 10 browser sessions (compare: one chart, as tests/test_load.py)",
    )
    parser.add_argument("--server-env", action="append", help="KEY=VALUE for the server (repeatable)")
    parser.add_argument(
        "--json", type=Path, help="write the numbers here (e.g. benchmarks/results/interactivity_before.json)"
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="update --json's models and load results with this run's instead of replacing the file",
    )
    parser.add_argument("--actions", help=f"comma-separated subset of {','.join(a[0] for a in ACTIONS)}")
    parser.add_argument(
        "--report-heading",
        help="also write the tables into benchmarks/REPORT.md under this '## ' heading (replaced if present)",
    )
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else (QUICK_SIZES if args.quick else SIZES)
    data = collect(
        args.app_dir,
        tuple(m for m in args.models.split(",") if m),
        sizes,
        args.repeats,
        parse_env(args.server_env),
        load=not args.no_load,
        load_view=args.load_view,
        quick=args.quick,
        log_dir=HERE / "results" / "tmp",
        actions=tuple(args.actions.split(",")) if args.actions else None,
    )
    print(tables(data))
    for t in targets(data):
        print(f"    {('met' if t.met else 'MISSED'):>6}: {t.name}: {t.measured} (goal {t.goal})")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        if args.merge and args.json.exists():
            data = merge(json.loads(args.json.read_text()), data)
        args.json.write_text(json.dumps(data, indent=1, default=str))
    if args.report_heading:
        write_report_section(HERE / "REPORT.md", data, args.report_heading)
    return 0


if __name__ == "__main__":
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
