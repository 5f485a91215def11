"""A person's view of the pitfalls lab's long-context sections, in headless Chromium.

Opened by a link on the "O(n²) cost" tab: the tiled-attention step slider moves, the figure follows and
the link follows it; then the KV cache on SmolLM2 decodes a few tokens and steps back through them.
Saves screenshots of both sections (desktop width) to docs/screenshots/, as tests/test_browser.py does.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlencode, urlparse

import pytest

from tests.test_browser import SHOTS, no_errors, wait_idle

pytestmark = pytest.mark.browser
TEXT = "The cat sat on the mat because it was tired."  # 13 MiniLM tokens: 16 tiles of 4 x 4


def figure_title(page, prefix: str) -> str:
    """The title of the first plotly figure whose title starts with ``prefix``, as the browser holds it."""
    return page.evaluate(
        """(prefix) => { const g = [...document.querySelectorAll('.js-plotly-plot')]
                   .find(el => el.layout && el.layout.title && String(el.layout.title.text).startsWith(prefix));
                   return g ? String(g.layout.title.text) : ''; }""",
        prefix,
    )


def wait_title(page, prefix: str, pattern: str, timeout_ms: int = 60000) -> str:
    """Poll until that figure's title matches ``pattern`` (the rerun reached the browser)."""
    waited, title = 0, ""
    while waited < timeout_ms:
        title = figure_title(page, prefix)
        if re.search(pattern, title):
            return title
        page.wait_for_timeout(250)
        waited += 250
    return title


def press(page, key: str, widget_key: str, times: int = 1) -> None:
    """Keyboard presses on the thumb of the slider whose Streamlit key is ``widget_key``."""
    page.locator(f".st-key-{widget_key}").scroll_into_view_if_needed()
    thumb = page.locator(f'.st-key-{widget_key} [role="slider"], .st-key-{widget_key} input[type="range"]').first
    thumb.focus()  # React Aria's slider: a visually hidden range input takes the keys
    for _ in range(times):
        page.keyboard.press(key)


def screenshot(page, widget_key: str, name: str) -> None:
    """The slider ``widget_key`` at the top of the window (below Streamlit's header), its figure under it."""
    page.locator(f".st-key-{widget_key}").evaluate(
        "e => { e.style.scrollMarginTop = '70px'; e.scrollIntoView({block: 'start'}); }"
    )
    page.wait_for_timeout(300)
    page.screenshot(path=str(SHOTS / name))


def link(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def test_tiled_step_and_kv_cache_from_a_link(browser, url):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    params = {"text": TEXT, "view": "pitfalls", "pitfall": "cost", "tiled_block": 4, "tiled_step": 3}
    page.goto(f"{url}/?{urlencode(params)}")
    wait_idle(page, timeout=90000)
    no_errors(page)
    tiled = "Tiled attention"
    assert re.search(r"4×4 tiles: step 3 of 16$", wait_title(page, tiled, r"step 3 of")), figure_title(page, tiled)

    press(page, "ArrowRight", "tiled_step", times=3)
    assert wait_title(page, tiled, r"step 6 of 16$").endswith("step 6 of 16")
    wait_idle(page)
    no_errors(page)
    page.wait_for_function("() => location.search.includes('tiled_step=6')", timeout=30000)
    assert link(page)["pitfall"] == "cost" and link(page)["tiled_block"] == "4"
    screenshot(page, "tiled_step", "pitfalls-tiled.png")

    params = {"text": "The capital of France is", "model": "smollm2", "view": "pitfalls", "pitfall": "cost"}
    page.goto(f"{url}/?{urlencode({**params, 'kv_steps': 3})}")
    wait_idle(page, timeout=120000)
    no_errors(page)
    decode = page.get_by_role("button", name="Decode")
    decode.scroll_into_view_if_needed()
    decode.click()
    kv = "KV cache, step"
    assert wait_title(page, kv, r"step 3 of 3", timeout_ms=120000).startswith("KV cache, step 3 of 3")
    wait_idle(page)
    no_errors(page)
    press(page, "ArrowLeft", "kv_step", times=2)
    assert wait_title(page, kv, r"step 1 of 3").startswith("KV cache, step 1 of 3")
    wait_idle(page)
    no_errors(page)
    page.wait_for_function("() => location.search.includes('kv_step=1')", timeout=30000)
    screenshot(page, "kv_step", "pitfalls-kvcache.png")
    page.close()
