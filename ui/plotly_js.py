"""plotly.js for the browser, shipped with the app (no CDN): which file the page loads, and from where.

1. ``static/plotly-lens-<version>.min.js``: plotly.js built with only the trace types the app draws (scatter,
   bar, heatmap: 1.2 MB; scripts/plotly_bundle/build.sh), committed and served by Streamlit's static route
   (``app/static/...``, ``server.enableStaticServing`` in .streamlit/config.toml) with Last-Modified and ETag,
   so a browser keeps it between visits. Its banner names its trace types (``trace_types``). A first visit
   loads it and draws its first plots in 0.34 s here, plotly.js's official cartesian bundle in 0.59 s and the
   full one in 1.10 s (``benchmarks.plotly_load``; benchmarks/REPORT.md, "thirty-third").
2. the full bundle inside the plotly Python package (``plotly/package_data/plotly.min.js``, 4.8 MB), served
   by a file-only component route: where static serving is off, for a page whose script is not the app's,
   and for a figure with a trace type the app's bundle lacks.

Both are the plotly.js release this plotly.py encodes for; the app's bundle is used only when its version is
that release's (``bundle()``). Paths and file headers only: no Streamlit.
"""

from __future__ import annotations

import re
from pathlib import Path

import plotly

ROOT = Path(__file__).resolve().parents[1]
SOURCE = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
STATIC_DIR = ROOT / "static"  # Streamlit serves <app folder>/static/ at app/static/
# a bundle's banner: "plotly.js v4.1.1" (the full one), "plotly.js (lens: bar heatmap scatter - minified) v4.1.1"
_BANNER = re.compile(rb"plotly\.js (?:\((?:lens: ([a-z0-9 ]+) - )?[^)]*\) )?v(\d+\.\d+\.\d+)")


def _banner(path: Path) -> re.Match | None:
    try:
        with path.open("rb") as f:
            return _BANNER.search(f.read(300))
    except OSError:
        return None


def version_of(path: Path) -> str | None:
    """The plotly.js version in a bundle's banner ("plotly.js v4.1.1"), None when there is none."""
    found = _banner(path)
    return found.group(2).decode() if found else None


def trace_types(path: Path) -> frozenset[str]:
    """The trace types the app's bundle has, as its banner lists them (build.sh writes it); empty for others."""
    found = _banner(path)
    return frozenset(found.group(1).decode().split()) if found and found.group(1) else frozenset()


VERSION = version_of(SOURCE)  # the plotly.js that this plotly.py ships


def bundle(folder: Path = STATIC_DIR) -> Path | None:
    """The committed app's bundle of plotly.js ``VERSION``; None when it is missing or another version."""
    path = folder / f"plotly-lens-{VERSION}.min.js"
    return path if VERSION and version_of(path) == VERSION else None


BUNDLE = bundle()
TRACE_TYPES = trace_types(BUNDLE) if BUNDLE else frozenset()  # what the app's bundle draws (the rest: full one)


def static_route() -> str | None:
    """The app's bundle's URL path (relative to the app's base URL), or None."""
    return None if BUNDLE is None else f"app/static/{BUNDLE.name}"
