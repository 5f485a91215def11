"""plotly.js for the browser, shipped with the app (no CDN): which file the page loads, and from where.

1. ``static/plotly-cartesian-<version>.min.js``: plotly.js's own cartesian bundle (1.5 MB), committed and
   served by Streamlit's static route (``app/static/...``, ``server.enableStaticServing`` in
   .streamlit/config.toml) with Last-Modified and ETag, so a browser keeps it between visits. It has every
   trace type the app draws (``TRACE_TYPES``). A first visit evaluates it in about a third of the full
   bundle's time (the full one took 0.9 s of main thread on this 2-core machine: REPORT section 7).
2. the full bundle inside the plotly Python package (``plotly/package_data/plotly.min.js``, 4.8 MB), served
   by a file-only component route: where static serving is off, for a page whose script is not the app's,
   and for a figure with a trace type the cartesian bundle lacks.

Both are the plotly.js release this plotly.py encodes for; the cartesian one is used only when its version
is that release's (``cartesian()``). Paths and file headers only: no Streamlit.
"""

from __future__ import annotations

import re
from pathlib import Path

import plotly

ROOT = Path(__file__).resolve().parents[1]
SOURCE = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
STATIC_DIR = ROOT / "static"  # Streamlit serves <app folder>/static/ at app/static/
# the cartesian bundle's trace modules (its README): the app draws scatter, bar and heatmap
TRACE_TYPES = frozenset(
    "bar box contour heatmap histogram histogram2d histogram2dcontour image pie scatter scatterternary violin".split()
)
_VERSION = re.compile(rb"plotly\.js (?:\(cartesian - minified\) )?v(\d+\.\d+\.\d+)")


def version_of(path: Path) -> str | None:
    """The plotly.js version in a bundle's banner ("plotly.js v4.1.1"), None when there is none."""
    try:
        with path.open("rb") as f:
            found = _VERSION.search(f.read(300))
    except OSError:
        return None
    return found.group(1).decode() if found else None


VERSION = version_of(SOURCE)  # the plotly.js that this plotly.py ships


def cartesian(folder: Path = STATIC_DIR) -> Path | None:
    """The committed cartesian bundle of plotly.js ``VERSION``; None when it is missing or another version."""
    path = folder / f"plotly-cartesian-{VERSION}.min.js"
    return path if VERSION and version_of(path) == VERSION else None


def static_route() -> str | None:
    """The cartesian bundle's URL path (relative to the app's base URL), or None."""
    path = cartesian()
    return None if path is None else f"app/static/{path.name}"
