"""View 5: one query token's row, step by step: q.k_j, scaled, softmax, and each key's share of V; with the
display options on (hidden special keys, words, own weight range) as `viz.query_shown` shows it."""

from __future__ import annotations

import streamlit as st

from attention_core.readouts import top_keys
from attention_core.traces import ModelTrace
from viz.labels import plain_labels
from viz.query_flip import FLIP_BYTES
from viz.query_shown import QueryRowShown
from viz.views import matrices_for_trace

from .. import compute, display, follow, live_temperature
from ..settings import Settings
from ..sidebar import as_position, positions
from ..text import plain
from .common import chart_key, figure

QUERY_KEY = "query"  # the box's key: the query in session state and in the link


def _options(trace: ModelTrace, settings: Settings, query: int) -> dict:
    return dict(head=trace.head, query=query, theme=settings.theme, show_values=settings.show_values or None)


def _query(n: int) -> int:
    """The query shown: the session's, within 0..n-1."""
    return min(as_position(st.session_state.get(QUERY_KEY, 0)), n - 1)


def ahead(trace: ModelTrace, settings: Settings) -> None:
    """Queue this view's step-through for the head and query shown elsewhere (``compute.figures(..., ahead=True)``)."""
    if not display.active(settings):
        query = _query(len(trace.tokens))
        compute.figures(trace, settings.request(), "query", ahead=True, **_options(trace, settings, query))


def render(trace: ModelTrace, settings: Settings) -> None:
    live_temperature.follow_release()
    labels = plain_labels(trace.tokens)
    n = len(labels)
    st.session_state[QUERY_KEY] = _query(n)
    st.selectbox(
        "Query token",
        list(range(n)),
        key=QUERY_KEY,
        format_func=lambda i: f"{i}: {labels[i]}",  # "i:" first: ui/follow.py reads the choice from it
        help="Follow this token's row through every step.",
    )
    i = int(st.session_state[QUERY_KEY])
    as_shown = display.query_step_view(trace, settings, i) if display.active(settings) else None
    what = f"Query {i} '{plain(labels[i], 60)}'"
    if as_shown is not None and as_shown[2].words:
        what = f"Query word '{plain(as_shown[2].query_label, 60)}' (token {i})"
    st.subheader(f"{what} in layer {trace.layer}, head {trace.head}")
    st.latex(
        r"e_{ij} = q_i \cdot k_j \;\rightarrow\; \tilde{e}_{ij} = e_{ij}\cdot s \;\rightarrow\; "
        r"\alpha_{ij} = \mathrm{softmax}_j(\tilde{e}_{ij}) \;\rightarrow\; o_i = \sum_j \alpha_{ij} v_j"
    )
    if as_shown is not None:
        _step_as_shown(*as_shown)
    else:
        _step(trace, settings, labels, i)
    query_set(trace, settings, labels, i)
    live_temperature.section(trace.core.head(trace.head), labels, i, fill=settings.fill, view="query")


def _step(trace: ModelTrace, settings: Settings, labels: list[str], i: int) -> None:
    """The step-through as computed (no display option on): the view's shared, prefetched figure."""
    figs = compute.figures(trace, settings.request(), "query", **_options(trace, settings, i))
    data = matrices_for_trace(trace, "query", head=trace.head, query=i)
    flips = bool(getattr(figs["query"], "sliders", None))  # every query's row is in the page (viz/query_flip.py)
    figure(figs["query"], "query", data["query_contributions"], caption=FLIP_NOTE if flips else NO_FLIP_NOTE)
    if flips:  # a pick in the box is shown in the chart at once, from the rows the page holds
        follow.query_box(QUERY_KEY, chart_key("query"), i, live_temperature.component_key("query"))
    head = trace.core.head(trace.head)
    top = top_keys(head.weights[i], 3)
    st.caption(
        f"Largest weights of query {i}: "
        + ", ".join(f"'{plain(labels[j], 60)}' ({head.weights[i, j]:.3f})" for j in top)
    )


FLIP_NOTE = (
    "The slider under the chart steps through every query of this head in your browser, with no wait for the "
    "server. The box above sets the query that the rest of this view (largest weights, query set, temperature), "
    "the link and the downloads follow."
)
NO_FLIP_NOTE = (
    f"Pick the query in the box above: at this length the rows of every query (more than "
    f"{FLIP_BYTES // 1_000_000} MB) are not all sent to the page, so the chart has no slider of its own."
)


def _step_as_shown(fig, data: tuple, shown: QueryRowShown) -> None:
    """The step-through as the display options show it (hidden special keys, words, own weight range)."""
    figure(fig, "query", data)
    top = top_keys(shown.weights, 3)
    keys = "key words" if shown.words else "keys"
    st.caption(
        f"Largest weights ({keys} as shown): "
        + ", ".join(f"'{plain(shown.key_labels[j], 60)}' ({shown.weights[j]:.3f})" for j in top)
    )


def query_set(trace: ModelTrace, settings: Settings, labels: list[str], query: int) -> None:
    """Several queries at once: their rows summed, over the keys as the display options show them."""
    n = len(labels)
    st.session_state["query_set"] = [j for j in positions(st.session_state.get("query_set", ())) if j < n]
    st.multiselect(
        "Query set (rows summed)",
        list(range(n)),
        key="query_set",
        format_func=lambda j: f"{j}: {labels[j]}",
        help="Pick several query tokens (e.g. every token of a phrase): their attention rows are added up, "
        "so the bars show where the set as a whole looks (they sum to the number of queries).",
    )
    chosen = positions(st.session_state.get("query_set", ()))
    if not chosen and not display.active(settings):
        return
    fig, data, _ = display.query_row_view(trace, settings, chosen or (query,))
    figure(fig, "query_set", data)
