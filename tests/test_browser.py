"""A person's view: the app in headless Chromium, typing text, toggling scaling and the causal mask.

Saves screenshots at desktop (1366x900) and phone (390x844) widths to docs/screenshots/.
"""

from __future__ import annotations

from urllib.parse import quote

import numpy as np
import pytest

from benchmarks import plotly_calls
from tests.browser import ROOT, streamlit_app
from ui.controls import MASK_LABELS

pytestmark = pytest.mark.browser
SHOTS = ROOT / "docs" / "screenshots"
CHART = ".js-plotly-plot svg.main-svg"


def chart_signature(page) -> str:
    """A fingerprint of the weights heatmap's data as the browser holds it. The chart is scrolled into view
    first: a chart out of view is drawn only when it comes near it (ui/components/lens_chart/chart.js)."""
    return page.evaluate(
        """() => { const box = document.querySelector('.st-key-fig_weights .lens-chart');
                   if (box) box.scrollIntoView({block: 'center'});
                   const g = [...document.querySelectorAll('.js-plotly-plot')]
                   .find(el => el.data && el.data[0] && el.data[0].name === 'weights');
                   if (!g || g.style.opacity) return '';  // not drawn yet, or still the older figure
                   return JSON.stringify(g.data[0].z); }"""
    )


def wait_change(page, before: str, timeout_ms: int = 60000) -> str:
    """Poll until the weights heatmap's data differs from ``before`` (the rerun reached the browser)."""
    waited = 0
    while waited < timeout_ms:
        now = chart_signature(page)
        if now and now != before:
            return now
        page.wait_for_timeout(250)
        waited += 250
    return chart_signature(page)


# Every chart drawn, as printing does ('beforeprint' draws every chart waiting), asked again at each check: a chart
# whose figure arrives after one 'beforeprint' waits until it comes near the view, like any chart out of view.
ALL_DRAWN = """() => { window.dispatchEvent(new Event('beforeprint'));
  return [...document.querySelectorAll('.lens-chart')].every(d => d.classList.contains('js-plotly-plot')
    || d.textContent || (d.closest('[data-testid="stElementContainer"]') || {style: {}}).style.display === 'none'); }"""


# The views kept in the page are drawn ahead once it has been left alone for a second (ui/ahead.py): settled when
# no ask is on its way and none is left.
AHEAD_SETTLED = """() => { const s = window.__lensAhead; return !s || (!s.asking && s.pending().length === 0); }"""


def wait_idle(page, timeout=60000):
    """The page has run its script, drawn the views kept in the page ahead, and drawn every chart, also those out
    of view (a chart out of view is drawn only when it comes near it, or when the page is printed:
    ui/components/lens_chart/chart.js)."""
    page.wait_for_selector(".lens-chart, " + CHART, state="attached", timeout=timeout)
    # Streamlit shows its status widget (a running icon and "Stop") only while a script runs; its text no
    # longer says "Running", so wait for the widget to be gone, twice across a short pause (a run that ends
    # can be followed by another, e.g. a fragment's).
    for _ in range(2):
        page.wait_for_function(
            "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
            timeout=timeout,
        )
        page.wait_for_function(AHEAD_SETTLED, timeout=timeout, polling=100)
        page.wait_for_function(ALL_DRAWN, timeout=timeout, polling=100)
        page.wait_for_timeout(700)


def no_errors(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.locator('[data-testid="stAlertContentError"]').count() == 0


def test_desktop_interaction_and_screenshots(browser, url):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(url)
    wait_idle(page)
    no_errors(page)
    page.screenshot(path=str(SHOTS / "desktop.png"))
    first = wait_change(page, "")  # drawn once scrolled near
    assert first

    text = page.get_by_role("textbox", name="Text")
    text.fill("Attention lets every word look at every other word.")
    text.press("Control+Enter")
    after_text = wait_change(page, first)
    assert after_text and after_text != first
    no_errors(page)

    page.get_by_text("none (raw QKᵀ)").click()
    after_scaling = wait_change(page, after_text)
    assert after_scaling != after_text
    no_errors(page)

    page.get_by_role("combobox", name="Mask").first.click()
    page.get_by_role("option", name="causal: no future keys").click()
    assert wait_change(page, after_scaling) != after_scaling
    wait_idle(page)
    no_errors(page)
    page.screenshot(path=str(SHOTS / "desktop-causal.png"), full_page=True)
    page.close()


def test_phone_width_has_no_horizontal_overflow(browser, url):
    page = browser.new_page(viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True)
    page.goto(url)
    wait_idle(page)
    no_errors(page)
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    page.screenshot(path=str(SHOTS / "phone.png"))
    assert overflow <= 1, f"page is {overflow}px wider than the phone screen"
    page.close()


def heads_page(browser, url):
    """The Heads view, idle, with every websocket frame the page receives counted from before it loads (so
    a test can tell a change made in the browser alone from one that ran the script)."""
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    received: list = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda frame: received.append(frame)))
    page.goto(url + "/?view=heads")
    wait_idle(page)
    no_errors(page)
    assert received, "the page's websocket frames are not being counted"
    return page, received


FLIP_STATE = """() => { const g = [...document.querySelectorAll('.js-plotly-plot')]
    .find(el => el.layout && el.layout.sliders && el.data.some(t => t.name === 'head 0'));
  if (!g) return null;
  return {title: g.layout.title.text, shown: g.data.filter(t => t.visible === true && t.name.startsWith('head '))
          .map(t => t.name)}; }"""


def test_heads_flip_in_the_browser_without_a_server_run(browser, url):
    """The Heads view's one-head-at-a-time chart switches heads from its own slider: the shown trace and the
    title change in the page, and the server runs no script (no websocket message arrives)."""
    page, received = heads_page(browser, url)
    assert page.evaluate(FLIP_STATE)["shown"] == ["head 0"]
    before = len(received)
    chart = page.locator(".js-plotly-plot", has=page.locator(".slider-container")).first
    slider = chart.locator(".slider-container").first
    slider.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    rail = chart.locator(".slider-rail-touch-rect").first.bounding_box()
    step = slider.get_by_text("3", exact=True).first.bounding_box()
    page.mouse.click(step["x"] + step["width"] / 2, rail["y"] + rail["height"] / 2)
    page.wait_for_function("() => (" + FLIP_STATE + ")().shown[0] === 'head 3'", timeout=10000)
    state = page.evaluate(FLIP_STATE)
    assert state["shown"] == ["head 3"] and "head 3" in state["title"]
    page.wait_for_timeout(1000)
    assert len(received) == before  # switched in the browser alone
    no_errors(page)
    chart.evaluate("el => el.scrollIntoView({block: 'center'})")  # the whole chart on screen, title included
    page.wait_for_timeout(300)
    chart.screenshot(path=str(SHOTS / "heads-flip.png"))
    page.close()


