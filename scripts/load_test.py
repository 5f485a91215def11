"""Load test: many browser sessions against one Attention Lens server on loopback.

    .venv/bin/python scripts/load_test.py --sessions 10 --seconds 60 [--json result.json]

One headless Chromium (Debian's, never downloaded) opens ``sessions`` browser contexts, one page
each, each on its own sentence (so the server holds distinct captures and traces). All pages are
driven at once from one asyncio loop: each clicks the next "Divide the scores by" option
(none -> temperature -> sqrt(d_k) -> none ...) and waits until the softmax-weights chart in the page
holds new numbers (a watcher inside the page, ``WAIT_CHANGE``; ``--poll`` asks 20 times a second instead); that
wait is the update latency. An error is a chart that never updates, a
traceback or error box in the page, or an uncaught page error.

The server's resident memory (VmRSS of its process, from /proc) is sampled every second: before
any session, after one warm-up session (model loaded: the baseline), its peak during the run, and
after every session closed and the server had ``settle_s`` seconds to let go of them.
Prints one summary line and returns the numbers as a dict (see ``run``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.browser import CHROMIUM_ARGS, chromium_path  # noqa: E402

SCALING_LABELS = ("none (raw QKᵀ)", "÷ temperature", "÷ √d_k (the article)")
SENTENCES = (
    "The animal didn't cross the street because it was too tired.",
    "The cat sat on the mat. The cat was happy.",
    "Paris is the capital of France, and Berlin is the capital of Germany.",
    "I saw a saw that could saw wood.",
    "The keys to the cabinet are on the table.",
    "Attention lets every token look at every other token.",
    "A small model can still show how attention spreads over a sentence.",
    "Queries meet keys, and the softmax decides how much of each value flows.",
    "Scaling by the square root of the key width keeps the softmax soft.",
    "Long inputs make the score matrix grow with the square of their length.",
    "Positional encodings tell attention where each word stands.",
    "Masks decide which keys a query may see at all.",
)
# The watched chart is scrolled into view first: a chart out of view is drawn only when it comes near it
# (ui/components/lens_chart/chart.js), and one still showing its older figure is faded until then.
# A view kept in the page but not shown (or drawn ahead, ui/ahead.py) is laid out, invisible: its charts are not
# the page's (the inherited --lens-hidden says so).
SIGNATURE = """() => { const shown = d => d.offsetParent !== null
        && getComputedStyle(d).getPropertyValue('--lens-hidden').trim() !== '1';
    const box = [...document.querySelectorAll('.st-key-fig_weights .lens-chart')].find(shown)
        || [...document.querySelectorAll('.lens-chart')].find(shown);
    if (box) box.scrollIntoView({block: 'center'});
    const charts = [...document.querySelectorAll('.js-plotly-plot')].filter(el => el.data && !el.style.opacity
        && shown(el));
    const g = charts.find(el => el.data[0] && el.data[0].name === 'weights') || charts[0];
    return g ? JSON.stringify(g.data.map(t => t.z || t.y || null)) : ''; }"""
# The wait for that change, inside the page: a MutationObserver checks the signature at the next frame after the page
# changed, and resolves with the new one (or "" after ``timeoutMs``). The harness used to ask for the signature over
# the driver twenty times a second per page: with ten pages that polling alone cost about a tenth of the machine's
# CPU (report section 7, "seventeenth"), taken from the pages it measured. ``--poll`` keeps that way to compare.
WAIT_CHANGE = (
    """([before, timeoutMs]) => new Promise((resolve) => {
    const signature = """
    + SIGNATURE
    + """;
    let queued = false, done = false;
    const finish = (value) => { if (!done) { done = true; watcher.disconnect(); clearTimeout(timer); resolve(value); } };
    const check = () => { queued = false; const now = signature(); if (now && now !== before) finish(now); };
    const watcher = new MutationObserver(() => { if (!queued) { queued = true; requestAnimationFrame(check); } });
    watcher.observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true});
    const timer = setTimeout(() => finish(""), timeoutMs);
    check();
})"""
)
POLL = {"on": False}  # --poll: the older way, the signature asked for 20 times a second

# Streamlit's frontend disables every widget while its websocket is not CONNECTED: a click that times out on a
# disabled control says which state the page's connection was in (report section 7, "thirteenth").
CONNECTION = """() => { const e = document.querySelector('[data-test-connection-state]');
    return e ? e.getAttribute('data-test-connection-state') : 'unknown'; }"""
ERRORS_IN_PAGE = """() => document.querySelectorAll(
    '[data-testid="stException"], [data-testid="stAlertContentError"]').length"""


def server_pid(port: int) -> int | None:
    """The pid of the streamlit process listening on ``port`` (found by its command line)."""
    flag = f"--server.port={port}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"streamlit" in cmdline and flag in cmdline.split(b"\0"):
            return int(entry.name)
    return None


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` in MiB (VmRSS from /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) ``pid`` has used so far, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu_s() -> float:
    """CPU seconds every process on the machine has used so far (busy time from /proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


async def _wait_change(page, before: str, timeout_s: float) -> str | None:
    """The chart's new signature once it differs from ``before`` (None after ``timeout_s``)."""
    if not POLL["on"]:
        return await page.evaluate(WAIT_CHANGE, [before, timeout_s * 1000]) or None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = await page.evaluate(SIGNATURE)
        if now and now != before:
            return now
        await asyncio.sleep(0.05)
    return None


async def _connection(page) -> str:
    """The page's connection state as Streamlit's frontend shows it (CONNECTED, or why not)."""
    try:
        return str(await page.evaluate(CONNECTION))
    except Exception as err:  # noqa: BLE001 - a closed page has no state to read
        return f"unreadable ({type(err).__name__})"


# The page's console errors (Streamlit's frontend logs why it gave its connection up, e.g. "Failed to process a
# Websocket message"), by page: a failed click's error sample carries the last one.
CONSOLE_ERRORS: dict[int, list[str]] = {}


def _watch_console(page) -> None:
    errors = CONSOLE_ERRORS.setdefault(id(page), [])
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)


