"""What Streamlit itself costs for a change on this machine: a bare page, a selectbox or a radio in a fragment.

    .venv/bin/python -m benchmarks.bare_box [--changes 6] [--rounds 2]

A page with nothing of the app in it (written to a temporary folder and run by ``streamlit run``, as
``benchmarks/appserver.py`` runs the app): a fragment holding a 64-option selectbox ("box") or an 8-option radio
("radio") and a subheader that names the value. In headless Debian Chromium each change is timed from just
before the click until the last change of the page (a MutationObserver; settled when nothing changed for 0.5 s),
``--changes`` times per control, the two controls alternating ``--rounds`` times. No chart, no computation: the
floor under any change of the app's query box (a selectbox) on the same machine. Used for report section 7,
"twenty-ninth".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

APP = """import streamlit as st

mode = st.query_params.get("mode", "box")


@st.fragment
def view():
    if mode == "box":
        st.selectbox("Query token", list(range(64)), key="q", format_func=lambda i: f"{i}: token {i}")
    else:
        st.radio("Query token", list(range(8)), key="q", horizontal=True)
    st.subheader(f"Query {st.session_state.q}")


view()
"""
ARM = """() => { window.__t0 = performance.now(); window.__last = window.__t0;
  window.__ob = new MutationObserver(() => { window.__last = performance.now(); });
  window.__ob.observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true}); }"""
SETTLED = """() => new Promise(done => { const check = () => {
  if (performance.now() - window.__last > 500) { window.__ob.disconnect(); done(window.__last - window.__t0); }
  else setTimeout(check, 50); }; setTimeout(check, 50); })"""


def measure(url: str, changes: int, rounds: int) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM_ARGS, chromium_path

    seconds: dict[str, list[float]] = {"box": [], "radio": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        for _ in range(rounds):
            for mode in seconds:
                page.goto(f"{url}/?mode={mode}")
                page.wait_for_selector("h3", timeout=60_000)
                time.sleep(2)
                for i in range(1, changes + 1):
                    if mode == "box":
                        page.get_by_role("combobox", name="Query token").click()
                        target = page.get_by_role("option").nth(i)
                        target.wait_for()
                    else:
                        target = page.get_by_text(str(i % 8), exact=True).first
                    page.evaluate(ARM)
                    target.click()
                    seconds[mode].append(page.evaluate(SETTLED) / 1e3)
                    time.sleep(0.8)
        browser.close()
    return seconds


def main(argv: list[str] | None = None) -> int:
    from .appserver import app_server

    parser = argparse.ArgumentParser(prog="python -m benchmarks.bare_box", description=__doc__.split("\n")[0])
    parser.add_argument("--changes", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "app.py").write_text(APP)
        with app_server(folder) as server:
            seconds = measure(server.url, args.changes, args.rounds)
    for mode, values in seconds.items():
        print(
            f"bare {mode}: click -> last change, median {statistics.median(values):.3f} s "
            f"({', '.join(f'{s:.2f}' for s in values)})"
        )
    return 0


if __name__ == "__main__":
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    raise SystemExit(main())