PLOTLY_SPY = """() => { window.__reacts = []; const real = window.Plotly.react;
  window.Plotly.react = function (div, ...rest) {
    window.__reacts.push(div.isConnected && div.getClientRects().length > 0); return real.call(this, div, ...rest); }; }"""
STATUS_GONE = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"


def test_a_view_switched_away_draws_nothing_off_the_page(browser, url):
    """Heads & layers' charts below the screen wait for a pause before they are drawn. A switch to another view
    before then keeps them waiting; it does not draw them into <div>s that are hidden (the view stays in the page,
    app.py ``KEPT_VIEWS``) or no longer on the page while the next view opens (ui/components/lens_chart/chart.js;
    that cost a switch to the Query inspector about 0.4 s before the views were kept, and 0.8 s after)."""
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(url)
    wait_idle(page)  # (every kept view drawn ahead, ui/ahead.py)
    page.get_by_text("none (raw QKᵀ)", exact=True).first.click()  # a numbers change clears them
    page.wait_for_function("() => !document.querySelector('.st-key-lens-box-heads')", timeout=60000)
    page.wait_for_function(STATUS_GONE, timeout=60000)
    page.evaluate(PLOTLY_SPY)
    page.get_by_text("Heads & layers", exact=True).first.click()  # within the pause before the page draws ahead
    page.wait_for_function("() => window.__reacts.length > 0", timeout=60000)  # the grid, in view, is drawn
    page.wait_for_function(STATUS_GONE, timeout=60000)
    page.get_by_text("Query inspector", exact=True).first.click()  # well within the pause
    page.wait_for_selector("[data-testid='stSelectbox'] >> text=Query token", timeout=60000)
    page.wait_for_function(STATUS_GONE, timeout=60000)
    page.wait_for_timeout(2500)  # past the pause of the charts that left
    drawn = page.evaluate("() => window.__reacts")
    assert len(drawn) >= 2 and all(drawn), drawn  # both views' charts in view drawn; nothing off the page
    no_errors(page)
    page.close()


BOX_HEIGHT = """(name) => { const box = document.querySelector('.st-key-lens-box-' + name);
  return box ? box.getBoundingClientRect().height : -1; }"""  # -1: not in the page
CLICK_VIEW = """async (label) => {
  const option = [...document.querySelectorAll('.st-key-view [role="radio"]')].find(o => o.textContent === label);
  option.click();
  await Promise.resolve();  // microtasks only (the control's MutationObserver): no message from the server yet
  await Promise.resolve();
  const height = (name) => document.querySelector('.st-key-lens-box-' + name).getBoundingClientRect().height;
  return [document.body.getAttribute('data-lens-view'), height('heads'), height('derivation')]; }"""


def test_a_click_on_the_view_control_shows_a_kept_view_before_the_server_answers(browser, url):
    """ui/switch.py: the CSS that hides the views not chosen keys on <body data-lens-view>, which the page sets
    from the control itself in the click's own task; a view kept in the page is shown before any message from
    the server (which used to send the CSS naming the boxes to hide)."""
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(url)
    wait_idle(page)
    assert page.evaluate("() => document.body.getAttribute('data-lens-view')") == "derivation"
    page.get_by_text("Heads & layers", exact=True).first.click()  # its first visit: drawn, then kept in the page
    page.wait_for_function(f"() => ({BOX_HEIGHT})('heads') > 0", timeout=60000)
    wait_idle(page)
    page.get_by_text("Derivation", exact=True).first.click()
    page.wait_for_function(f"() => ({BOX_HEIGHT})('heads') === 0 && ({BOX_HEIGHT})('derivation') > 0")
    wait_idle(page)
    view, heads, derivation = page.evaluate(CLICK_VIEW, "Heads & layers")
    assert view == "heads" and heads > 0 and derivation == 0, (view, heads, derivation)
    wait_idle(page)  # and the server's answer keeps it so
    assert page.evaluate(f"() => [({BOX_HEIGHT})('heads') > 0, ({BOX_HEIGHT})('derivation')]") == [True, 0]
    view, heads, derivation = page.evaluate(CLICK_VIEW, "Heads & layers")  # the chosen option again: cleared
    assert view == "derivation" and heads == 0 and derivation > 0, (view, heads, derivation)
    wait_idle(page)
    assert page.evaluate(f"() => [({BOX_HEIGHT})('heads'), ({BOX_HEIGHT})('derivation') > 0]") == [0, True]
    no_errors(page)
    page.close()


DRAW_SPY = """() => { window.__draws = []; for (const name of ['react', 'newPlot', 'update']) {
  const real = window.Plotly[name];
  window.Plotly[name] = function (div, ...rest) {
    const box = div.closest && div.closest('[class*="st-key-"]');
    window.__draws.push([name, box ? [...box.classList].find(c => c.startsWith('st-key-')) : '']);
    return real.call(this, div, ...rest); }; } }"""
HEAD_MARKS = """() => { const at = key => document.querySelector('.st-key-' + key + ' .lens-chart');
  const grid = at('fig_head_grid'), flip = at('fig_head_flip'), overview = at('fig_overview');
  if (!grid || !grid.layout || !flip || !flip.layout || !overview || !overview.layout) return null;
  return {marked: grid.layout.annotations.filter(a => a.font && a.font.color).map(a => a.text),
          panel: (grid.layout.shapes || []).map(s => s.xref),
          flip: flip.data.filter(t => t.visible === true && t.name.startsWith('head ')).map(t => t.name),
          slider: flip.layout.sliders[0].active, title: flip.layout.title.text,
          cell: (overview.layout.shapes || []).map(s => [s.x0, s.y0])}; }"""


