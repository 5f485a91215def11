"""View 2: the own core beside the real model, for the same layer and head."""

from __future__ import annotations

import streamlit as st

from attention_core.traces import ModelTrace
from viz.compare import max_abs_difference

from .. import compute
from ..settings import Settings
from ..text import html_table, plain
from .common import figure, lazy_matrices


def _options(settings: Settings, head: int) -> dict:
    return dict(head=head, theme=settings.theme, show_values=settings.show_values or None)


def ahead(trace: ModelTrace, settings: Settings) -> None:
    """Queue this view's figure for the head shown elsewhere (``compute.figures(..., ahead=True)``)."""
    if trace.model is not None and trace.head < trace.model.num_heads:
        compute.figures(trace, settings.request(), "compare", ahead=True, **_options(settings, trace.head))


def render(trace: ModelTrace, settings: Settings) -> None:
    h = trace.head
    st.subheader(f"Own core vs {plain(trace.facts.name.split('/')[-1], 60)}: layer {trace.layer}, head {h}")
    if trace.model is None:
        st.warning(
            "This model's q, k, v could not be captured, so only its returned attentions are shown (Heads view)."
        )
        return
    if h >= trace.model.num_heads or trace.core.weights.shape != trace.model.weights.shape:
        st.info(
            f"The own core has {trace.core.num_heads} heads here (source: from scratch) and the model "
            f"{trace.model.num_heads}: head {h} has no counterpart in the model, so there is nothing to compare. "
            "Pick a head below "
            f"{trace.model.num_heads}, or set the source back to 'replay the model's layer'.",
            icon=":material/call_split:",
        )
        return
    figs = compute.figures(trace, settings.request(), "compare", **_options(settings, h))
    diff = max_abs_difference(trace.core.head(h).weights, trace.model.head(h).weights)
    if trace.departures:
        st.warning(
            f"Max |difference| of the weights: **{diff:.2e}**. The settings depart from the model (listed above), "
            "so the patterns are expected to differ: this shows how.",
            icon=":material/call_split:",
        )
    elif diff <= 1e-5:
        st.success(
            f"Max |difference| of the weights: **{diff:.2e}**: the from-scratch core reproduces the model.",
            icon=":material/check_circle:",
        )
    else:
        st.error(
            f"Max |difference| of the weights: **{diff:.2e}**: larger than float32 rounding.", icon=":material/error:"
        )
    figure(figs["compare"], "compare", lazy_matrices(settings.request(), "compare", h).get("difference"))

    st.markdown(
        "**Every layer, two checks**: (a) the model's own captured q, k, v fed through the core's `sdpa.py`; "
        "(b) the layer's input X through its W^Q, W^K, W^V with the core's `multihead.py`, then `sdpa.py`. "
        "Float32 rounding is about 1e-7."
    )
    trace = compute.with_replay(trace, settings.request())
    hidden = {r.layer: r for r in trace.replay_hidden}
    rows = []
    for r in trace.replay:
        h_row = hidden.get(r.layer)
        rows.append(
            {
                "layer": r.layer,
                "(a) weights": f"{r.weights:.1e}",
                "(a) output": f"{r.output:.1e}",
                "(b) weights": f"{h_row.weights:.1e}" if h_row else "n/a",
                "(b) output": f"{h_row.output:.1e}" if h_row else "n/a",
            }
        )
    # a plain HTML table, not st.dataframe (the data grid's start cost a switch to this view about 0.4 s in the
    # browser, benchmarks/REPORT.md "ninth") nor st.table (a styled component per cell: about 0.1 s, "twentieth")
    st.html(html_table(rows))
