"""Issue 8, in a real browser: text passed through ui.text.plain shows literally in Streamlit's frontend.

AppTest does not render markdown, so this starts a tiny Streamlit page that shows hostile strings
through ``plain`` in a caption, an alert and a metric, and compares what Chromium displays
(``innerText``) with the original string. The reference is the string itself.
"""

from __future__ import annotations

import json

import pytest

from tests.browser import CHROMIUM_ARGS, chromium_path, streamlit_app

pytestmark = pytest.mark.browser

CASES = [
    ":smile: :+1: :)",
    ":red[red] :blue-background[x] :material/home: :rainbow[r]",
    "$x^2$ and $$y$$ and \\(z\\) \\[w\\]",
    "**bold** __b__ _it_ *it* ~~s~~ ~s~",
    "<b>b</b><script>alert(1)</script><img src=x onerror=alert(2)>",
    "# head",
    "a\n===",
    "a\n---",
    "&lt; &amp; &#x41; &copy;",
    "[link](javascript:alert(1)) ![img](x.png) [ref][1]",
    "`code` ``two``",
    "| a | b |",
    "1. one",
    "> quote",
    "- item",
    "+ item",
    "\\*x\\* \\",
    "[CLS] ##ing ·ing <|im_start|> </s>",
    "x\x00y",
    "שלום עולם مرحبا",
    "👩\u200d👩\u200d👧\u200d👦 e\u0301",
    "a<b>c a < b > c",
    "[^1] - [ ] task",
    "=SUM(A1) @x",
    "{{ template }} {% tag %}",
    "100% 50\\% #1 !important ;;",
]

PAGE = """
import json
from pathlib import Path

import streamlit as st
from ui.text import plain

cases = json.loads(Path(__file__).with_name("cases.json").read_text(encoding="utf-8"))
for case in cases:
    st.caption(plain(case))
    st.warning(plain(case))
    st.metric("m", plain(case))
st.markdown("PAGE-END")
"""


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    path = chromium_path()
    if not path:
        pytest.skip("Debian chromium is not installed (make test installs it: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    folder = tmp_path_factory.mktemp("plain")
    (folder / "cases.json").write_text(json.dumps(CASES), encoding="utf-8")
    (folder / "page.py").write_text(PAGE, encoding="utf-8")
    with streamlit_app(str(folder / "page.py")) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        tab = browser.new_page()
        tab.goto(url)
        tab.wait_for_selector("text=PAGE-END", timeout=90_000)
        tab.wait_for_timeout(1000)
        yield tab
        browser.close()


def _texts(page, selector: str) -> list[str]:
    return page.eval_on_selector_all(selector, "els => els.map(e => e.innerText.trim())")


@pytest.mark.parametrize(
    "selector",
    ['[data-testid="stCaptionContainer"]', '[data-testid="stAlertContentWarning"]', '[data-testid="stMetricValue"]'],
)
def test_plain_text_renders_literally(page, selector):
    seen = _texts(page, selector)
    assert len(seen) == len(CASES), (selector, seen)
    expected = [" ".join(case.replace("\x00", "␀").split()) for case in CASES]
    got = [" ".join(text.split()) for text in seen]
    assert got == expected
    html = page.content()
    assert "<script>alert(1)</script>" not in html and 'onerror="alert(2)"' not in html