def _last_console_error(page) -> str:
    errors = CONSOLE_ERRORS.get(id(page)) or []
    return f"; last console error: {errors[-1][:300]}" if errors else ""


async def _open(browser, url: str, sentence: str, view: str, timeout_s: float):
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    _watch_console(page)
    address = f"{url}/?text={quote(sentence)}" + (f"&view={view}" if view != "derivation" else "")
    await page.goto(address, timeout=timeout_s * 1000)  # the same allowance as the first chart (not playwright's 30 s)
    signature = await _wait_change(page, "", timeout_s)
    return context, page, signature


async def _session(index: int, page, signature: str, stop_at: float, state: dict, timeout_s: float) -> None:
    step = 0
    while time.monotonic() < stop_at:
        label = SCALING_LABELS[step % len(SCALING_LABELS)]
        step += 1
        started = time.perf_counter()
        try:
            sidebar = page.locator('[data-testid="stSidebar"]')  # (a view kept hidden may hold the words too)
            await sidebar.get_by_text(label, exact=True).first.click(timeout=timeout_s * 1000)
            changed = await _wait_change(page, signature, timeout_s)
        except Exception as err:  # noqa: BLE001 - every failure is counted, the run goes on
            connection = await _connection(page)
            state["errors"].append(
                f"session {index} (connection {connection}): {type(err).__name__}: {str(err)[:200]}"
                + _last_console_error(page)
            )
            changed = None
        if changed is None:
            state["errors"].append(f"session {index}: the chart did not update after '{label}'")
            signature = await page.evaluate(SIGNATURE)
        else:
            state["latencies"].append(time.perf_counter() - started)
            state["per_session"][index] += 1
            signature = changed
        if await page.evaluate(ERRORS_IN_PAGE):
            state["errors"].append(f"session {index}: an error box or traceback is on the page")
        await asyncio.sleep(0.1)  # a person's pause, and room for the other sessions


async def _sample(pid: int, state: dict, stop: asyncio.Event) -> None:
    while not stop.is_set():
        state["rss"].append(rss_mb(pid))
        try:
            await asyncio.wait_for(stop.wait(), timeout=1.0)
        except TimeoutError:
            pass


async def _drive(
    url: str, pid: int, sessions: int, seconds: float, settle_s: float, timeout_s: float, view: str = "derivation"
) -> dict:
    from playwright.async_api import async_playwright

    state: dict = {"errors": [], "latencies": [], "rss": [], "per_session": [0] * sessions}
    numbers: dict = {"rss_start_mb": rss_mb(pid)}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        browser_errors: list[str] = []
        context, page, signature = await _open(browser, url, SENTENCES[0], view, 180)  # warm-up: loads the model
        if not signature:
            state["errors"].append("warm-up session: no chart")
        await context.close()
        await asyncio.sleep(2)
        numbers["rss_baseline_mb"] = rss_mb(pid)

        stop = asyncio.Event()
        sampler = asyncio.create_task(_sample(pid, state, stop))
        started = time.monotonic()
        opened = await asyncio.gather(
            *(_open(browser, url, SENTENCES[i % len(SENTENCES)], view, 180) for i in range(sessions))
        )
        numbers["open_s"] = time.monotonic() - started
        for i, (_, page, signature) in enumerate(opened):
            page.on("pageerror", lambda err, i=i: browser_errors.append(f"session {i}: page error {err}"))
            if not signature:
                state["errors"].append(f"session {i}: no chart after opening")
        stop_at = time.monotonic() + seconds
        server_cpu, all_cpu = cpu_s(pid), machine_cpu_s()
        await asyncio.gather(
            *(_session(i, page, sig or "", stop_at, state, timeout_s) for i, (_, page, sig) in enumerate(opened))
        )
        numbers["interaction_s"] = time.monotonic() - stop_at + seconds
        numbers["server_cpu_s"] = cpu_s(pid) - server_cpu
        numbers["machine_cpu_s"] = machine_cpu_s() - all_cpu
        for context, _, _ in opened:
            await context.close()
        await browser.close()
        stop.set()
        await sampler
        state["errors"] += browser_errors
    await asyncio.sleep(settle_s)  # the server drops closed sessions and their reruns finish
    numbers["rss_after_mb"] = rss_mb(pid)
    numbers["rss_peak_mb"] = max([*state["rss"], numbers["rss_baseline_mb"], numbers["rss_after_mb"]])
    latencies = state["latencies"]
    numbers.update(
        sessions=sessions,
        seconds=seconds,
        updates=len(latencies),
        min_updates_per_session=min(state["per_session"]),
        errors=len(state["errors"]),
        error_samples=state["errors"][:10],
        latency_p50_s=statistics.median(latencies) if latencies else float("nan"),
        latency_p95_s=percentile(latencies, 0.95),
        latency_max_s=max(latencies, default=float("nan")),
    )
    return numbers


