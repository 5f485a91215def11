"""View 5: one query token's row, step by step: q.k_j, scaled, softmax, and each key's share of V."""

from __future__ import annotations

import streamlit as st

from attention_core.readouts import top_keys
from attention_core.traces import ModelTrace
from viz.labels import plain_labels
from viz.views import matrices_for_trace

from .. import compute, live_temperature
from ..settings import Settings
from ..sidebar import as_position
from ..text import plain
from .common import figure


def render(trace: ModelTrace, settings: Settings) -> None:
    live_temperature.follow_release()
    labels = plain_labels(trace.tokens)
    n = len(labels)
    st.session_state["query"] = as_position(st.session_state.get("query", 0))
    if st.session_state["query"] >= n:
        st.session_state["query"] = n - 1
    st.selectbox(
        "Query token",
        list(range(n)),
        key="query",
        format_func=lambda i: f"{i}: {labels[i]}",
        help="Follow this token's row through every step.",
    )
    i = int(st.session_state["query"])
    st.subheader(f"Query {i} '{plain(labels[i], 60)}' in layer {trace.layer}, head {trace.head}")
    st.latex(
        r"e_{ij} = q_i \cdot k_j \;\rightarrow\; \tilde{e}_{ij} = e_{ij}\cdot s \;\rightarrow\; "
        r"\alpha_{ij} = \mathrm{softmax}_j(\tilde{e}_{ij}) \;\rightarrow\; o_i = \sum_j \alpha_{ij} v_j"
    )
    figs = compute.figures(
        trace,
        settings.request(),
        "query",
        head=trace.head,
        query=i,
        theme=settings.theme,
        show_values=settings.show_values or None,
    )
    data = matrices_for_trace(trace, "query", head=trace.head, query=i)
    figure(figs["query"], "query", data["query_contributions"])
    head = trace.core.head(trace.head)
    top = top_keys(head.weights[i], 3)
    st.caption("Largest weights: " + ", ".join(f"'{plain(labels[j], 60)}' ({head.weights[i, j]:.3f})" for j in top))
    live_temperature.section(head, labels, i, fill=settings.fill, view="query")
