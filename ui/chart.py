"""Every figure of the views drawn by one small chart component that stays on the page (issue 12).

Why not ``st.plotly_chart``: Streamlit's chart element gets a new identity whenever its figure changes,
so a head change replaced every chart of the view by a new one (a new plot, drawn twice: a first
``Plotly.newPlot`` and a full redraw from its theme effect). The component here
(``ui/components/lens_chart/chart.js``, plain JavaScript shipped with the app) keeps one ``<div>`` per
key and draws each new figure into it with ``Plotly.react``, once; a rerun that sends the same figure
draws nothing. Measured in headless Chromium (benchmarks/REPORT.md section 7, "sixth").

What it draws is exactly plotly's JSON for the figure, its arrays sent as raw bytes after it
(``ui.plotly_spec.spec_bytes`` and ``pack``).
plotly.js is served by this app's own server (``ui.plotly_js``: the app's own committed bundle in static/,
which the browser keeps, else the plotly package's full one): no CDN, works offline and in Docker.

Streamlit glue only: no tensors, no figure building.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st
import streamlit.components.v1 as components

from . import plotly_js, yielding
from .plotly_spec import Sent, rows_digest, spec_bytes, with_rows, with_update

PLOT_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}
FOLDER = Path(__file__).resolve().parent / "components" / "lens_chart"
CLASS = "lens-chart"  # the <div> plotly draws into (tests and benchmarks find charts by .js-plotly-plot)

# v1 components used only as file servers: each folder is served at component/<name>/<file> by
# Streamlit's own component route (chart.js, and the full plotly.js when the static bundle is not there).
_chart_files = components.declare_component("lens_chart_files", path=str(FOLDER))
_plotly_files = components.declare_component("plotly_js", path=str(plotly_js.SOURCE.parent))
MODULE = f"component/{_chart_files.name}/chart.js"
PLOTLY_ROUTES = tuple(
    route for route in (plotly_js.static_route(), f"component/{_plotly_files.name}/{plotly_js.SOURCE.name}") if route
)


def settings() -> dict:
    """What the loader hands to chart.js: its own route; plotly.js's routes, best first, and the trace types
    the first one (the app's bundle) has, else the full bundle is loaded; the modebar's settings."""
    return {
        "module": MODULE,
        "plotly": list(PLOTLY_ROUTES),
        "full": PLOTLY_ROUTES[-1],
        "types": sorted(plotly_js.TRACE_TYPES) if len(PLOTLY_ROUTES) > 1 else None,
        "config": PLOT_CONFIG,
    }


def code_lines(text: str) -> str:
    """JavaScript as an inline script needs it: each line without its indentation, and without the lines that are
    blank or a ``//`` comment from their start (the files keep them). Comments after code stay. Only for scripts
    with no multi-line string (a template literal's lines would lose their indentation)."""
    lines = (line.strip() for line in text.splitlines())
    return "\n".join(line for line in lines if line and not line.startswith("//")) + "\n"


def inline_js(path: Path, replacements: dict[str, str]) -> str:
    """A component's inline JavaScript (``path``, its placeholders replaced), after the shared ``baseUrl()``
    (components/base_url.js): where the app's own server serves the component's files. Comment lines are left
    out (``code_lines``): Streamlit sends this with every element of the component."""
    text = path.read_text(encoding="utf-8")
    for placeholder, value in replacements.items():
        text = text.replace(placeholder, value)
    return code_lines((FOLDER.parent / "base_url.js").read_text(encoding="utf-8") + "\n" + text)


def loader() -> str:
    """The component's inline JavaScript (sent with every chart, hence small) with its settings filled in."""
    return inline_js(FOLDER / "loader.js", {"__LENS_SETTINGS__": json.dumps(settings(), separators=(",", ":"))})


LOADER = loader()  # one script for the components below (and ui/follow.py's)
_component = st.components.v2.component(
    "attention_lens_chart",
    html=f'<div class="{CLASS}" style="width: 100%"></div>',
    js=LOADER,
    isolate_styles=False,  # plotly.js puts its hover and modebar styles in the page's <head>
)
# the same chart that asks for a step-through's rows when the page lacks those its figure names (viz/query_flip.py)
_with_rows = st.components.v2.component(
    "attention_lens_chart_rows",
    html=f'<div class="{CLASS}" style="width: 100%"></div>',
    js=LOADER,
    isolate_styles=False,
)
# the same chart whose clicked cell comes back to Python (a click on any other chart changes nothing)
_clickable = st.components.v2.component(
    "attention_lens_chart_click",
    html=f'<div class="{CLASS}" data-click="cell" style="width: 100%"></div>',
    js=LOADER,
    isolate_styles=False,
)


def figure_bytes(fig, update=None, *, rows: bool = True) -> bytes:
    """What is sent for ``fig``: a plain plotly Figure's packed spec (made once), else plotly's JSON of it.
    ``update`` (``viz.selection``: the chosen head's mark) follows a packed spec as is (the browser applies it),
    else is applied here. ``rows``: a step-through's rows (``viz.query_flip``) go with it; False: the page has
    them (the figure names them by their digest)."""
    if isinstance(fig, Sent):  # kept in the store as sent (ui.compute.figures)
        return with_rows(with_update(fig.packed, update), fig.rows if rows else None)
    if type(fig) is go.Figure:
        return with_update(spec_bytes(fig), update)
    if update is not None:
        from viz.selection import marked

        fig = marked(fig, update)  # a copy
    if isinstance(fig, go.Figure):  # a subclass may change after it is built: encoded each time
        return pio.to_json(fig.to_dict(), validate=False).encode("utf-8")
    return pio.to_json(fig, validate=False).encode("utf-8")  # a figure dict


def draw(fig, key: str, *, update=None, on_click: Callable[[dict], None] | None = None) -> None:
    """Draw ``fig`` in the chart that has this key (the same chart across reruns while the key stays).

    ``update``: a ``viz.selection`` update (restyle, relayout) applied on top of ``fig`` (a figure kept for every
    head, marked with the chosen one): the browser redraws only the mark when only the update changed.
    ``on_click(point)``: a click on a data point calls it, before the rerun that follows, with
    ``{"x", "y", "trace"}`` (the trace's name); like a widget's ``on_change``, so it may set other
    widgets' values. A click on a chart without it changes nothing."""
    yielding.yield_to_click()  # (a view drawn ahead stops here for a click that came meanwhile)
    if isinstance(fig, Sent) and fig.rows is not None:  # the Query inspector's step-through (viz/query_flip.py)
        data = figure_bytes(fig, update, rows=_rows_needed(key, rows_digest(fig.rows)))
        _with_rows(key=key, data=data, on_rows_change=lambda: _rows_missing(key))
        return
    data = figure_bytes(fig, update)
    if on_click is None:
        _component(key=key, data=data)
        return
    _clickable(key=key, data=data, on_click_change=lambda: _clicked(key, on_click))


# A step-through's rows (every query of a head: 0.1-1 MB) are sent once to a page, not on every rerun: the session
# keeps the digests of the rows it sent each chart lately, and a figure whose rows the page has names them by their
# digest alone. The page keeps more rows than that (query_rows.js); should it lack some all the same (a rerun that
# replaced the one that carried them before it left), it asks, and they come again.
ROWS_SENT = "_lens_rows_sent"  # session state: chart key -> the digests of the rows sent lately, oldest first
ROWS_REMEMBERED = 3  # per chart (the page keeps query_rows.js KEPT_ROWS of them)


def _rows_needed(key: str, digest: str) -> bool:
    """Whether the rows ``digest`` names must go with the figure (not sent to this chart lately); noted as sent."""
    sent = st.session_state.setdefault(ROWS_SENT, {}).setdefault(key, [])
    if digest in sent:
        return False
    sent.append(digest)
    del sent[:-ROWS_REMEMBERED]
    return True


def _rows_missing(key: str) -> None:
    """The page lacks rows this chart named: the next figure sends its rows again."""
    st.session_state.setdefault(ROWS_SENT, {})[key] = []


def clicked_point(value) -> dict | None:
    """The clicked point in a clickable chart's session-state value ({"click": {...}}), or None."""
    point = value.get("click") if isinstance(value, Mapping) else getattr(value, "click", None)
    return point if isinstance(point, dict) else None


def _clicked(key: str, on_click: Callable[[dict], None]) -> None:
    point = clicked_point(st.session_state.get(key))
    if point is not None:
        on_click(point)


def preload() -> None:
    """An empty, hidden chart as the page's first element: the browser fetches and compiles plotly.js
    while the server computes the first figures (a link at 512 tokens draws its first chart sooner)."""
    _component(key="lens_chart_preload", data=None)
