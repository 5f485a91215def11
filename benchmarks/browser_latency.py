"""Section 4: what a person waits for in the browser: a control change until the weights chart changes.

The app runs as in the browser tests (``tests/browser.py``'s ``streamlit_app``, Debian chromium
through Playwright, headless). The text and ``max_tokens`` = n go in the URL (settings live in the
URL; the app keeps only the first 2,000 characters of a link's text, so the text is made of short
words: 512 MiniLM tokens in about 1,300 characters). After the page has settled, a script in the page notes ``performance.now()`` at the click's
``pointerdown`` and polls every 5 ms for the weights heatmap's data (a fingerprint of 16 x 16 sampled
cells of ``el.data[0].z``, or of its base64 string when plotly keeps the typed array encoded, of the plot whose first trace is named "weights") to differ; the time it
changes is when Plotly has the new figure (Plotly draws a heatmap synchronously in ``react``), and a
double ``requestAnimationFrame`` after that marks the next painted frame. The click is the scaling
radio: "none (raw QKᵀ)" (first time: the trace is computed), then back and again (cached traces).
JS heap: ``performance.memory.usedJSHeapSize`` sampled at each poll (chromium runs with
``--enable-precise-memory-info``) for the peak, and CDP ``Performance.getMetrics`` at the end.
"""

from __future__ import annotations

import time
import urllib.parse

from . import plots
from .common import Config, SectionResult, median, mib, ms, table

TOGGLES = [("none (raw QKᵀ)", "first time"), ("÷ √d_k (the article)", "seen before"), ("none (raw QKᵀ)", "seen before")]
WATCH = """() => {
  const find = () => [...document.querySelectorAll('.js-plotly-plot')]
      .find(el => el.data && el.data[0] && el.data[0].name === 'weights');
  const fingerprint = () => {
    const g = find();
    if (!g) return '';
    const z = g.data[0].z;
    if (z && typeof z.bdata === 'string') {  // plotly's base64 typed array (the app sent float32 this way before)
      const s = z.bdata, parts = [s.length];
      for (let a = 0; a < 64; a++) parts.push(s.substr(Math.floor(a * s.length / 64), 16));
      return parts.join('|');
    }
    if (z && z.bdata instanceof ArrayBuffer) {  // a typed array whose bytes the app sent raw (ui/plotly_spec.py)
      const bytes = new Uint8Array(z.bdata), parts = [bytes.length];
      for (let a = 0; a < 64; a++) {
        const at = Math.floor(a * bytes.length / 64);
        parts.push(Array.from(bytes.subarray(at, at + 16)).join('.'));
      }
      return parts.join('|');
    }
    const rows = z.length, parts = [rows];
    for (let a = 0; a < 16; a++) {
      const row = z[Math.floor(a * rows / 16)];
      if (!row) continue;
      for (let b = 0; b < 16; b++) parts.push(row[Math.floor(b * row.length / 16)]);
    }
    return parts.join(',');
  };
  const heap = () => (performance.memory ? performance.memory.usedJSHeapSize : 0);
  if (!window.__bench) {
    window.__bench = {peakHeap: heap()};
    document.addEventListener('pointerdown', () => {
      const b = window.__bench;
      if (b.armed && b.clickAt === null) b.clickAt = performance.now();
    }, true);
    const tick = () => {
      const b = window.__bench;
      b.peakHeap = Math.max(b.peakHeap, heap());
      if (b.armed && b.clickAt !== null && b.changedAt === null) {
        const now = fingerprint();
        if (now && now !== b.before) {
          b.changedAt = performance.now();
          const z = find().data[0].z;
          b.rows = z.shape ? parseInt(String(z.shape).split(',')[0]) : z.length;
          requestAnimationFrame(() => requestAnimationFrame(() => { b.paintedAt = performance.now(); }));
        }
      }
      setTimeout(tick, 5);
    };
    tick();
  }
  const b = window.__bench;
  Object.assign(b, {armed: true, before: fingerprint(), clickAt: null, changedAt: null, paintedAt: null});
  return b.before.length > 0;
}"""
# The weights chart is looked at (scrolled into the middle of the screen) while waiting: the app draws a chart out of
# view only when it comes near it (ui/components/lens_chart/chart.js).
WEIGHTS_READY = """() => { document.querySelector('.st-key-fig_weights')?.scrollIntoView({block: 'center'});
  return [...document.querySelectorAll('.js-plotly-plot')]
    .some(el => el.data && el.data[0] && el.data[0].name === 'weights' && el.querySelector('svg.main-svg')); }"""
# Streamlit shows its status widget (a running icon and "Stop") only while a script runs.
IDLE = """() => !document.querySelector('[data-testid="stStatusWidget"]')"""
CHROMIUM_EXTRA = ["--enable-precise-memory-info"]
TRACE_CAP_ENV, TRACE_CAP_MB = "ATTENTION_LENS_MAX_TRACE_MB", "400"  # the default 128 MB caps MiniLM at 316 tokens


SHORT_WORDS = "I am a cat. It is on a mat. We go to it so do you. "  # about 2.6 characters per MiniLM token
URL_TEXT_MAX = 1500  # a link keeps at most 2,000 characters of text (ui/settings.py): 512 tokens fit in 1,324