# Marks every chart of the page once; returns the keys of those not marked before (new <div>s since the last call).
MARK_CHARTS = """() => [...document.querySelectorAll('.lens-chart')].filter(d => { const seen = d.__testMark;
  d.__testMark = true; return !seen; }).map(d => { const box = d.closest('[class*="st-key-fig_"]');
  return box ? [...box.classList].find(c => c.startsWith('st-key-fig_')) : ''; })"""


def test_a_head_change_on_heads_and_layers_redraws_only_the_marks(browser, url):
    """Heads & layers keeps one figure for every head: a head change sends only the new head's mark, and the page
    applies it with Plotly.update to the charts already drawn (a coloured, outlined panel, the flip chart's head, the
    overview's outlined cell), with no new Plotly.react of any of them (ui/components/lens_chart/chart.js)."""
    page, _ = heads_page(browser, url)
    page.wait_for_function(ALL_DRAWN, timeout=60000, polling=100)
    assert page.evaluate(HEAD_MARKS) == {
        "marked": ["head 0"],
        "panel": ["x domain"],
        "flip": ["head 0"],
        "slider": 0,
        "title": page.evaluate(HEAD_MARKS)["title"],
        "cell": [[-0.5, -0.5]],
    }
    page.evaluate(DRAW_SPY)
    page.evaluate(MARK_CHARTS)
    head = page.get_by_label("Head", exact=True)
    head = [head.nth(i) for i in range(head.count()) if head.nth(i).is_visible()][0]
    thumb = head.locator('[role="slider"], input[type="range"]').first
    thumb.focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    wait_idle(page)  # (which draws the charts out of view too, as printing does: their update waits until then)
    page.wait_for_function("() => ((" + HEAD_MARKS + ")() || {}).slider === 2", timeout=60000)
    marks = page.evaluate(HEAD_MARKS)
    assert marks["marked"] == ["head 2"] and marks["panel"] == ["x3 domain"]
    assert marks["flip"] == ["head 2"] and marks["cell"] == [[1.5, -0.5]]
    assert "head 2" in marks["title"]
    draws = page.evaluate("() => window.__draws")
    marked = [
        key for name, key in draws if key in ("st-key-fig_head_grid", "st-key-fig_head_flip", "st-key-fig_overview")
    ]
    # (a chart drawn anew would be a new <div>, its view's elements cleared and sent again: said on failure)
    assert marked and all(name == "update" for name, key in draws if key in marked), (draws, page.evaluate(MARK_CHARTS))
    no_errors(page)
    page.close()


def test_a_first_visit_draws_each_marked_chart_once_with_its_mark(browser, url):
    """Heads & layers opened on head 2: each figure kept for every head arrives with head 2's mark as an update,
    which the page puts into the figure before drawing it (ui/components/lens_chart/marks.js), so each chart is
    drawn once, already marked. Drawn and then updated, the flip chart and the attention lines were computed twice
    by plotly.js (their slider's `visible`)."""
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.add_init_script(plotly_calls.SPY)  # every Plotly call, from before plotly.js loads: [name, chart key, ms]
    page.goto(url + "/?view=heads&head=2")
    wait_idle(page)
    page.wait_for_function(ALL_DRAWN, timeout=60000, polling=100)
    page.wait_for_function("() => ((" + HEAD_MARKS + ")() || {}).slider === 2", timeout=60000)
    marks = page.evaluate(HEAD_MARKS)
    assert marks["marked"] == ["head 2"] and marks["panel"] == ["x3 domain"]
    assert marks["flip"] == ["head 2"] and marks["cell"] == [[1.5, -0.5]] and "head 2" in marks["title"]
    lines = page.evaluate(
        "() => document.querySelector('.st-key-fig_lines .lens-chart').data.filter(t => t.visible === true)"
        ".map(t => t.name)"
    )
    heads_shown = [name for name in lines if name.startswith("head ")]  # (beside the query and key token labels)
    assert heads_shown and all(name.startswith("head 2 ") for name in heads_shown), lines
    draws = page.evaluate("() => window.__calls")
    for key in ("fig_head_grid", "fig_head_flip", "fig_overview", "fig_lines"):
        assert [name for name, where, _ in draws if where == key] == ["react"], (key, draws)
    no_errors(page)
    page.close()


def test_a_chart_s_downloads_appear_when_their_popover_is_opened(browser, url):
    """The SVG, PNG and CSV buttons under a chart are made only while its popover is open: a click on the
    popover reruns the view, the buttons appear in it, and the CSV holds the figure's numbers."""
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(url)
    wait_idle(page)
    assert page.get_by_role("button", name="CSV", exact=True).count() == 0  # nothing made while closed
    box = page.locator(".st-key-open_export_weights")
    box.scroll_into_view_if_needed()
    box.get_by_role("button").first.click()
    csv = page.get_by_role("button", name="CSV", exact=True)
    csv.wait_for(state="visible", timeout=60000)
    assert page.get_by_role("button", name="SVG", exact=True).is_visible()
    with page.expect_download(timeout=60000) as download:
        csv.click()
    text = open(download.value.path(), encoding="utf-8").read()
    assert text.count("\n") > 2 and "," in text
    no_errors(page)
    page.close()


def test_a_link_just_opened_draws_its_first_chart_out_of_view_and_the_others_when_they_come_near(browser, url):
    """A chart out of view (beyond the watcher's margin, half a screen) waits until it comes near, but the page's
    first chart is drawn as it arrives, wherever it is (at 512 tokens the softmax weights sit below the first
    screen): a link just opened shows a chart without a scroll's wait."""
    page = browser.new_page(viewport={"width": 1366, "height": 200})  # every chart below the watcher's margin
    page.goto(url)
    far = """() => [...document.querySelectorAll('.lens-chart')].filter(d => d.getBoundingClientRect().top > 200 * 1.5
             && d.getClientRects().length && getComputedStyle(d).getPropertyValue('--lens-hidden').trim() !== '1')"""
    # (a view drawn ahead, hidden, ui/ahead.py, is not the page's: its charts are drawn when the browser is idle)
    page.wait_for_function(f"() => ({far})().some(d => d.classList.contains('js-plotly-plot'))", timeout=30000)
    page.wait_for_timeout(1500)
    drawn = page.evaluate(f"() => ({far})().map(d => d.classList.contains('js-plotly-plot'))")
    assert drawn.count(True) == 1 and len(drawn) > 1, drawn  # the first; the others wait
    shown = "getComputedStyle(d).getPropertyValue('--lens-hidden').trim() !== '1'"
    drawn_shown = f"() => [...document.querySelectorAll('.js-plotly-plot')].filter(d => {shown}).length"
    assert page.evaluate(drawn_shown) == 1  # none nearer either
    last = page.locator(".lens-chart").last
    last.scroll_into_view_if_needed()  # scrolled near: drawn
    page.wait_for_function(
        "() => [...document.querySelectorAll('.lens-chart')].pop().classList.contains('js-plotly-plot')"
    )
    no_errors(page)
    page.close()


