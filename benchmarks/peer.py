"""Section 5: bertviz (PyPI) head_view and model_view against this app's equivalent figures.

Same model (MiniLM), same text, same attentions (the model's own, ``output_attentions=True``) at n
tokens. bertviz builds its HTML with ``html_action="return"``; the app's equivalents are the heads
view's grid of every head of a layer (``viz.heads.head_grid``), one layer for head_view and all six
layers on one page for model_view, as plotly HTML divs (``fig.to_html(include_plotlyjs=False)``).
Sizes are the view's own HTML, without libraries (bertviz: require.js + d3 + jQuery, served locally
by ``benchmarks.jslibs``; the app: plotly.min.js, from a file beside the page).

Browser time: headless chromium opens the page from a file and the clock stops when the view is
drawn (bertviz: the first SVG ``line`` of its attention drawing exists, which it creates in one
synchronous pass; plotly: every heatmap of every figure has its image) plus two animation frames (the
first painted frame). A view that does not finish within the time limit is not tried at larger n.
"""

from __future__ import annotations

import html
import time

from . import jslibs, plots
from .common import PARAGRAPH, Config, SectionResult, kib, mib, table

V8_MAX_STRING = (1 << 29) - 24  # characters: a page whose script is longer cannot run in chromium
BERTVIZ_DONE = "() => !!document.querySelector('#vis svg line')"
PLOTLY_DONE = """(count) => { const plots = [...document.querySelectorAll('.js-plotly-plot')];
    return plots.length === count && plots.every(el => el._fullLayout && el.querySelector('g.hm image')); }"""
TWO_FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
VIEWS = {  # key -> (label, tool)
    "bertviz_head": ("bertviz head_view", "bertviz"),
    "app_head": ("app: heads grid, one layer", "app"),
    "bertviz_model": ("bertviz model_view", "bertviz"),
    "app_model": ("app: heads grids, all layers", "app"),
}


