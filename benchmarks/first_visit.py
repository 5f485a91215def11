"""A view's first visit: from the click on its button to its chart painted, in headless Chromium.

    .venv/bin/python -m benchmarks.first_visit [--view "Training lab"] [--title recurrence] [--pages 3]
                                               [--app-dir DIR ...] [--rounds 2]

Each ``--app-dir`` (default: this checkout) runs its own server (``benchmarks/appserver.py``); per round and
checkout, ``--pages`` fresh pages (new browser contexts, nothing cached) open the app on its default text, wait
for it to settle, click ``--view``'s button and time until a chart whose title contains ``--title`` is drawn
(a 3000-px tall window, so the chart is in view: charts out of view are drawn when scrolled near). Checkouts
alternate per round. Used for report section 7, "thirty-third" (the Training lab with Streamlit's own chart
against the app's).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchmarks.common import median, write_json

DRAWN = """(title) => [...document.querySelectorAll('.js-plotly-plot')].some(
  (d) => d.offsetParent && d.layout && d.layout.title && String(d.layout.title.text || '').includes(title))"""


def visit(browser, url: str, view: str, title: str) -> float:
    """Seconds from the click on ``view`` to a chart titled with ``title`` drawn, on a fresh page."""
    context = browser.new_context(viewport={"width": 1366, "height": 3000})
    page = context.new_page()
    page.goto(url)
    page.wait_for_timeout(7000)
    button = page.get_by_text(view, exact=True).first
    start = time.perf_counter()
    button.click()
    page.wait_for_function(DRAWN, arg=title, timeout=60_000, polling="raf")
    seconds = time.perf_counter() - start
    context.close()
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--view", default="Training lab")
    parser.add_argument("--title", default="recurrence")
    parser.add_argument("--pages", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--app-dir", action="append", default=[])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from benchmarks.appserver import app_server
    from tests.browser import CHROMIUM_ARGS, chromium_path

    dirs = args.app_dir or [None]
    times: dict[str, list[float]] = {str(d or "this checkout"): [] for d in dirs}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        for _ in range(args.rounds):
            for d in dirs:
                with app_server(d) as server:
                    for _ in range(args.pages):
                        times[str(d or "this checkout")].append(visit(browser, server.url, args.view, args.title))
        browser.close()
    print(f"{args.view}: first visit, click to the chart '{args.title}' drawn (seconds)")
    for label, got in times.items():
        print(f"  {label}: median {median(got):.2f}  ({', '.join(f'{s:.2f}' for s in got)})")
    if args.json:
        write_json(args.json, times)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
