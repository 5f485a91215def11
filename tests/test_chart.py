"""ui/chart.py: the views' chart component sends plotly's own JSON (its arrays as raw bytes), keeps one plot per
key across reruns, draws a new figure once and an unchanged one not at all, loads plotly.js from the app's own
server, and says so in the page when plotly.js cannot be had."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest
from streamlit.testing.v1 import AppTest

from tests.browser import streamlit_app
from tests.charts import charts
from tests.test_plotly_spec import plotly_own, small_figure
from ui import chart, plotly_js

PLOT = ".lens-chart.js-plotly-plot"


def test_the_loader_has_its_settings_and_every_route_names_a_file_that_is_there():
    text = chart.loader()
    assert "__LENS_" not in text and json.dumps(chart.settings(), separators=(",", ":")) in text
    assert len(text.encode()) < 2_000  # sent with every chart
    assert "function fetchScript(" in text and "window.__lensPlotly" in text  # plotly.js started by the loader
    assert chart.MODULE == "component/ui.chart.lens_chart_files/chart.js" and (chart.FOLDER / "chart.js").is_file()
    static, package = chart.PLOTLY_ROUTES  # the app's bundle first, then the package's full one
    assert static == f"app/static/plotly-lens-{plotly_js.VERSION}.min.js"
    assert (plotly_js.STATIC_DIR / static.rsplit("/", 1)[-1]).is_file()
    assert package == f"component/ui.chart.plotly_js/{plotly_js.SOURCE.name}" and plotly_js.SOURCE.stat().st_size > 1e6
    assert chart.settings()["config"] == chart.PLOT_CONFIG


def test_an_inline_script_is_sent_without_its_comment_lines_and_indentation():
    source = 'const a = "http://x"; // kept\n  // left out\n\n    if (a) {\n      b(); }\n'
    assert chart.code_lines(source) == 'const a = "http://x"; // kept\nif (a) {\nb(); }\n'
    for path in (
        chart.FOLDER / "loader.js",
        chart.FOLDER.parent / "base_url.js",
        chart.FOLDER.parent / "live_temperature" / "loader.js",
    ):
        assert "`" not in path.read_text(encoding="utf-8"), path  # no template literal whose lines would change


def test_the_app_s_bundle_is_the_release_plotly_py_ships_and_has_every_trace_type_the_views_draw():
    assert plotly_js.VERSION and plotly_js.version_of(plotly_js.SOURCE) == plotly_js.VERSION
    bundle = plotly_js.bundle()
    assert bundle is not None and plotly_js.version_of(bundle) == plotly_js.VERSION
    assert plotly_js.bundle(plotly_js.ROOT / "tests") is None  # not there: the full bundle is used
    assert plotly_js.TRACE_TYPES == plotly_js.trace_types(bundle) == {"bar", "heatmap", "scatter"}  # its banner's
    assert plotly_js.trace_types(plotly_js.SOURCE) == frozenset()  # the full bundle's banner names none
    from attention_core.pipeline import run_trace
    from attention_core.request import TraceRequest
    from viz.views import VIEWS, figures_for_trace

    trace = run_trace(TraceRequest(text="The cat sat on the mat."))
    drawn = {
        data.type or "scatter" for view in VIEWS for fig in figures_for_trace(trace, view).values() for data in fig.data
    }
    assert drawn and drawn <= plotly_js.TRACE_TYPES, drawn - plotly_js.TRACE_TYPES


def test_the_app_s_bundle_alone_draws_a_heatmap_a_bar_and_a_scatter_in_chromium():
    """The harness of benchmarks/plotly_load.py on the app's bundle: a page with nothing else loads it and draws
    the three trace types (a trace type a bundle lacks is left out of the plot by plotly.js, drawn as nothing)."""
    from benchmarks.plotly_load import bundles, measure

    files = bundles([])
    assert list(files) == ["app bundle", "full bundle"] and files["app bundle"] == plotly_js.BUNDLE
    row = measure({"app bundle": files["app bundle"]}, loads=1)["app bundle"]
    assert 0 < row["load_s"] < row["load_draw_s"] and row["bytes"] == plotly_js.BUNDLE.stat().st_size
    assert row["drawn"] == [1, 3, 1]  # the heatmap's image, three bars, one scatter line


def _page():
    import plotly.graph_objects as go
    import streamlit as st

    from tests.test_plotly_spec import small_figure
    from ui.chart import draw

    fig = st.session_state.setdefault("fig", small_figure(3))  # one shared figure object across reruns

    class Other(go.Figure):
        pass

    draw(fig, key="fig_kept")
    draw(Other(small_figure(4)), key="fig_other")
    draw(small_figure(5).to_dict(), key="fig_dict")


def test_the_page_gets_plotly_s_json_and_a_kept_figure_is_not_encoded_again(monkeypatch):
    at = AppTest.from_function(_page).run()
    assert not at.exception
    sent = {c.id.split("-")[-1]: c.spec.encode("utf-8") for c in charts(at)}
    assert json.loads(sent["fig_kept"]) == json.loads(plotly_own(at.session_state["fig"]))  # unpacked: plotly's own
    packed = [c for c in at.get("bidi_component") if c.proto.id.endswith("fig_kept")][0].proto.bytes
    assert packed[:4] == b"LNS1" and b'"bdata":""' in packed  # its arrays as raw bytes, not base64
    for key, seed in (("fig_other", 4), ("fig_dict", 5)):  # (the page's default template may differ from here)
        assert json.loads(sent[key])["data"] == json.loads(plotly_own(small_figure(seed)))["data"], key

    calls = []
    original = go.Figure.to_dict
    monkeypatch.setattr(go.Figure, "to_dict", lambda self: calls.append(self) or original(self))
    at.run()
    assert not at.exception
    assert not any(fig is at.session_state["fig"] for fig in calls)  # the kept figure is sent from its bytes
    assert any(type(fig).__name__ == "Other" for fig in calls)  # a subclass is encoded again
    assert {c.id.split("-")[-1]: c.spec.encode("utf-8") for c in charts(at)} == sent


@pytest.fixture(scope="module")
def page_url():
    with streamlit_app("tests/chart_page.py") as base:
        yield base


def _open(browser, url):
    page = browser.new_page(viewport={"width": 1000, "height": 700})
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(url)
    page.wait_for_selector(PLOT + " svg.main-svg", timeout=60000)
    page.evaluate(
        """() => { const div = document.querySelector('.st-key-fig_test .lens-chart');
                   div.__testMark = 'same div'; window.__draws = 0;
                   div.on('plotly_afterplot', () => { window.__draws += 1; }); }"""
    )
    return page, errors


def _trace_name(page) -> str:
    return page.evaluate("() => document.querySelector('.st-key-fig_test .lens-chart').data[0].name")


def _idle(page) -> None:
    for _ in range(2):
        page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=30000)
        page.wait_for_timeout(600)


@pytest.mark.browser
def test_a_new_figure_is_drawn_once_into_the_same_plot_and_a_rerun_draws_nothing(browser, page_url):
    page, errors = _open(browser, page_url)
    assert _trace_name(page) == "weights-first"
    page.get_by_text("second").click()
    page.wait_for_function(
        "() => document.querySelector('.st-key-fig_test .lens-chart').data[0].name === 'weights-second'"
    )
    _idle(page)
    assert page.evaluate("() => document.querySelector('.st-key-fig_test .lens-chart').__testMark") == "same div"
    draws = page.evaluate("() => window.__draws")
    assert draws == 1  # one Plotly.react, not a new plot and a redraw
    z = page.evaluate(
        "() => Array.from(document.querySelector('.st-key-fig_test .lens-chart').data[0].z._inputArray[0])"
    )
    assert z == pytest.approx(np.random.default_rng(1).random((6, 6)).astype(np.float32)[0].tolist())  # the second

    page.get_by_role("button", name="Rerun").click()  # the same figure again: nothing to draw
    _idle(page)
    assert page.evaluate("() => window.__draws") == draws
    assert page.evaluate("() => document.querySelector('.st-key-fig_test .lens-chart').__testMark") == "same div"
    assert page.locator(".st-key-fig_test " + PLOT).count() == 1 and not errors
    page.close()


@pytest.mark.browser
def test_plotly_js_and_the_chart_come_from_the_app_s_own_server(browser, page_url):
    page, _ = _open(browser, page_url)
    for route, source in ((chart.PLOTLY_ROUTES[-1], plotly_js.SOURCE), (chart.MODULE, chart.FOLDER / "chart.js")):
        answer = page.request.get(f"{page_url}/{route}")
        assert answer.status == 200 and "javascript" in answer.headers["content-type"], route
        assert answer.body()[:200] == source.read_bytes()[:200]
    # this page's script is not in the app's folder, so Streamlit serves no static copy for it: the
    # page fell back to the package's file
    loaded = page.evaluate("() => performance.getEntriesByType('resource').map(e => e.name)")
    assert any(name.endswith(chart.PLOTLY_ROUTES[-1]) for name in loaded)
    page.close()


@pytest.mark.browser
def test_without_plotly_js_the_chart_says_so_and_the_page_keeps_working(browser, page_url):
    page = browser.new_page()
    page.route("**/plotly.min.js", lambda route: route.abort())
    page.goto(page_url)
    page.wait_for_selector(".st-key-fig_test .lens-chart:has-text('could not be drawn')", timeout=60000)
    assert "plotly.js could not be fetched" in page.locator(".st-key-fig_test .lens-chart").inner_text()
    assert page.locator('[data-testid="stException"]').count() == 0
    page.get_by_text("second").click()  # the page still answers; the next figure tries to load it again
    page.wait_for_selector(".st-key-fig_test .lens-chart:has-text('could not be drawn')", timeout=30000)
    page.close()


BELOW = ".st-key-fig_below .lens-chart"


@pytest.mark.browser
def test_a_chart_far_out_of_view_waits_until_it_comes_near_showing_its_older_figure_faded(browser, page_url):
    page, errors = _open(browser, page_url)
    below = page.locator(BELOW)
    assert page.evaluate(f"() => document.querySelector('{BELOW}').style.minHeight") == "320px"  # its room kept
    assert page.evaluate(f"() => document.querySelector('{BELOW}').getBoundingClientRect().top") > 2000
    page.wait_for_timeout(1500)
    assert page.locator(BELOW + " svg.main-svg").count() == 0  # far out of view: not drawn, however long it waits
    below.scroll_into_view_if_needed()  # near the view: drawn
    page.wait_for_function(f"() => (document.querySelector('{BELOW}').data || [{{}}])[0].name === 'weights-first'")
    page.evaluate("() => window.scrollTo(0, 0)")

    page.get_by_text("second").click()  # only the chart in view is redrawn
    page.wait_for_function(
        "() => document.querySelector('.st-key-fig_test .lens-chart').data[0].name === 'weights-second'"
    )
    # (the page renders its elements one after the other: the chart below gets its new figure just after)
    page.wait_for_function(f"() => document.querySelector('{BELOW}').style.opacity === '0.35'", timeout=5000)
    page.wait_for_timeout(1500)
    assert page.evaluate(f"() => document.querySelector('{BELOW}').data[0].name") == "weights-first"  # faded, kept
    below.scroll_into_view_if_needed()
    page.wait_for_function(f"() => document.querySelector('{BELOW}').data[0].name === 'weights-second'", timeout=5000)
    assert page.evaluate(f"() => document.querySelector('{BELOW}').style.opacity") == ""  # drawn: no longer faded

    page.evaluate("() => window.scrollTo(0, 0)")
    page.get_by_text("first").click()
    page.wait_for_function(f"() => document.querySelector('{BELOW}').style.opacity === '0.35'", timeout=5000)
    page.evaluate("() => window.dispatchEvent(new Event('beforeprint'))")  # printing draws every chart at once
    page.wait_for_function(f"() => document.querySelector('{BELOW}').data[0].name === 'weights-first'", timeout=5000)
    assert not errors
    page.close()


@pytest.mark.browser
def test_the_page_s_first_chart_is_drawn_as_it_arrives_even_out_of_view_and_the_next_one_waits(browser, page_url):
    # The browser never idle (requestIdleCallback never calls back): only the page's first chart is drawn, out of
    # view as it is; the one after it waits for an idle moment (or to be scrolled to), as every chart did before.
    page = browser.new_page(viewport={"width": 1000, "height": 700})
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.add_init_script("window.requestIdleCallback = () => 0;")
    # Where the chart below was when plotly drew it (its top, in px from the screen's top): on a busy machine the
    # page can be laid out in steps, the chart below passing near the screen for a moment, and the watcher then
    # rightly draws it. What must not happen is drawing it while it is far away.
    page.add_init_script(
        """new MutationObserver(() => {
             const div = document.querySelector('.st-key-fig_below .lens-chart');
             if (window.__belowTop === undefined && div && div.querySelector('svg.main-svg'))
               window.__belowTop = div.getBoundingClientRect().top;
           }).observe(document, {childList: true, subtree: true});"""
    )
    page.goto(page_url + "/?gap=1")
    first = ".st-key-fig_test .lens-chart"
    page.wait_for_selector(first + " svg.main-svg", timeout=60000)
    assert page.evaluate(f"() => document.querySelector('{first}').getBoundingClientRect().top") > 2000
    page.wait_for_timeout(1500)
    below_top = page.evaluate("() => window.__belowTop ?? null")
    # waiting for an idle moment that never comes; or drawn only when it was near the screen (NEAR: half a screen)
    assert below_top is None or below_top < 700 * 1.5 + 1, below_top
    if below_top is None:
        assert page.locator(BELOW + " svg.main-svg").count() == 0
    page.locator(BELOW).scroll_into_view_if_needed()  # near the view: drawn
    page.wait_for_selector(BELOW + " svg.main-svg", timeout=10000)
    assert not errors
    page.close()


@pytest.mark.browser
def test_a_new_chart_near_the_screen_is_drawn_without_waiting_for_the_watcher(browser, page_url):
    # The watcher (IntersectionObserver) stubbed to never report: a chart that arrives near the screen after the
    # page's first one (a view just opened) is drawn in the task that placed it, not a frame later at the
    # watcher's first report; the chart far below still waits.
    page = browser.new_page(viewport={"width": 1000, "height": 700})
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.add_init_script(
        "window.IntersectionObserver = class { constructor() {} observe() {} unobserve() {} disconnect() {} };"
    )
    page.goto(page_url)
    page.wait_for_selector(PLOT + " svg.main-svg", timeout=60000)  # the page's first chart
    page.get_by_text("Another chart").click()
    page.wait_for_selector(".st-key-fig_new .lens-chart svg.main-svg", timeout=10000)
    name = page.evaluate("() => document.querySelector('.st-key-fig_new .lens-chart').data[0].name")
    assert name == "weights-second"
    assert page.locator(BELOW + " svg.main-svg").count() == 0  # far below: waits for the watcher
    assert not errors
    page.close()


HIDDEN = ".st-key-fig_hidden .lens-chart"


@pytest.mark.browser
@pytest.mark.parametrize("idle", [True, False])
def test_a_chart_in_a_view_kept_hidden_is_drawn_at_its_width_when_the_browser_is_idle(browser, page_url, idle):
    """A view drawn ahead (ui/ahead.py) is laid out but invisible, of no height: its charts are drawn by plotly at
    their real width once the browser is idle (never, when it is never idle), so a switch to it only shows them."""
    page = browser.new_page(viewport={"width": 1000, "height": 700})
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    if not idle:
        page.add_init_script("window.requestIdleCallback = () => 0;")
    page.goto(page_url + "/?hidden=1")
    page.wait_for_selector(PLOT + " svg.main-svg", timeout=60000)
    box = page.evaluate(
        "() => { const b = document.querySelector('.st-key-hidden_box').getBoundingClientRect(); return [b.width, b.height]; }"
    )
    assert box[0] > 500 and box[1] == 0, box  # laid out at the column's width, of no height
    if idle:
        # (A wait, not a timing: on a busy machine the browser's first idle moment can come late.)
        page.wait_for_selector(HIDDEN + " svg.main-svg", state="attached", timeout=45000)
        width = page.evaluate(f"() => document.querySelector('{HIDDEN}')._fullLayout.width")
        assert abs(width - box[0]) < 2, (width, box)  # drawn at its size, not plotly's default 700 px
        assert not page.locator(HIDDEN).is_visible()
        page.get_by_text("second").click()  # a new figure: redrawn while hidden too
        page.wait_for_function(
            f"() => (document.querySelector('{HIDDEN}').data || [{{}}])[0].name === 'weights-second'"
        )
    else:
        page.wait_for_timeout(1500)
        assert page.locator(HIDDEN + " svg.main-svg").count() == 0
    # (The chart far below is not checked here: the page's first chart is drawn wherever it is, and on a busy
    # machine the far one can be laid out first. The test above checks that an out-of-view chart waits.)
    assert not errors
    page.close()


def test_a_clicked_overview_cell_is_read_and_kept_within_the_model():
    from ui.views.heads import cell

    assert chart.clicked_point({"click": {"x": 3, "y": 1, "trace": "overview_entropy"}}) == {
        "x": 3,
        "y": 1,
        "trace": "overview_entropy",
    }
    assert chart.clicked_point({"click": None}) is None and chart.clicked_point(None) is None
    assert cell({"x": 3, "y": 1}, num_layers=6, num_heads=12) == (1, 3)  # x = head, y = layer
    assert cell({"x": 40, "y": -2}, num_layers=6, num_heads=12) == (0, 11)
    assert cell({"x": "a", "y": 1}, 6, 12) is None and cell({}, 6, 12) is None