def run(
    sessions: int = 10,
    seconds: float = 60.0,
    settle_s: float = 10.0,
    timeout_s: float = 60.0,
    view: str = "derivation",
    app_dir: str | Path | None = None,
    env: dict | None = None,
) -> dict:
    """Start the app, drive ``sessions`` browser sessions for ``seconds``, return the measurements.

    ``view``: the page each session shows ("derivation", the default page, draws 12 charts; "compare"
    one). The chart watched is the softmax weights (derivation) or the view's first chart.
    ``app_dir``: the checkout whose app.py runs (default: $ATTENTION_LENS_APP_DIR, else this
    repository; ``benchmarks/appserver.py``); ``env``: extra environment for the server.

    Keys: sessions, seconds, updates, min_updates_per_session, errors, error_samples, latency_p50_s, latency_p95_s,
    latency_max_s, open_s, interaction_s, server_cpu_s, machine_cpu_s (busy CPU seconds of the
    server and of the whole machine, browsers included, during the interaction), rss_start_mb,
    rss_baseline_mb, rss_peak_mb, rss_after_mb.
    """
    if not chromium_path():
        raise RuntimeError("no Chromium found (Debian/Ubuntu: apt-get install chromium, or set BROWSER_PATH)")
    from benchmarks.appserver import app_server

    server_env = {"STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL": "5", "PYTHONUNBUFFERED": "1", **(env or {})}
    with app_server(app_dir, env=server_env, timeout=120) as server:
        url = server.url
        pid = server_pid(server.port) or server.proc.pid
        numbers = asyncio.run(_drive(url, pid, sessions, seconds, settle_s, timeout_s, view))
        return {**numbers, "view": view, "app_dir": str(server.app_dir)}


def summary(numbers: dict) -> str:
    return (
        f"{numbers['sessions']} sessions ({numbers.get('view', 'derivation')} view, opened in "
        f"{numbers['open_s']:.0f} s) x {numbers['interaction_s']:.0f} s: {numbers['updates']} updates, "
        f"{numbers['errors']} errors; latency p50 {numbers['latency_p50_s']:.2f} s, "
        f"p95 {numbers['latency_p95_s']:.2f} s, max {numbers['latency_max_s']:.2f} s; CPU: server "
        f"{numbers['server_cpu_s']:.0f} s of {numbers['machine_cpu_s']:.0f} s used on the machine "
        f"({os.cpu_count()} cores); server RSS start "
        f"{numbers['rss_start_mb']:.0f} MiB, baseline {numbers['rss_baseline_mb']:.0f} MiB, peak "
        f"{numbers['rss_peak_mb']:.0f} MiB, after close {numbers['rss_after_mb']:.0f} MiB"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds to wait after closing the sessions")
    parser.add_argument("--view", default="derivation", help="derivation (12 charts, the default page) or compare")
    parser.add_argument("--json", type=Path, help="also write the numbers to this file")
    parser.add_argument("--app-dir", help="checkout whose app.py runs (default: $ATTENTION_LENS_APP_DIR or this repo)")
    parser.add_argument("--poll", action="store_true", help="wait for a change by asking the page 20 times a second")
    args = parser.parse_args(argv)
    POLL["on"] = args.poll
    numbers = run(args.sessions, args.seconds, args.settle, view=args.view, app_dir=args.app_dir)
    print(summary(numbers))
    for sample in numbers["error_samples"]:
        print("  error:", sample)
    if args.json:
        args.json.write_text(json.dumps(numbers, indent=2))
    return 1 if numbers["errors"] else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