def text_for(n: int) -> str:
    """At least n MiniLM tokens in a text short enough to survive the app's URL (short words, no commas)."""
    return (SHORT_WORDS * (n // 8 + 2))[:URL_TEXT_MAX].strip()


def settle(page, timeout_ms: float) -> None:
    page.wait_for_function(WEIGHTS_READY, timeout=timeout_ms)
    page.wait_for_function(IDLE, timeout=timeout_ms)
    page.wait_for_timeout(600)
    page.wait_for_function(IDLE, timeout=timeout_ms)


def measure_n(browser, base: str, n: int, toggles, timeout_ms: float) -> dict:
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")
    query = urllib.parse.urlencode({"text": text_for(n), "max_tokens": n})  # spaces as '+': a shorter link
    started = time.perf_counter()
    page.goto(f"{base}/?{query}", timeout=timeout_ms)
    page.wait_for_function(WEIGHTS_READY, timeout=timeout_ms)
    first_chart = time.perf_counter() - started
    settle(page, timeout_ms)
    clicks = []
    for label, kind in toggles:
        if not page.evaluate(WATCH):
            raise RuntimeError("the weights heatmap was not found on the page")
        page.get_by_text(label).first.click()
        page.wait_for_function("() => window.__bench.changedAt !== null", timeout=timeout_ms)
        try:
            page.wait_for_function("() => window.__bench.paintedAt !== null", timeout=5000)
        except Exception:  # noqa: BLE001 - a frame that never comes is reported as n/a
            pass
        b = page.evaluate("() => window.__bench")
        clicks.append(
            {
                "label": label,
                "kind": kind,
                "changed_s": (b["changedAt"] - b["clickAt"]) / 1e3,
                "painted_s": None if b.get("paintedAt") is None else (b["paintedAt"] - b["clickAt"]) / 1e3,
                "rows": b.get("rows"),
            }
        )
        settle(page, timeout_ms)
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    peak = page.evaluate("() => window.__bench.peakHeap")
    page.close()
    return {
        "n": n,
        "rows": clicks[0]["rows"] if clicks else None,
        "first_chart_s": first_chart,
        "clicks": clicks,
        "js_heap_peak": peak,
        "js_heap_used_end": metrics.get("JSHeapUsedSize"),
        "js_heap_total_end": metrics.get("JSHeapTotalSize"),
        "dom_nodes": metrics.get("Nodes"),
    }


def run(cfg: Config) -> SectionResult:
    from tests.browser import CHROMIUM_ARGS, chromium_path, streamlit_app

    result = SectionResult("browser", "4. Browser: control change to updated chart, JS heap")
    path = chromium_path()
    if not path:
        result.skipped = "no chromium on this machine (apt-get install chromium)"
        return result
    from playwright.sync_api import sync_playwright

    sizes = cfg.pick((16, 64, 256, 512), (16,))
    toggles = cfg.pick(TOGGLES, TOGGLES[:1])
    timeout_ms = cfg.pick(180_000, 90_000)
    rows = []
    with streamlit_app(env={TRACE_CAP_ENV: TRACE_CAP_MB}) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS + CHROMIUM_EXTRA)
        try:
            for n in sizes:
                rows.append(measure_n(browser, base, n, toggles, timeout_ms))
        finally:
            browser.close()

    def pick(row, kind, key):
        values = [c[key] for c in row["clicks"] if c["kind"] == kind and c[key] is not None]
        return median(values) if values else None

    result.data = {"rows": rows, "browser": path}
    result.body = "\n\n".join(
        [
            "Headless Debian chromium (Playwright), viewport 1366 x 900, the app started by "
            "`tests/browser.py`'s `streamlit_app` (MiniLM, derivation view: X, Q, K, V, scores, scaled, masked, "
            "weights, output heatmaps). Text (short words, so that n=512 tokens fit in the 2,000 characters of "
            "text a link keeps) and `max_tokens=n` set in the URL; n = the token count the weights heatmap shows. "
            f"The server runs with {TRACE_CAP_ENV}={TRACE_CAP_MB} (its default, 128 MB per trace, caps MiniLM at "
            "316 tokens). 'first time' = the first toggle of scaling to none (the server computes that trace); 'seen before' = toggling back and again "
            "(cached traces; the figures are still rebuilt, sent and redrawn). Changed = click until the "
            "weights heatmap holds new data; painted = until the next frame after that.",
            table(
                [
                    "n",
                    "first chart after navigation (s; the first n also loads the model)",
                    "click→changed, first time (ms)",
                    "click→painted, first time (ms)",
                    "click→changed, seen before (ms)",
                    "click→painted, seen before (ms)",
                    "JS heap peak (MiB)",
                    "JS heap used at end (MiB)",
                    "DOM nodes",
                ],
                [
                    [
                        r["rows"] or r["n"],
                        f"{r['first_chart_s']:.2f}",
                        ms(pick(r, "first time", "changed_s"), 0),
                        ms(pick(r, "first time", "painted_s"), 0),
                        ms(pick(r, "seen before", "changed_s"), 0),
                        ms(pick(r, "seen before", "painted_s"), 0),
                        mib(r["js_heap_peak"]),
                        mib(r["js_heap_used_end"]),
                        f"{r['dom_nodes']:.0f}" if r["dom_nodes"] is not None else "n/a",
                    ]
                    for r in rows
                ],
            ),
            "![click to chart](results/browser_latency.png)",
        ]
    )
    result.figures["browser_latency"] = plots.lines(
        [r["n"] for r in rows],
        {
            "click→changed, first time": [(pick(r, "first time", "changed_s") or 0) * 1e3 for r in rows],
            "click→changed, seen before": [(pick(r, "seen before", "changed_s") or 0) * 1e3 for r in rows],
            "first chart after navigation": [r["first_chart_s"] * 1e3 for r in rows],
        },
        title="Browser: time until the weights chart shows the change",
        x_title="tokens n",
        y_title="ms",
    )
    return result
