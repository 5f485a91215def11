"""Opening a link, repeated: navigation start until the first chart is painted (issue 12, item 3).

    .venv/bin/python -m benchmarks.open_link [--tokens 512] [--opens 5] [--model minilm] [--app-dir DIR]
                                             [--server-env KEY=VALUE] [--json out.json]

The interactivity section (``benchmarks/interactivity.py``) opens one link per size, so its "open a link" is a
single sample. Here one warm server (``--app-dir``'s app.py; the model loaded by a 12-token warm-up page) is
opened ``--opens`` times at ``--tokens`` tokens, each time a text not seen before (a different first word, so the
model runs for it, as for a visitor's own text), each in a fresh page, one after the other, once the server has gone
quiet (no CPU used for half a second: the page before left no background work behind); the times are read by
the same in-page watcher as the interactivity harness (``WATCH``: the first ``.js-plotly-plot`` with an SVG, and
the page settled). Prints every open and the medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import urllib.parse
from pathlib import Path

from .common import write_json
from .interactivity import Page, link, text_for

FIRST_WORDS = ("Apples", "Bridges", "Candles", "Dolphins", "Engines", "Forests", "Glaciers", "Harbours", "Islands")


def open_link(base: str, model: str, tokens: int, variant: int) -> str:
    """A link at ``tokens`` tokens whose text starts with its own word (a text the server has not seen)."""
    text = f"{FIRST_WORDS[variant % len(FIRST_WORDS)]} {variant}. {text_for(tokens)}"
    params = {"text": text, "max_tokens": tokens, **({"model": model} if model != "minilm" else {})}
    return f"{base}/?{urllib.parse.urlencode(params)}"


def wait_quiet(pid: int, idle_cores: float = 0.05, window_s: float = 0.5, timeout_s: float = 60.0) -> float:
    """Wait until the server process (and its children) used under ``idle_cores`` of CPU over ``window_s``: the
    page before has left no background work (its all-layers check, its neighbouring heads' figures) to compete
    with the next open. Returns the seconds waited."""
    import psutil

    proc, started = psutil.Process(pid), time.monotonic()

    def cpu() -> float:
        total = 0.0
        for p in (proc, *proc.children(recursive=True)):
            try:
                times = p.cpu_times()
                total += times.user + times.system
            except psutil.Error:
                pass
        return total

    time.sleep(window_s)
    while time.monotonic() - started < timeout_s:
        before = cpu()
        time.sleep(window_s)
        if cpu() - before < idle_cores * window_s:
            break
    return time.monotonic() - started


def open_fresh(browser, base: str, model: str, tokens: int, variant: int, server_pid, timeout_s: float) -> dict:
    """One open of a text of its own (``open_link``) in a fresh page, closed after, once the server is quiet
    (``server_pid`` None: at once): the page's numbers (``Page.open``) and the seconds waited."""
    quiet_s = wait_quiet(server_pid) if server_pid is not None else 0.0
    page = Page(browser, timeout_s)
    try:
        opened = page.open(open_link(base, model, tokens, variant))
    finally:
        page.page.close()
    return {**opened, "server_quiet_after_s": quiet_s}


def run(app_dir, model: str, tokens: int, opens: int, env: dict, timeout_s: float = 180.0) -> dict:
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM_ARGS, chromium_path

    from .appserver import app_server

    samples = []
    with app_server(app_dir, env=env) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            warm = Page(browser, 600.0)
            warm.open(link(server.url, model, 16).replace("max_tokens=16", "max_tokens=12"))
            warm.page.close()
            for i in range(opens):
                opened = open_fresh(browser, server.url, model, tokens, i, server.proc.pid, timeout_s)
                samples.append(opened)
                print(
                    f"  open {i + 1}: first chart {opened['first_chart_s']:.2f} s, settled {opened['settled_s']:.2f} s,"
                    f" {opened['plots']} charts, tokens {opened['tokens']}",
                    flush=True,
                )
        finally:
            browser.close()
    return {
        "model": model,
        "tokens": tokens,
        "opens": samples,
        "first_chart_median_s": statistics.median(s["first_chart_s"] for s in samples),
        "settled_median_s": statistics.median(s["settled_s"] for s in samples),
    }


def main(argv: list[str] | None = None) -> int:
    from .appserver import parse_env

    parser = argparse.ArgumentParser(prog="python -m benchmarks.open_link", description=__doc__.split("\n")[0])
    parser.add_argument("--app-dir", help="checkout whose app.py runs (default: $ATTENTION_LENS_APP_DIR or this repo)")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--opens", type=int, default=5)
    parser.add_argument("--server-env", action="append", help="KEY=VALUE for the server (repeatable)")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args(argv)
    result = run(args.app_dir, args.model, args.tokens, args.opens, parse_env(args.server_env))
    print(
        f"{args.model} {args.tokens} tokens, {args.opens} opens: first chart median {result['first_chart_median_s']:.2f} s,"
        f" settled median {result['settled_median_s']:.2f} s"
    )
    if args.json:
        write_json(args.json, result, default=str)
    return 0


if __name__ == "__main__":
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    raise SystemExit(main())