def attentions_for(loaded, n: int):
    """(labels, attentions as a tuple of (1, H, n, n) tensors) of MiniLM on the paragraph cut at n tokens."""
    import torch

    from attention_core.pretrained import tokenize

    tokens = tokenize(loaded, PARAGRAPH * (n // 8 + 4), max_tokens=n)
    with torch.no_grad():
        out = loaded.runner(input_ids=tokens.ids, attention_mask=tokens.attention_mask, output_attentions=True)
    return list(tokens.labels), tuple(a.detach() for a in out.attentions)


def build_views(labels: list[str], attentions) -> dict[str, tuple[str, float]]:
    """key -> (the view's HTML, seconds to build it)."""
    import numpy as np
    from bertviz import head_view, model_view

    from viz.heads import head_grid

    def timed(make) -> tuple[str, float]:
        started = time.perf_counter()
        text = make()
        return text, time.perf_counter() - started

    weights = [np.asarray(a[0]) for a in attentions]  # layers x (H, n, n)

    def grids(layers) -> str:
        return "\n".join(
            head_grid(weights[i], labels, labels, layer=i).to_html(full_html=False, include_plotlyjs=False)
            for i in layers
        )

    return {
        "bertviz_head": timed(lambda: head_view(list(attentions), labels, html_action="return").data),
        "app_head": timed(lambda: grids([0])),
        "bertviz_model": timed(lambda: model_view(list(attentions), labels, html_action="return").data),
        "app_model": timed(lambda: grids(range(len(weights)))),
    }


def page_html(key: str, body: str) -> str:
    head = '<meta charset="utf-8">'
    if VIEWS[key][1] == "app":
        head += '<script src="plotly.min.js"></script>'
    return f"<!doctype html><html><head>{head}<title>{html.escape(key)}</title></head><body>{body}</body></html>"


def render(browser, path, key: str, figures: int, libs, timeout_ms: float) -> dict:
    """Seconds from navigation to the first painted frame of the finished view, and the JS heap then."""
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    try:
        if VIEWS[key][1] == "bertviz":
            jslibs.route_cdn(page, libs)
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        started = time.perf_counter()
        page.goto(path.as_uri(), wait_until="commit", timeout=timeout_ms)
        if VIEWS[key][1] == "bertviz":
            page.wait_for_function(BERTVIZ_DONE, timeout=timeout_ms)
        else:
            page.wait_for_function(PLOTLY_DONE, arg=figures, timeout=timeout_ms)
        page.evaluate(TWO_FRAMES)
        seconds = time.perf_counter() - started
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        return {"seconds": seconds, "js_heap": metrics.get("JSHeapUsedSize"), "nodes": metrics.get("Nodes")}
    except Exception as err:  # noqa: BLE001 - a timeout is a result here, reported in the table
        return {"seconds": None, "error": f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"}
    finally:
        page.close()


def run(cfg: Config) -> SectionResult:
    result = SectionResult("peer", "5. Peer: bertviz head_view / model_view vs the app's equivalent views")
    try:
        import bertviz  # noqa: F401
    except ImportError as err:
        result.skipped = f"bertviz is not installed ({err}); pip install --no-deps -r requirements-bench.txt"
        return result
    import plotly

    from attention_core.pretrained import load_model
    from tests.browser import CHROMIUM_ARGS, chromium_path

    sizes = cfg.pick((16, 64, 256, 512), (16,))
    timeout_ms = cfg.pick(45_000, 30_000)
    chromium = chromium_path()
    libs, browser_note = None, None
    if not chromium:
        browser_note = "no chromium on this machine: sizes only"
    else:
        try:
            libs = jslibs.ensure()
        except RuntimeError as err:
            browser_note = f"bertviz's libraries could not be fetched ({err}): sizes only"
    folder = cfg.scratch / "peer"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plotly.min.js").write_text(plotly.offline.get_plotlyjs(), encoding="utf-8")

    loaded = load_model("minilm", device="cpu")
    layers = None
    rows = []
    gave_up: dict[str, str] = {}
    playwright = browser = None
    if browser_note is None:
        from playwright.sync_api import sync_playwright

        playwright = sync_playwright().start()
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
    try:
        for n in sizes:
            labels, attentions = attentions_for(loaded, n)
            layers = len(attentions)
            views = build_views(labels, attentions)
            for key, (body, build_s) in views.items():
                row = {"n": len(labels), "view": key, "html_bytes": len(body.encode()), "build_s": build_s}
                if browser is not None:
                    if key in gave_up:
                        row["browser"] = {"seconds": None, "error": gave_up[key]}
                    elif len(body) > V8_MAX_STRING:
                        row["browser"] = {"seconds": None, "error": "HTML longer than chromium's longest string"}
                    else:
                        path = folder / f"{key}-{n}.html"
                        path.write_text(page_html(key, body), encoding="utf-8")
                        figures = 1 if key == "app_head" else layers
                        row["browser"] = render(browser, path, key, figures, libs, timeout_ms)
                        path.unlink()
                        if row["browser"]["seconds"] is None:
                            gave_up[key] = f"not tried: it did not finish at n={len(labels)}"
                rows.append(row)
            del views, attentions
    finally:
        if browser is not None:
            browser.close()
        if playwright is not None:
            playwright.stop()

    result.data = {
        "rows": rows,
        "browser_note": browser_note,
        "timeout_s": timeout_ms / 1e3,
        "libraries": {k: str(v) for k, v in (libs or {}).items()},
    }

    def cell(row) -> str:
        got = row.get("browser")
        if got is None:
            return "n/a"
        if got["seconds"] is None:
            return f"— ({got['error']})"
        return f"{got['seconds']:.2f}"

    lib_sizes = ""
    if libs:
        lib_bytes = sum(p.stat().st_size for p in libs.values())
        lib_sizes = (
            f" Libraries, not counted above: bertviz {kib(lib_bytes)} KiB (require.js, d3, jQuery), "
            f"the app {kib((folder / 'plotly.min.js').stat().st_size)} KiB (plotly.min.js)."
        )
    result.body = "\n\n".join(
        [
            f"MiniLM ({layers} layers × 12 heads), the benchmark paragraph cut at n tokens, the model's own "
            "attentions. bertviz 1.4.1 with its JavaScript served locally through `page.route` (see "
            "`benchmarks/jslibs.py`: jQuery 2.0.0 is not on npm, 2.1.0 stands in). Build = Python time to make "
            f"the HTML. Browser = navigation until the view is drawn and painted (time limit "
            f"{timeout_ms / 1e3:.0f} s, checked only when the page's main thread is free: a page busy in one long "
            "script can pass it and still be timed to its end). bertviz writes every weight as a decimal number in JSON (all layers, "
            "in both views); the app sends float32 arrays (base64)."
            + lib_sizes
            + (f"\n\nBrowser part skipped: {browser_note}." if browser_note else ""),
            table(
                ["n", "view", "HTML (MiB)", "build (s)", "browser (s)", "JS heap after (MiB)", "DOM nodes"],
                [
                    [
                        r["n"],
                        VIEWS[r["view"]][0],
                        mib(r["html_bytes"], 2),
                        f"{r['build_s']:.2f}",
                        cell(r),
                        mib((r.get("browser") or {}).get("js_heap")),
                        f"{(r.get('browser') or {}).get('nodes') or 0:,.0f}"
                        if (r.get("browser") or {}).get("nodes")
                        else "n/a",
                    ]
                    for r in rows
                ],
            ),
            "![HTML size](results/peer_html.png)\n\n![browser time](results/peer_render.png)",
        ]
    )
    ns = sorted({r["n"] for r in rows})

    def series(field_of) -> dict[str, list]:
        return {
            label: [next((field_of(r) for r in rows if r["n"] == n and r["view"] == key), None) for n in ns]
            for key, (label, _) in VIEWS.items()
        }

    result.figures["peer_html"] = plots.lines(
        ns,
        series(lambda r: r["html_bytes"] / 2**20),
        title="HTML of the view (no libraries)",
        x_title="tokens n",
        y_title="MiB",
    )
    result.figures["peer_render"] = plots.lines(
        ns,
        series(lambda r: (r.get("browser") or {}).get("seconds")),
        title="Browser: navigation to drawn view",
        x_title="tokens n",
        y_title="seconds",
    )
    return result