STATISTIC_STATE = """() => { const g = [...document.querySelectorAll('.js-plotly-plot')]
    .find(el => el.layout && el.layout.updatemenus && el.data.some(t => t.name === 'overview_entropy'));
  if (!g) return null;
  return {title: g.layout.title.text, shown: g.data.filter(t => t.visible === true).map(t => t.name)}; }"""


def test_overview_statistic_switches_in_the_browser_without_a_server_run(browser, url):
    """The layer x head overview carries every statistic; its buttons switch the shown one (trace, title) in
    the page, and the server runs no script."""
    page, received = heads_page(browser, url)
    assert page.evaluate(STATISTIC_STATE)["shown"] == ["overview_entropy"]
    chart = page.locator(".js-plotly-plot", has=page.locator(".updatemenu-container")).first
    chart.evaluate("el => el.scrollIntoView({block: 'center'})")
    page.wait_for_timeout(300)
    before = len(received)
    chart.locator(".updatemenu-button", has_text="|i−j|").first.click()
    page.wait_for_function("() => (" + STATISTIC_STATE + ")().shown[0] === 'overview_distance'", timeout=10000)
    state = page.evaluate(STATISTIC_STATE)
    assert state["shown"] == ["overview_distance"] and "distance" in state["title"]
    page.wait_for_timeout(1000)
    assert len(received) == before  # switched in the browser alone
    no_errors(page)
    chart.screenshot(path=str(SHOTS / "heads-statistic.png"))
    page.close()


GRID_HOVER = """([head, row, col]) => { const plots = [...document.querySelectorAll('.js-plotly-plot')];
  const grid = plots.find(el => !el.layout.sliders && el.data.some(t => t.name === 'head 0' && t.customdata));
  const flip = plots.find(el => el.layout.sliders && el.data.some(t => t.name === 'head 0'));
  grid.scrollIntoView({block: 'center'});
  const trace = grid.data.findIndex(t => t.name === 'head ' + head);
  const t = grid._fullData[trace];
  window.Plotly.Fx.unhover(grid);
  window.Plotly.Fx.hover(grid, {xval: col, yval: row}, t.xaxis + t.yaxis);
  const label = grid.querySelector('.hoverlayer .hovertext');
  return {text: label ? label.textContent : '', query: flip.data[0].y[row], key: flip.data[0].x[col],
          weight: grid.calcdata[trace][0].z[row][col], cells: grid.data[trace].customdata.length}; }"""


def test_the_grid_s_hover_names_both_tokens_of_every_cell(browser, url):
    """The heads grid's hover labels are sent once per row and column (ui/label_grids.py ``take_label_grids``) and
    built again in the browser (chart.js): hovering a cell of any head still names its query and key tokens (the
    flip chart's axis labels) beside its weight."""
    page, _ = heads_page(browser, url)
    for head, row, col in ((0, 2, 1), (5, 1, 3), (11, 0, 4)):
        page.wait_for_timeout(150)  # plotly draws at most one hover each 50 ms
        seen = page.evaluate(GRID_HOVER, [head, row, col])
        assert seen["query"] and seen["key"] and seen["cells"] > max(row, col)
        assert f"query {seen['query']}" in seen["text"] and f"key {seen['key']}" in seen["text"], seen
        assert f"weight {float(seen['weight']):.4g}" in seen["text"], seen
    no_errors(page)
    page.close()


def test_a_click_on_an_overview_cell_selects_that_layer_and_head(browser, url):
    """The overview (a lens chart whose clicks come back to the server) selects the clicked layer and head in
    the sidebar and everywhere; a click on another chart selects nothing and sends nothing."""
    page, received = heads_page(browser, url)

    def value(label: str) -> str | None:  # None while the rerun redraws the sidebar
        return page.evaluate(
            f"() => {{ const e = document.querySelector('input[type=range][aria-label=\"{label}\"]');"
            " return e ? e.value : null; }"
        )

    def cell_centre(key: str, row: int, col: int) -> tuple[float, float]:
        chart = page.locator(f".st-key-{key} .lens-chart")
        chart.evaluate("el => el.scrollIntoView({block: 'center'})")
        drag = chart.locator(".nsewdrag").first
        drag.wait_for(state="visible", timeout=30000)
        page.wait_for_timeout(300)
        rows, cols = page.evaluate(
            f"() => {{ const z = document.querySelector('.st-key-{key} .lens-chart').data[0].z;"
            " const m = z._inputArray || z; return [m.length, m[0].length]; }"
        )
        box = drag.bounding_box()
        return box["x"] + (col + 0.5) / cols * box["width"], box["y"] + (row + 0.5) / rows * box["height"]

    before = len(received)
    page.mouse.click(*cell_centre("fig_head_grid", 0, 1))  # a chart without clicks
    page.wait_for_timeout(1500)
    assert (value("Layer"), value("Head")) == ("0", "0") and len(received) == before

    layer, head = 1, 3
    for _ in range(3):  # (a click that lands while the page is still redrawing is clicked again)
        page.mouse.click(*cell_centre("fig_overview", layer, head))
        for _ in range(30):  # the click reruns the app with the new layer and head
            if (value("Layer"), value("Head")) == (str(layer), str(head)):
                break
            page.wait_for_timeout(500)
        else:
            continue
        break
    assert (value("Layer"), value("Head")) == (str(layer), str(head))
    wait_idle(page)
    no_errors(page)
    page.close()


