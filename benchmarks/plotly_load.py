"""What a first visit pays for plotly.js: loading a bundle and drawing its first plots, in headless Chromium.

    .venv/bin/python -m benchmarks.plotly_load [--loads 6] [--bundle PATH ...] [--json FILE]

A static page (a temporary folder, opened as file://, so no server and no network) loads one bundle with a
plain ``<script>`` and then draws a 64 x 64 heatmap and a bar + scatter chart, as the app's views do. Timed with
``performance.now()`` in the page: from before the script tag to after it ran ("load"), and to the end of the
two plots ("load + draw"); what was drawn is counted in the SVG. Each load is a fresh browser context (nothing
cached), the bundles alternating.
Compared: the app's bundle (static/, ``ui.plotly_js``), the plotly package's full bundle, and any ``--bundle``
(for example plotly.js's official cartesian bundle, ``npm pack plotly.js-cartesian-dist-min@4.1.1``). Report
section 7, "thirty-third".
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from benchmarks.common import median, write_json

PAGE = """<html><body><div id="a"></div><div id="b"></div>
<script>window.__t0 = performance.now();</script>
<script src="{name}"></script>
<script>
window.__t1 = performance.now();
const z = Array.from({{length: 64}}, (_, i) => Array.from({{length: 64}}, (_, j) => Math.sin(i * j)));
Plotly.newPlot("a", [{{type: "heatmap", z: z}}])
  .then(() => Plotly.newPlot("b", [{{type: "bar", y: [1, 2, 3]}}, {{type: "scatter", y: [3, 1, 2]}}]))
  .then(() => {{
    window.__drawn = ["#a .hm image", "#b .bars .point", "#b .scatterlayer .trace"].map(
      (s) => document.querySelectorAll(s).length);
    window.__t2 = performance.now();
  }});
</script></body></html>
"""


def bundles(extra: list[str]) -> dict[str, Path]:
    """Label -> bundle file: the app's own (when committed), the package's full one, then ``extra``."""
    from ui import plotly_js

    found = {"app bundle": plotly_js.BUNDLE} if plotly_js.BUNDLE else {}
    found["full bundle"] = plotly_js.SOURCE
    found.update({Path(path).name: Path(path) for path in extra})
    return found


def measure(files: dict[str, Path], loads: int) -> dict[str, dict]:
    """Per bundle: its size and the medians (and all values) of load and load + draw, in seconds."""
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM_ARGS, chromium_path

    times: dict[str, list[tuple[float, float]]] = {label: [] for label in files}
    drew: dict[str, list[int]] = {}  # what each drew: heatmap images, bars, scatter traces
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        pages = {}
        for i, (label, path) in enumerate(files.items()):
            shutil.copy(path, Path(tmp) / f"b{i}.js")
            pages[label] = Path(tmp) / f"b{i}.html"
            pages[label].write_text(PAGE.format(name=f"b{i}.js"), encoding="utf-8")
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        for _ in range(loads):
            for label, page_file in pages.items():
                context = browser.new_context()
                page = context.new_page()
                page.goto(page_file.as_uri())
                page.wait_for_function("window.__t2", timeout=60_000)
                load, total, drawn = page.evaluate(
                    "[window.__t1 - window.__t0, window.__t2 - window.__t0, window.__drawn]"
                )
                times[label].append((load / 1000, total / 1000))
                drew[label] = drawn
                context.close()
        browser.close()
    return {
        label: {
            "bytes": files[label].stat().st_size,
            "load_s": median([t[0] for t in got]),
            "load_draw_s": median([t[1] for t in got]),
            "all": got,
            "drawn": drew[label],
        }
        for label, got in times.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=6)
    parser.add_argument("--bundle", action="append", default=[], help="another plotly.js bundle to compare")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = measure(bundles(args.bundle), args.loads)
    print(f"plotly.js: load, and load + first plots (median of {args.loads} fresh loads, headless Chromium)")
    print(f"{'bundle':<34} {'MB':>6} {'load s':>8} {'load+draw s':>12}")
    for label, row in result.items():
        print(f"{label:<34} {row['bytes'] / 1e6:>6.2f} {row['load_s']:>8.3f} {row['load_draw_s']:>12.3f}")
    if args.json:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
