"""Placing a figure with its downloads, the same way in every view.

PNG comes from the plotly modebar (camera icon) in the browser; SVG, a slide-sized PNG and the CSV of
the numbers are made only when their button is clicked (deferred), so reruns stay fast.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import streamlit as st

from attention_core.request import TraceRequest
from viz import export as viz_export
from viz.selection import marked
from viz.theme import apply_theme
from viz.views import matrices_for_trace

from .. import compute, sidebar
from ..chart import draw
from ..plotly_spec import plotly_figure
from ..text import plain

NO_BROWSER = (
    "SVG and slide PNG are drawn on the server by kaleido, which needs a Chromium browser there, and none "
    "was found (Debian/Ubuntu: apt-get install chromium, or set BROWSER_PATH). The camera icon on each chart "
    "still saves a PNG from your own browser, and CSV works."
)
_NOTE_KEY = "_image_note_shown"


BROWSER_CHECK_S = 5.0  # how long one look for a browser holds (a view asks once per figure)
_browser_seen: list = [-BROWSER_CHECK_S, None]  # [time.monotonic() of the last look, what it found]


def image_export_problem() -> str | None:
    """Why SVG/PNG cannot be made on this server now (no browser), else None. Looked up again after
    ``BROWSER_CHECK_S``, so installing Chromium (or setting BROWSER_PATH) takes effect without a restart; a view's
    figures share one look (it searched the PATH and the usual places once per figure, about 2% of a run)."""
    now = time.monotonic()
    if now - _browser_seen[0] >= BROWSER_CHECK_S:
        _browser_seen[:] = [now, viz_export.find_browser()]
    return NO_BROWSER if _browser_seen[1] is None else None


def current(model: str, text: str, view: str | None = None):
    """(trace, settings) as the widgets hold them now, for ``model`` and ``text`` (what only a whole run changes):
    a fragment rerun on its own is handed what its last call was, so the parts of a view that the scaling's
    controls rerun alone (app.py) look both up here, as the view's own fragment does."""
    settings = replace(sidebar.read_settings(model), text=text, **sidebar.view_only())
    return compute.with_head(compute.trace_for(settings.request(), view=view), settings.head), settings


def went_wrong(err: Exception) -> None:
    """The page's message for an unexpected error (never a traceback): every fragment's last guard."""
    st.error(
        f"Something went wrong ({type(err).__name__}). Change a control or reload the page. "
        f"Details: {plain(str(err), 400)}",
        icon=":material/error:",
    )


@contextmanager
def guarded():
    """A fragment's (or the script's) last guard: a busy server is said as such, anything else by
    ``went_wrong``; never a traceback. Streamlit's rerun and stop pass through (they are not Exceptions)."""
    try:
        yield
    except compute.ServerBusy as err:
        st.warning(plain(str(err)), icon=":material/hourglass_top:")
    except Exception as err:  # noqa: BLE001 - the message names it
        went_wrong(err)


def zip_button(build: Callable[[str], bytes], *, what: str, file_name: str, key: str, help: str) -> None:
    """A "⬇ Export this <what> for slides" zip, built by ``build(formats)`` only when clicked (about half a
    second per image): PNG and SVG only where a browser exists, else HTML and CSV (said in the help)."""

    def make() -> bytes:
        return build("html,csv" if image_export_problem() else "png,svg,html,csv")

    st.download_button(
        f"⬇ Export this {what} for slides (PNG, SVG, HTML, CSV as a zip)",
        make,
        file_name=file_name,
        mime="application/zip",
        key=key,
        on_click="ignore",
        help=help + (" No Chromium on the server: the zip holds HTML and CSV only." if image_export_problem() else ""),
    )


def new_page() -> None:
    """Call once at the top of a run: the no-browser note is shown under the first figure only."""
    st.session_state[_NOTE_KEY] = False