def test_the_views_charts_use_the_app_s_own_plotly_js_bundle(browser, url):
    """The derivation view's charts are lens charts (ui/chart.py), drawn by the app's committed plotly.js bundle
    served from app/static/ (cacheable: it has validators), not the full bundle nor Streamlit's chart chunk."""
    from ui import plotly_js

    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(url)
    wait_idle(page)
    no_errors(page)
    assert page.locator(".lens-chart.js-plotly-plot").count() >= 3
    assert page.locator(".js-plotly-plot").count() == page.locator(".lens-chart.js-plotly-plot").count()
    loaded = page.evaluate("() => performance.getEntriesByType('resource').map(e => e.name)")
    bundle = f"app/static/plotly-lens-{plotly_js.VERSION}.min.js"
    assert any(name.endswith(bundle) for name in loaded)
    assert not any("package_data" in name or name.endswith("/plotly.min.js") for name in loaded)
    assert not any("/static/js/PlotlyChart." in name for name in loaded)
    answer = page.request.get(f"{url}/{bundle}")
    assert answer.status == 200 and answer.headers.get("etag") and answer.headers.get("last-modified")
    page.close()


BOXES = """() => Object.fromEntries([...document.querySelectorAll('[class*="st-key-lens-box-"]')].map(b => {
  const charts = [...b.querySelectorAll('.lens-chart')];
  return [[...b.classList].find(c => c.startsWith('st-key-lens-box-')).slice('st-key-lens-box-'.length),
          {height: b.getBoundingClientRect().height, width: b.getBoundingClientRect().width, charts: charts.length,
           drawn: charts.filter(d => d.classList.contains('js-plotly-plot')).length,
           widths: charts.filter(d => d._fullLayout).map(d => [d._fullLayout.width, Math.round(d.getBoundingClientRect().width), (d.layout || {}).width || null])}]; }))"""


def test_the_kept_views_are_drawn_ahead_while_nobody_clicks_and_a_switch_then_draws_nothing(browser):
    """ui/ahead.py: a page clicked (or typed into) faster than every second draws nothing ahead; left alone, it asks
    for Core vs model, Heads & layers and the Query inspector, one at a time, and each is drawn hidden (no height,
    its charts drawn by plotly at the view's width). A switch to one then only shows it: no Plotly draw."""
    with streamlit_app() as ahead_url:  # its own server: this page alone on it, as drawing ahead needs
        _drawn_ahead(browser, ahead_url)


def _drawn_ahead(browser, url):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(url)
    # the view's own chart (chart.preload() draws one outside every view first, seconds earlier on a cold server)
    page.wait_for_selector(".st-key-lens-box-derivation .lens-chart", state="attached", timeout=60000)
    for _ in range(12):  # a person busy with the page: a key every 0.3 s for 3.6 s
        page.keyboard.press("Shift")
        page.wait_for_timeout(300)
    assert set(page.evaluate(BOXES)) == {"derivation"}  # nothing drawn ahead meanwhile
    wait_idle(page)
    boxes = page.evaluate(BOXES)
    assert set(boxes) == {"derivation", "compare", "heads", "query"}, boxes
    shown = boxes.pop("derivation")
    assert shown["height"] > 0
    for name, box in boxes.items():
        assert box["height"] == 0 and box["width"] == shown["width"], (name, box)
        assert box["charts"] and box["drawn"] == box["charts"], (name, box)  # every chart drawn while hidden
        assert all(abs(w - div) < 2 or w == own for w, div, own in box["widths"]), (name, box)  # at its width
    page.evaluate(DRAW_SPY)
    page.get_by_text("Heads & layers", exact=True).first.click()
    page.wait_for_function("() => document.querySelector('.st-key-lens-box-heads').getBoundingClientRect().height > 0")
    page.wait_for_function(STATUS_GONE, timeout=60000)
    page.wait_for_timeout(800)
    assert page.evaluate("() => window.__draws") == []  # shown as drawn ahead: nothing drawn on the click's path
    assert page.evaluate(BOXES)["derivation"]["height"] == 0  # the derivation stays, hidden
    no_errors(page)
    _drawn_ahead_after_steps_4_to_7(page)
    page.close()


ASKS = "() => window.__lensAhead.asks"
# the charts of the views kept hidden, each marked once: [key, whether it was marked before (the same <div>)]
KEPT_CHARTS = """() => [...document.querySelectorAll('.st-key-lens-box-compare .lens-chart, .st-key-lens-box-heads .lens-chart')]
  .map(d => { const key = [...d.closest('[class*="st-key-fig_"]').classList].find(c => c.startsWith('st-key-fig_'));
              const seen = !!d.__keptMark; d.__keptMark = true; return [key, seen]; })"""


def test_a_query_picked_leaves_the_views_it_does_not_change_as_drawn(browser):
    """ui/ahead.py ``NOT_SHOWN``: a query picked in the Query inspector changes nothing that Core vs model and Heads
    & layers show, so the page asks only for the derivation again (its live temperature follows the query); the
    other two stay as drawn, hidden: no chart of theirs drawn again or from scratch. A switch to one of them then
    only shows it (no Plotly draw), and its slides buttons are drawn again (they record the query)."""
    with streamlit_app() as ahead_url:  # its own server: this page alone on it, as drawing ahead needs
        page, _ = _query_page(browser, ahead_url, 0)
        wait_idle(page)
        kept = page.evaluate(KEPT_CHARTS)
        assert len(kept) >= 5 and not any(seen for _, seen in kept), kept
        asked = page.evaluate(ASKS)
        page.evaluate(DRAW_SPY)
        _pick_in_box(page, 5)
        _title_is(page, 5)
        wait_idle(page)
        assert page.evaluate(ASKS) == asked + 1  # the derivation alone
        assert page.evaluate(KEPT_CHARTS) == [[key, True] for key, _ in kept]  # the same <div>s
        drawn = [key for name, key in page.evaluate("() => window.__draws") if name in ("react", "newPlot")]
        assert not any(key in drawn for key, _ in kept), drawn
        page.evaluate(DRAW_SPY)
        page.get_by_text("Core vs model", exact=True).first.click()
        page.wait_for_function(
            "() => document.querySelector('.st-key-lens-box-compare').getBoundingClientRect().height > 0"
        )
        page.wait_for_function(STATUS_GONE, timeout=60000)
        page.wait_for_timeout(800)
        assert page.evaluate("() => window.__draws") == []
        assert "query=5" in page.url and "view=compare" in page.url
        no_errors(page)
        page.close()


