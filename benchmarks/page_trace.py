"""Where a click's time goes in the page: a Chromium trace of a few clicks, the renderer's main thread summed.

    .venv/bin/python -m benchmarks.page_trace [--action scaling|encoding|head|view|query|idle] [--tokens 64] [--clicks 4]
                                              [--model minilm|smollm2] [--app-dir DIR] [--no-animations]
                                              [--view "Heads & layers"|"Core vs model"|"Query inspector"]
                                              [--js-profile]

Opens the app (``streamlit run app.py`` of ``--app-dir``, see ``benchmarks/appserver.py``) in headless Debian
Chromium on a text of about ``--tokens`` tokens for ``--model`` (a bundled one), scrolls the derivation's softmax
weights into the middle of the screen, records a trace (``devtools.timeline``) while it makes ``--clicks`` changes
2.5 s apart, and prints per click: the main thread's busy time (``RunTask``), then each task attributed to its
first event (React's function calls, style recalculation, plotly's draws in ``chart.js``, idle-time draws...).
``idle`` makes no change: the page's own background cost over the same time. ``--no-animations`` turns every CSS
animation and transition off first. ``--js-profile`` also records a sampling JS profile (CDP ``Profiler``) of the
same clicks and prints the script files and functions with the most self time per click. Used for report section 7, "fifteenth" (a whole-script rerun against a fragment rerun).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

WORDS = "I am a cat. It is on a mat. We go to it so do you. "  # about 2.7 characters a MiniLM token
SCALINGS = ("none (raw QKᵀ)", "÷ √d_k (the article)")
VIEWS = ("Heads & layers", "Core vs model", "Query inspector")  # --view: switched to, then back to "Derivation"
CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline", "v8.execute"]


def main_thread_events(events: list[dict]) -> list[dict]:
    """The complete ("X") events of every renderer's main thread, in time order."""
    mains = {
        (e["pid"], e["tid"])
        for e in events
        if e.get("name") == "thread_name" and e.get("args", {}).get("name") == "CrRendererMain"
    }
    found = [e for e in events if (e.get("pid"), e.get("tid")) in mains and e.get("ph") == "X" and "dur" in e]
    return sorted(found, key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"]))


def by_first_event(events: list[dict]) -> tuple[float, collections.Counter]:
    """(busy ms, Counter of ms by what each task began with): every ``RunTask`` of the main thread is attributed to
    the first event inside it, with the script's file name for a function call."""
    xs = main_thread_events(events)
    busy, kinds = 0.0, collections.Counter()
    for i, task in enumerate(xs):
        if task["name"] != "RunTask":
            continue
        busy += task["dur"] / 1000
        end, first = task["ts"] + task["dur"], None
        for e in xs[i + 1 :]:
            if (e["pid"], e["tid"]) != (task["pid"], task["tid"]) or e["ts"] >= end:
                break
            if e["name"] != "RunTask":
                first = e
                break
        if first is None:
            kinds["(nothing inside)"] += task["dur"] / 1000
            continue
        data = first.get("args", {}).get("data", {})
        where = str(data.get("url") or data.get("type") or "").rsplit("/", 1)[-1][:40]
        kinds[f"{first['name']} {where}".strip()] += task["dur"] / 1000
    return busy, kinds


def _act(page, action: str, i: int, view: str = VIEWS[0]) -> None:
    if action == "scaling":
        page.get_by_text(SCALINGS[i % 2], exact=True).first.click()
    elif action == "head":
        page.get_by_role("slider", name="Head").focus()
        page.keyboard.press("ArrowRight" if i % 2 == 0 else "ArrowLeft")
    elif action == "view":
        page.get_by_text((view, "Derivation")[i % 2], exact=True).first.click()  # a first visit, then back
    elif action == "query":  # the Query inspector's next query token (the view is opened before the trace)
        box = page.get_by_role("combobox", name="Query token")
        box.click()
        if box.get_attribute("aria-expanded") != "true":
            box.press("ArrowDown")
        page.get_by_role("option").nth(1 + i).click()
    elif action == "encoding":  # the next of the core's encodings (none, sinusoidal, learned, rotary, alibi)
        box = page.get_by_role("combobox", name="Positional encoding (own core)")
        box.click()
        if box.get_attribute("aria-expanded") != "true":
            box.press("ArrowDown")
        page.get_by_role("option").nth(1 + i % 5).click()


def self_time(profile: dict, by: str = "function", top: int = 25) -> list[tuple[float, str]]:
    """(self ms, what) of a CDP ``Profiler`` profile, the costliest first, ``by`` "function" ("name file:line") or
    "file" (the script file, or the native function for time outside scripts): the JS-level view of the same
    clicks (which library's code the page ran: React, KaTeX, plotly, emotion...)."""
    nodes = {node["id"]: node["callFrame"] for node in profile["nodes"]}
    self_us: collections.Counter = collections.Counter()
    for node_id, delta in zip(profile.get("samples", []), profile.get("timeDeltas", []), strict=True):
        frame = nodes[node_id]
        where = frame.get("url", "").rsplit("/", 1)[-1][:60]
        name = frame.get("functionName") or "(anonymous)"
        self_us[f"{name} {where}:{frame.get('lineNumber', 0) + 1}" if by == "function" else where or name] += delta
    return [(us / 1000, name) for name, us in self_us.most_common(top)]


def record(
    app_dir: str | None,
    action: str,
    tokens: int,
    clicks: int,
    no_animations: bool,
    model: str = "minilm",
    profile: dict | None = None,
    view: str = VIEWS[0],
) -> list[dict]:
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM_ARGS, chromium_path

    from .appserver import app_server

    text = (WORDS * (tokens // 10 + 2))[: int(tokens * 2.7)]
    with app_server(app_dir) as server, sync_playwright() as p, tempfile.TemporaryDirectory() as tmp:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{server.url}/?text={quote(text)}&max_tokens={tokens}&model={model}")
        page.wait_for_selector(".js-plotly-plot svg.main-svg", timeout=120_000)
        if no_animations:
            page.add_style_tag(
                content="*, *::before, *::after { animation: none !important; transition: none !important; }"
            )
        time.sleep(5)
        if action == "encoding":
            page.get_by_text("Positional encoding and source of X").first.click()
            time.sleep(2)
        if action == "query":
            page.get_by_text("Query inspector", exact=True).first.click()
            time.sleep(4)
        page.evaluate("() => document.querySelector('.st-key-fig_weights')?.scrollIntoView({block: 'center'})")
        time.sleep(2)
        path = Path(tmp) / "trace.json"
        cdp = None
        if profile is not None:  # a sampling JS profile of the same clicks, beside the trace
            cdp = page.context.new_cdp_session(page)
            cdp.send("Profiler.enable")
            cdp.send("Profiler.setSamplingInterval", {"interval": 250})
            cdp.send("Profiler.start")
        browser.start_tracing(page=page, path=str(path), categories=CATEGORIES)
        for i in range(clicks):
            _act(page, action, i, view)
            time.sleep(2.5)
        browser.stop_tracing()
        if cdp is not None:
            profile.update(cdp.send("Profiler.stop")["profile"])
        browser.close()
        loaded = json.loads(path.read_text())
    return loaded["traceEvents"] if isinstance(loaded, dict) else loaded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.page_trace", description=__doc__.split("\n")[0])
    parser.add_argument("--action", choices=("scaling", "encoding", "head", "view", "query", "idle"), default="scaling")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--clicks", type=int, default=4)
    parser.add_argument("--app-dir", help="checkout whose app.py runs (default: $ATTENTION_LENS_APP_DIR or this repo)")
    parser.add_argument("--model", default="minilm", help="a bundled model: minilm or smollm2")
    parser.add_argument("--no-animations", action="store_true")
    parser.add_argument("--view", choices=VIEWS, default=VIEWS[0], help="the view --action view switches to")
    parser.add_argument(
        "--js-profile", action="store_true", help="also print the JS functions and files that cost most"
    )
    args = parser.parse_args(argv)
    profile: dict | None = {} if args.js_profile else None
    events = record(
        args.app_dir, args.action, args.tokens, args.clicks, args.no_animations, args.model, profile, args.view
    )
    busy, kinds = by_first_event(events)
    print(f"{args.action} at {args.tokens} tokens: main thread busy {busy / args.clicks:.1f} ms per click")
    for kind, ms in kinds.most_common(12):
        print(f"  {ms / args.clicks:8.1f} ms  {kind}")
    if profile:
        print("JS self time per click, by file:")
        for ms, name in self_time(profile, by="file", top=15):
            print(f"  {ms / args.clicks:8.1f} ms  {name}")
        print("JS self time per click, by function:")
        for ms, name in self_time(profile):
            print(f"  {ms / args.clicks:8.1f} ms  {name}")
    return 0


if __name__ == "__main__":
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    raise SystemExit(main())