def csv_bytes(matrix: np.ndarray, rows, cols) -> bytes:
    """A labelled matrix as CSV, by the same writer as the slides zip (labels guarded against formulas)."""
    return viz_export.matrix_csv(matrix, rows, cols).encode("utf-8")


def _image(fig, fmt: str, update=None):
    def make() -> bytes:
        try:  # a copy (figures are shared), marked as drawn (viz.selection)
            return viz_export.figure_image(apply_theme(marked(plotly_figure(fig), update), "slides"), fmt)
        except Exception as err:  # the browser vanished or crashed mid-way: a readable file, never a crash
            return f"Could not render {fmt.upper()}: {type(err).__name__}: {err}".encode()

    return make


def lazy_matrices(request: TraceRequest, view: str, head: int) -> dict:
    """name -> a callable giving ``viz.views.matrices_for_trace``'s (matrix, rows, cols) for one CSV, looked
    up when the download is asked for. A download button's callable lives until the next run has ended, so
    one that held the matrices (views into the trace's arrays) kept the old trace alive while a recompute
    built the new one (about 160 MB at SmolLM2's 1,024 tokens)."""
    names = tuple(matrices_for_trace(compute.trace_for(request, view=view), view, head=head))

    def one(name: str):
        return lambda: matrices_for_trace(compute.trace_for(request, view=view), view, head=head)[name]

    return {name: one(name) for name in names}


EXPORT_LABEL = "⬇ SVG · PNG · CSV"


def chart_key(key: str) -> str:
    """The key of the chart ``figure(..., key)`` draws."""
    return f"fig_{key}"


def figure(fig, key: str, data=None, *, caption: str | None = None, update=None) -> None:
    """Show ``fig``; offer SVG / PNG (slides) / CSV of ``data`` = (matrix, row_labels, col_labels), or a
    callable that returns it when the CSV is asked for (``lazy_matrices``). ``update``: the chosen head's mark on a
    figure kept for every head (``ui.compute.marked_figures``), drawn and downloaded with it.

    The three downloads sit in one small popover under the chart, made only while it is open (opening it reruns
    the view, which then adds them): a row of columns with three buttons and their tooltips under every chart was
    about a third of the elements a head change re-rendered, and each element is a message the server sends and
    the page takes in (docs/INTERACTION.md)."""
    draw(fig, key=chart_key(key), update=update)
    if caption:
        st.caption(caption)
    problem = image_export_problem()
    box = st.popover(
        EXPORT_LABEL,
        help="Download this figure: SVG and a slide-sized PNG, and the numbers as CSV.",
        key=f"{EXPORT_KEY}{key}",
        on_change="rerun",
    )
    if box.open:
        _downloads(box, fig, key, data, update, problem)
    if problem and not st.session_state.get(_NOTE_KEY):  # said once a page, where it is seen
        st.session_state[_NOTE_KEY] = True
        st.caption(problem)


EXPORT_KEY = "open_export_"  # + the figure's key: whether its downloads' popover is open


def _downloads(box, fig, key: str, data, update, problem: str | None) -> None:
    """The SVG, PNG and CSV buttons of one figure, in its open popover."""
    for fmt, mime, what in (
        ("svg", "image/svg+xml", "Vector image for slides (rendered on the server by kaleido)."),
        ("png", "image/png", "Slide-sized PNG with the white 'slides' theme."),
    ):
        box.download_button(
            fmt.upper(),
            b"" if problem else _image(fig, fmt, update),
            file_name=f"{key}.{fmt}",
            mime=mime,
            key=f"{fmt}_{key}",
            on_click="ignore",
            disabled=problem is not None,
            help=problem or what,
        )
    if data is not None:
        box.download_button(
            "CSV",
            lambda: csv_bytes(*(data() if callable(data) else data)),
            file_name=f"{key}.csv",
            mime="text/csv",
            key=f"csv_{key}",
            on_click="ignore",
            help="The numbers behind this figure.",
        )