def _drawn_ahead_after_steps_4_to_7(page):
    """A scaling click on the derivation reruns its steps 4-7 alone, not its asker (app.py ``_later_steps_alone``),
    and clears the other kept views: the page asks for each of them once, and then no more (the look it compares
    with is the newer one the views drawn ahead carry, ahead.js ``currentWants``; with the derivation's older look
    it asked again and again). A switch then shows a view drawn for the new scaling: nothing drawn."""
    page.get_by_text("Derivation", exact=True).first.click()
    wait_idle(page)
    asked = page.evaluate(ASKS)
    page.locator('[data-testid="stSidebar"]').get_by_text("none (raw QKᵀ)", exact=True).first.click()
    page.wait_for_function("() => !document.querySelector('.st-key-lens-box-heads')", timeout=60000)  # cleared
    wait_idle(page)
    assert set(page.evaluate(BOXES)) == {"derivation", "compare", "heads", "query"}
    assert page.evaluate(ASKS) == asked + 3
    page.wait_for_timeout(2500)  # ten pauses between asks: none more
    assert page.evaluate(ASKS) == asked + 3
    page.evaluate(DRAW_SPY)
    page.get_by_text("Core vs model", exact=True).first.click()
    page.wait_for_function("() => document.querySelector('.st-key-lens-box-compare').getBoundingClientRect().height")
    page.wait_for_function(STATUS_GONE, timeout=60000)
    page.wait_for_timeout(800)
    assert page.evaluate("() => window.__draws") == []
    assert "scaling=none" in page.url
    no_errors(page)


# (the charts shown: a view kept in the page, or drawn ahead, is hidden, ui/ahead.py; it may be on one page only)
PAGE_NUMBERS = """() => [...document.querySelectorAll('.js-plotly-plot')]
    .filter(g => g.data && g.data[0] && getComputedStyle(g).getPropertyValue('--lens-hidden').trim() !== '1')
    .map(g => [g.data[0].name, JSON.stringify(g.data[0].z || null), (g.layout.title || {}).text || ''])
    .sort((a, b) => (a[0] < b[0] ? -1 : 1))"""
HEADER_NUMBERS = """() => [...document.querySelectorAll('[data-testid="stMetric"], [data-testid="stAlert"]')]
    .filter(e => getComputedStyle(e).getPropertyValue('--lens-hidden').trim() !== '1')
    .map(e => e.innerText.replace(/\\s+/g, ' ').trim())"""


def test_a_scaling_or_mask_click_on_the_derivation_shows_what_a_new_page_with_it_shows(browser, url):
    """A scaling, mask or fill click reruns only the header and the derivation's steps 4-7 (app.py
    ``_later_steps_alone``): the page each leaves (every chart's numbers and title, the header's metrics and
    notices) is the page its link opens."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url)
    wait_idle(page)
    sidebar = page.locator('[data-testid="stSidebar"]')

    def scaling() -> None:
        sidebar.get_by_text("none (raw QKᵀ)", exact=True).first.click()

    def mask() -> None:
        page.get_by_role("combobox", name="Mask").first.click()
        page.get_by_role("option", name=MASK_LABELS["causal"]).click()

    def fill() -> None:
        sidebar.get_by_text("-1e9", exact=True).first.click()

    for click, said in ((scaling, "scaling=none"), (mask, "mask=causal"), (fill, "fill=-1e9")):
        click()  # (the fill leaves the weights as they are here: no row has every key blocked)
        page.wait_for_function("said => location.href.includes(said)", arg=said, timeout=60000)
        wait_idle(page)  # (the link is written in the run, before its charts: the run is under way)
        no_errors(page)
        clicked = page.evaluate(PAGE_NUMBERS), page.evaluate(HEADER_NUMBERS)
        assert said in page.url, page.url
        fresh = browser.new_page(viewport={"width": 1280, "height": 900})
        fresh.goto(page.url)
        wait_idle(fresh)
        assert (fresh.evaluate(PAGE_NUMBERS), fresh.evaluate(HEADER_NUMBERS)) == clicked, said
        assert len(clicked[0]) >= 8 and any("Scaling is off" in text for text in clicked[1]), clicked[1]
        fresh.close()
    page.close()


# The step-through's traces as drawn (plotly's _fullData: typed arrays decoded), NaN as null, for comparing.
QUERY_STATE = """() => { const el = document.querySelector('.st-key-fig_query .js-plotly-plot');
  if (!el || !el._fullData || el.style.opacity) return null;
  const by = (n) => el._fullData.find((t) => t.name === n);
  const arr = (v) => (v == null ? null : Array.from(v, (x) => (typeof x === 'number' && Number.isNaN(x) ? null : x)));
  const z = (t) => (t ? Array.from(t.z, arr) : null);
  const bars = (n) => ({y: arr(by(n).y), colour: by(n).marker.color, text: by(n).text === undefined ? null : arr(by(n).text)});
  return {title: el.layout.title.text, scores: bars('q·k'), scaled: bars('scaled'), weight: bars('weight'),
          masked: by('masked') ? [arr(by('masked').x), arr(by('masked').y)] : null,
          contributions: z(by('contributions')), output: z(by('output')),
          slider: el.layout.sliders ? el.layout.sliders[0].steps.length : 0}; }"""


def _query_page(browser, url, query: int):
    """``url``: the server's, or a link of it with settings of its own (``?text=...``)."""
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    received: list = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda frame: received.append(frame)))
    page.goto(url + ("&" if "?" in url else "/?") + f"view=query&mask=causal&query={query}")
    wait_idle(page)
    no_errors(page)
    page.locator(".st-key-fig_query").scroll_into_view_if_needed()
    page.wait_for_function("() => (" + QUERY_STATE + ")() !== null", timeout=60000)
    return page, received


def _slide_to(page, step: int) -> None:
    chart = page.locator(".st-key-fig_query .js-plotly-plot")
    slider = chart.locator(".slider-container").first
    slider.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    rail = chart.locator(".slider-rail-touch-rect").first.bounding_box()
    labelled = slider.get_by_text(str(step), exact=True)  # a long slider's steps have no label: the step's tick
    box = (labelled if labelled.count() else slider.locator(".slider-tick-rect").nth(step)).first.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, rail["y"] + rail["height"] / 2)


