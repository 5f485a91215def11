"""What plotly.js does in the page after a click: every Plotly call, per chart, with its time, in headless Chromium.

    .venv/bin/python -m benchmarks.plotly_calls [--view heads] [--action visit|head] [--tokens 64] [--clicks 3]
                                                [--height 900] [--app-dir DIR ...] [--json FILE]

Each ``--app-dir`` (default: this checkout) runs its own server (``benchmarks/appserver.py``), one after the other.
A page opens the app on a text of about ``--tokens`` MiniLM tokens, with every ``Plotly.react``, ``newPlot``,
``update``, ``restyle`` and ``relayout`` wrapped from before plotly.js loads (the bundle's ``window.Plotly = ...``
goes through a setter). ``visit``: a fresh page opens on the derivation for each click, which goes to ``--view``
(a first visit: views drawn ahead are turned off, ``ATTENTION_LENS_AHEAD_UP_TO=0``). ``head``: one page opens on
``--view`` and each click is Head +1. Printed per click: each call, its chart (the key of its box) and the
milliseconds it ran before returning (plotly.js draws within the call; its promise resolves right after). A
window ``--height`` pixels tall: charts further than half a screen below it are drawn only when scrolled near
(``ui/components/lens_chart/chart.js``). Used for report section 7, "thirty-fifth" (the head grid's mark, and a
chart's first draw with its mark) and "thirty-sixth" (the step-through's first draw, its slider's texts).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from urllib.parse import quote

from benchmarks.common import write_json
from benchmarks.page_trace import WORDS  # about 2.7 characters a MiniLM token
from ui.settings import VIEW_LABELS

VIEWS = ("heads", "compare", "query")  # views with charts marked or drawn on a first visit
CALLS = ("react", "newPlot", "update", "restyle", "relayout")
SPY = """(() => { window.__calls = []; let real;
  Object.defineProperty(window, 'Plotly', {configurable: true, get: () => real, set: (plotly) => { real = plotly;
    for (const name of __CALLS__) { const f = plotly[name];
      plotly[name] = function (div, ...rest) { const box = div.closest && div.closest('[class*="st-key-"]');
        const key = box ? [...box.classList].find(c => c.startsWith('st-key-')).slice(7) : '';
        const t = performance.now(); const result = f.call(this, div, ...rest);
        window.__calls.push([name, key, performance.now() - t]); return result; }; } }}); })()""".replace(
    "__CALLS__", json.dumps(CALLS)
)


def per_chart(calls: list) -> dict[str, float]:
    """{"<call> <chart>": milliseconds} summed over ``calls`` ([name, chart key, ms] as the page records them), the
    costliest first."""
    totals: dict[str, float] = {}
    for name, key, ms in calls:
        totals[f"{name} {key}"] = totals.get(f"{name} {key}", 0.0) + float(ms)
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


def record(app_dir: str | None, view: str, action: str, tokens: int, clicks: int, height: int) -> list[list]:
    """Per click, the Plotly calls the page made ([name, chart key, ms])."""
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM_ARGS, chromium_path

    from .appserver import app_server

    text = (WORDS * (tokens // 10 + 2))[: int(tokens * 2.7)]
    start_view = view if action == "head" else "derivation"
    env = {"ATTENTION_LENS_AHEAD_UP_TO": "0"} if action == "visit" else None
    out = []
    with app_server(app_dir, env=env) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = None
        for _ in range(clicks):
            if page is None or action == "visit":  # a first visit: a fresh page each time
                if page is not None:
                    page.close()
                page = browser.new_page(viewport={"width": 1366, "height": height})
                page.add_init_script(SPY)
                page.goto(f"{server.url}/?text={quote(text)}&max_tokens={tokens}&model=minilm&view={start_view}")
                page.wait_for_selector(".js-plotly-plot svg.main-svg", timeout=120_000)
                time.sleep(6)
            page.evaluate("() => { window.__calls = []; }")
            if action == "head":
                page.get_by_role("slider", name="Head").focus()
                page.keyboard.press("ArrowRight")
            else:
                page.get_by_text(VIEW_LABELS[view], exact=True).first.click()
            time.sleep(3)
            out.append(page.evaluate("() => window.__calls"))
        browser.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.plotly_calls", description=__doc__.split("\n")[0])
    parser.add_argument("--view", choices=VIEWS, default="heads")
    parser.add_argument("--action", choices=("visit", "head"), default="visit")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--clicks", type=int, default=3)
    parser.add_argument("--height", type=int, default=900)
    parser.add_argument("--app-dir", action="append", default=[])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results = {}
    for app_dir in args.app_dir or [None]:
        clicks = record(app_dir, args.view, args.action, args.tokens, args.clicks, args.height)
        results[app_dir or "."] = clicks
        print(f"{app_dir or '.'}: {args.action} ({args.view}, {args.tokens} tokens, a {args.height}-px window)")
        for i, calls in enumerate(clicks):
            total = sum(ms for _, _, ms in calls)
            print(f"  click {i + 1}: {total:6.1f} ms in {len(calls)} calls")
            for what, ms in per_chart(calls).items():
                print(f"    {ms:6.1f} ms  {what}")
    if args.json:
        write_json(args.json, {"args": vars(args) | {"json": str(args.json)}, "clicks": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
