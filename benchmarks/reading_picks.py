"""Queries picked by a person who reads between picks: what each pick costs on screen, and what the page is sent
and draws meanwhile in the views kept in it (ui/ahead.py draws them ahead while nobody clicks).

    .venv/bin/python -m benchmarks.reading_picks [--tokens 64] [--picks 6] [--gap 2.5] [--app-dir DIR]
                                                 [--app-dir DIR2] [--rounds 2] [--json out.json]

Opens the Query inspector on a text of ``--tokens`` MiniLM tokens in headless Chromium, lets the page draw the
kept views ahead, then picks ``--picks`` queries in the "Query token" box (``benchmarks.interactivity``'s
``PICK_STRIDE`` options on each time), ``--gap`` seconds after the page settled from the last one. Per pick: the
input until the last paint (``benchmarks.interactivity`` ``Page.measure``), then over the gap the websocket bytes
received and the ``Plotly.react`` calls on charts of views kept hidden (a chart drawn again, or drawn from scratch
after its view was cleared). After the last gap, a switch to Core vs model (kept in the page), timed the same way. Two ``--app-dir`` (a ``git worktree`` of the commit before a change, and this one)
alternate, ``--rounds`` times each. Used for report section 7, "thirty-seventh".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import median, write_json

# Plotly.react on a chart inside a hidden view's box (ui/ahead.py HIDDEN_STYLE sets --lens-hidden), counted.
SPY = """(() => { window.__hiddenReacts = 0; const wrap = () => { const real = window.Plotly.react;
  window.Plotly.react = function (div, ...rest) {
    if (getComputedStyle(div).getPropertyValue('--lens-hidden').trim() === '1') window.__hiddenReacts++;
    return real.call(this, div, ...rest); }; };
  const wait = setInterval(() => { if (window.Plotly && window.Plotly.react) { clearInterval(wait); wrap(); } }, 20); })()"""
AHEAD_SETTLED = "() => { const s = window.__lensAhead; return !!s && !s.asking && s.pending().length === 0; }"


def one_round(browser, base: str, tokens: int, picks: int, gap: float) -> dict:
    from .interactivity import PICK_STRIDE, Page, link

    page = Page(browser, timeout_s=120)
    page.page.add_init_script(SPY)
    try:
        page.open(link(base, "minilm", tokens, view="query"))
        page.page.wait_for_function(AHEAD_SETTLED, timeout=120_000, polling=200)
        page.look()
        rows = []
        for k in range(picks):
            result = page.change("Query token", (k + 1) * PICK_STRIDE)
            if result is None:
                raise RuntimeError("no Query token box on the page")
            sent, reacts = page.frames.bytes, page.page.evaluate("() => window.__hiddenReacts")
            page.page.wait_for_timeout(gap * 1e3)  # reading: the page may draw the kept views ahead meanwhile
            rows.append(
                {
                    "painted_s": result["painted_s"],
                    "pick_bytes": result["bytes"],
                    "gap_bytes": page.frames.bytes - sent,
                    "hidden_reacts": page.page.evaluate("() => window.__hiddenReacts") - reacts,
                }
            )
        switch = page.pick("View", "Core vs model")  # after the last gap: a view kept in the page, hidden
        return {"picks": rows, "switch_s": switch and switch["painted_s"]}
    finally:
        page.page.close()


def run(app_dirs: list[str | None], tokens: int, picks: int, gap: float, rounds: int) -> dict:
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM_ARGS, chromium_path

    from .appserver import app_server

    results: dict[str, list] = {str(d or "."): [] for d in app_dirs}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        for _ in range(rounds):
            for directory in app_dirs:
                with app_server(directory) as server:
                    results[str(directory or ".")].append(one_round(browser, server.url, tokens, picks, gap))
        browser.close()
    return {"tokens": tokens, "picks": picks, "gap_s": gap, "rounds": results}


def summary(one: dict) -> str:
    rows = one["picks"]
    painted = median([r["painted_s"] for r in rows])
    gap_kb = median([r["gap_bytes"] for r in rows]) / 1e3
    reacts = sum(r["hidden_reacts"] for r in rows)
    return (
        f"pick painted median {painted:.3f} s, bytes in the gap median {gap_kb:.0f} kB, hidden charts drawn {reacts}; "
        f"then Core vs model {one['switch_s']:.3f} s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reading_picks", description=__doc__.split("\n")[0])
    parser.add_argument("--app-dir", action="append", help="checkout whose app.py runs (repeat to alternate two)")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--picks", type=int, default=6)
    parser.add_argument("--gap", type=float, default=2.5, help="seconds of reading after each pick settled")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args(argv)
    result = run(args.app_dir or [None], args.tokens, args.picks, args.gap, args.rounds)
    for directory, rounds in result["rounds"].items():
        for rows in rounds:
            print(f"{directory}: {summary(rows)}")
    if args.json:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    raise SystemExit(main())