# The step-through's slider: its steps' labels, and the current value as the page shows it (plotly.js gives that text
# the labels' class; it is the slider group's own text, the steps' sit in groups of their own).
SLIDER_TEXT = """() => { const el = document.querySelector('.st-key-fig_query .js-plotly-plot');
  const value = el && el.querySelector('.slider-group > text.slider-label');
  return el && el.layout.sliders ? {labels: el.layout.sliders[0].steps.map((s) => s.label),
    value: value ? value.textContent : null} : null; }"""
LONG_TEXT = "I am a cat. It is on a mat. We go to it so do you. I am a cat. It is on a mat. We go to it so do you."


def test_a_long_query_slider_has_no_step_labels_and_its_current_value_says_the_query_shown(browser, url):
    """viz/query_flip.py: a slider of more than SLIDER_LABELS_MAX queries has no step labels (plotly.js measured each
    label's text, and each current value's, on the chart's first draw), so its current value is "query " and the
    query the figure was drawn for; the chart's script (query_rows.js ``readout``) writes the query shown into it
    after a flip on the slider, a pick in the box and a redraw (here: a narrower window). It says what a page opened
    on that query says."""
    from viz.query_flip import SLIDER_LABELS_MAX

    link = f"{url}/?text={quote(LONG_TEXT)}"
    page, _ = _query_page(browser, link, 0)
    slider = page.evaluate(SLIDER_TEXT)
    queries = len(slider["labels"])
    assert queries > SLIDER_LABELS_MAX and set(slider["labels"]) == {""}
    assert slider["value"] == "query 0"
    for step in (20, queries - 1):
        _slide_to(page, step)
        _title_is(page, step)
        assert page.evaluate(SLIDER_TEXT)["value"] == f"query {step}"
    page.set_viewport_size({"width": 1100, "height": 900})  # plotly.js draws the slider again, its own text first
    page.wait_for_timeout(1500)
    assert page.evaluate(SLIDER_TEXT)["value"] == f"query {queries - 1}"
    _pick_in_box(page, 7)
    _title_is(page, 7)
    wait_idle(page)
    assert page.evaluate(SLIDER_TEXT)["value"] == "query 7"
    server, _ = _query_page(browser, link, 7)
    assert server.evaluate(SLIDER_TEXT) == page.evaluate(SLIDER_TEXT)
    server.close()
    no_errors(page)
    page.close()


def test_the_query_slider_flips_rows_in_the_browser_exactly_as_the_server_draws_them(browser, url):
    """The Query inspector's step-through carries every query's row (viz/query_flip.py): its slider fills the
    chosen one in the page (ui/components/lens_chart/query_rows.js) with no server run, and what it draws (bars,
    their colours and written values, the "×" of masked keys, α v, the output, the title) is what the server draws
    for that query picked in the box. A causal mask: rows with blocked keys and the last, with none."""
    page, received = _query_page(browser, url, 0)
    queries = page.evaluate(QUERY_STATE)["slider"]
    assert queries > 4
    for step in (3, queries - 1, 1):
        before = len(received)
        _slide_to(page, step)
        page.wait_for_function(f"() => (({QUERY_STATE})() || {{}}).title.startsWith('Query {step} ')", timeout=10000)
        flipped = page.evaluate(QUERY_STATE)
        page.wait_for_timeout(500)
        assert len(received) == before  # switched in the browser alone
        server, _ = _query_page(browser, url, step)
        drawn = server.evaluate(QUERY_STATE)
        server.close()
        assert flipped == drawn, step
        assert flipped["masked"][0] == list(range(step + 1, queries))  # causal: the later keys ([] for the last)
        assert flipped["weight"]["y"][step + 1 :] == [None] * (queries - step - 1)
    no_errors(page)
    page.locator(".st-key-fig_query").screenshot(path=str(SHOTS / "query-flip.png"))
    page.close()


DRAWS = "() => document.querySelector('.st-key-fig_query .js-plotly-plot').__lensDraws"  # chart.js: figures drawn
LIVE = """() => { const w = document.querySelector('.st-key-live_temperature_query .lt-root').__lt;
  return {q: w.q, server: w.serverQuery, frames: w.frames}; }"""  # the view's live temperature: query, draws
SHOWN = """() => { const w = document.querySelector('.st-key-live_temperature_query .lt-root').__lt, show = w.show;
  w.show = function (q) { window.__lensShown = [q, this.serverQuery]; return show.call(this, q); }; }"""


def _pick_in_box(page, query: int) -> None:
    page.get_by_label("Query token", exact=True).click()
    page.keyboard.type(f"{query}: ")
    page.keyboard.press("Enter")


def _shows_what_a_page_opened_on_it_shows(browser, url, page, query: int) -> None:
    """The step-through on ``page`` is on ``query`` (its slider too) and shows what a page opened on it shows."""
    active = "() => document.querySelector('.st-key-fig_query .js-plotly-plot').layout.sliders[0].active"
    assert page.evaluate(active) == query
    picked = page.evaluate(QUERY_STATE)
    server, _ = _query_page(browser, url, query)
    drawn = server.evaluate(QUERY_STATE)
    server.close()
    assert picked == drawn, query


def test_a_query_picked_in_the_box_is_flipped_to_in_the_page_and_the_server_s_figure_draws_nothing(browser, url):
    """ui/follow.py: a pick in the Query token box fills that query's row into the step-through at once, from the
    rows the page holds, and moves the chart's slider there; the figure the server then sends for that query names
    the same frame, rows and query, so the chart draws nothing more (chart.js draws no figure). What is on screen
    is what a page opened on that query draws, and the slider flips on from there."""
    page, _ = _query_page(browser, url, 0)
    queries = page.evaluate(QUERY_STATE)["slider"]
    draws = page.evaluate(DRAWS)
    assert draws >= 1
    frames = page.evaluate(LIVE)["frames"]
    page.evaluate(SHOWN)
    for query in (5, 2, queries - 1):
        shown = page.evaluate(LIVE)["q"]
        _pick_in_box(page, query)
        _title_is(page, query)
        wait_idle(page)
        page.wait_for_timeout(300)
        assert page.evaluate(DRAWS) == draws  # flipped in the page: the server's figure was not drawn again
        # the live temperature showed the pick at once, once: the server's data for it drew nothing more there
        assert page.evaluate(LIVE) == {"q": query, "server": query, "frames": frames + 1}
        assert page.evaluate("() => window.__lensShown") == [query, shown]  # before the server's data came
        frames += 1
        _shows_what_a_page_opened_on_it_shows(browser, url, page, query)
    _slide_to(page, 1)
    _title_is(page, 1)
    no_errors(page)
    page.close()


def test_the_server_s_figure_for_another_query_of_the_rows_shown_is_flipped_to_not_drawn(browser, url):
    """query_rows.js ``flipsTo``: a figure of the frame and rows on screen for another query is flipped to in the
    page, not drawn. Here the page's own flip on a pick in the box is turned off (follow.js's observer), as when a
    busy machine paints the closing list after the server's figure has come: the chart still draws nothing more,
    and shows what a page opened on that query shows, its slider on it."""
    page, _ = _query_page(browser, url, 0)
    draws = page.evaluate(DRAWS)
    # the box's pick no longer flips the chart (once follow.js watches the box: a rerun may be setting it up again)
    page.wait_for_function("() => window.__lensFollow && window.__lensFollow.observer", timeout=20000)
    page.evaluate("() => window.__lensFollow.observer.disconnect()")
    for query in (4, 1):
        _pick_in_box(page, query)
        _title_is(page, query)  # flipped to when the server's figure came
        wait_idle(page)
        assert page.evaluate(DRAWS) == draws
        _shows_what_a_page_opened_on_it_shows(browser, url, page, query)
    no_errors(page)
    page.close()


def test_a_press_on_a_query_in_the_box_s_list_flips_the_chart_before_the_release_and_back_if_none_is_chosen(
    browser, url
):
    """ui/components/lens_chart/follow.js ``pressed``: the chart shows the pressed option's query while the pointer
    is still down (a click's length sooner than the choice); a press that ends off the list chooses nothing, and
    once the list closes the chart is back on the box's query."""
    page, _ = _query_page(browser, url, 0)
    box = page.get_by_label("Query token", exact=True)
    box.click()
    if box.get_attribute("aria-expanded") != "true":
        box.press("ArrowDown")
    option = page.locator(f'[id="{box.get_attribute("aria-controls")}"] [role="option"]').nth(4)
    assert option.inner_text().startswith("4:")
    at = option.bounding_box()
    page.mouse.move(at["x"] + at["width"] / 2, at["y"] + at["height"] / 2)
    page.mouse.down()
    _title_is(page, 4)  # flipped while the button is down
    assert box.get_attribute("aria-expanded") == "true"  # nothing chosen yet
    page.mouse.move(5, 5)
    page.mouse.up()
    page.keyboard.press("Escape")  # the list closes with the box still on query 0
    _title_is(page, 0)
    wait_idle(page)
    assert box.input_value().startswith("0:")
    no_errors(page)
    page.close()


def test_a_heatmap_of_float32_values_arrives_as_float32_and_holds_exactly_the_figure_s_float64_numbers(browser, url):
    """ui/narrow.py: the weights (float32 from the core, float64 in the figure) go over the websocket as float32,
    and the chart in the page holds, number for number, the float64 z the server's own figure holds (each float32
    widens to exactly the double it came from); hover shows the same number."""
    from attention_core.pipeline import run_trace
    from attention_core.request import TraceRequest
    from viz.views import figures_for_trace

    text = "Attention weights travel as float32."
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(f"{url}/?text={quote(text)}")
    wait_idle(page)
    page.locator(".st-key-fig_weights").scroll_into_view_if_needed()
    held = page.wait_for_function(
        """() => { const g = document.querySelector('.st-key-fig_weights .js-plotly-plot');
                   const z = g && g._fullData && g._fullData[0] && g._fullData[0].z;  // the decoded array
                   return z && z.length ? {kind: Object.prototype.toString.call(z[0]),
                                           z: Array.from(z, (row) => Array.from(row))} : null; }""",
        timeout=60000,
    ).json_value()
    assert held["kind"] == "[object Float32Array]"  # what plotly.js decoded: the wire carried f4
    z = figures_for_trace(run_trace(TraceRequest(text=text)), "derivation")["weights"].data[0].z
    assert z.dtype == np.float64
    assert np.array_equal(np.array(held["z"], dtype=np.float64), z, equal_nan=True)
    no_errors(page)
    page.close()


ROWS_MAGIC = b"LNS2"  # a figure followed by its rows (ui/plotly_spec.py with_rows)


def _carries_rows(frames) -> bool:
    return any(ROWS_MAGIC in (f if isinstance(f, bytes) else f.encode("utf-8", "surrogateescape")) for f in frames)


def _title_is(page, query: int) -> None:
    page.wait_for_function(f"() => (({QUERY_STATE})() || {{}}).title.startsWith('Query {query} ')", timeout=20000)


def test_the_rows_are_sent_once_and_asked_for_again_when_the_page_lacks_them(browser, url):
    """The rows go with the step-through once (ui/chart.py): a query picked in the box afterwards names them by
    their digest, and the slider still flips with the rows the page kept. Should the page lack them (here: pushed
    out of its keep by other rows, query_rows.js ``remember``), a slider click asks, the server sends them with the
    next figure, and the slider flips again."""
    page, received = _query_page(browser, url, 0)
    assert _carries_rows(received)
    before = len(received)
    _pick_in_box(page, 2)
    _title_is(page, 2)
    wait_idle(page)
    assert len(received) > before and not _carries_rows(received[before:])  # named, not sent again
    _slide_to(page, 4)
    _title_is(page, 4)
    module = page.evaluate(
        "() => performance.getEntriesByType('resource').map(e => e.name).find(n => n.endsWith('/query_rows.js'))"
    )
    assert module
    page.evaluate(
        f"async () => {{ const m = await import('{module}'); for (let k = 0; k < 8; k++) m.remember('gone' + k, () => null); }}"
    )
    before = len(received)
    _slide_to(page, 1)  # the page lacks the rows: nothing flips, it asks
    wait_idle(page)
    assert _carries_rows(received[before:])
    _slide_to(page, 3)
    _title_is(page, 3)
    no_errors(page)
    page.close()
