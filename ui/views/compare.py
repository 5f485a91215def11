"""View 2: the own core beside the real model, for the same layer and head."""

from __future__ import annotations

import streamlit as st

from attention_core.traces import ModelTrace
from viz.views import figures_for_trace, matrices_for_trace

from ..settings import Settings
from .common import figure


def render(trace: ModelTrace, settings: Settings) -> None:
    h = trace.head
    st.subheader(f"Own core vs {trace.facts.name.split('/')[-1]}: layer {trace.layer}, head {h}")
    if trace.model is None:
        st.warning(
            "This model's q, k, v could not be captured, so only its returned attentions are shown (Heads view)."
        )
        return
    figs = figures_for_trace(trace, "compare", head=h, theme=settings.theme, show_values=settings.show_values or None)
    data = matrices_for_trace(trace, "compare", head=h)
    diff = abs(trace.core.head(h).weights - trace.model.head(h).weights).max()
    if trace.departures:
        st.warning(
            f"Max |difference| of the weights: **{diff:.2e}**. The settings depart from the model (listed above), "
            "so the patterns are expected to differ: this shows how.",
            icon="🔀",
        )
    elif diff <= 1e-5:
        st.success(
            f"Max |difference| of the weights: **{diff:.2e}**: the from-scratch core reproduces the model.", icon="✅"
        )
    else:
        st.error(f"Max |difference| of the weights: **{diff:.2e}**: larger than float32 rounding.", icon="❗")
    figure(figs["compare"], "compare", data.get("difference"))

    st.markdown("**Every layer**: the model's captured q, k, v replayed through the core (`sdpa.py`).")
    rows = [
        {"layer": r.layer, "max |Δ| weights": f"{r.weights:.2e}", "max |Δ| output": f"{r.output:.2e}"}
        for r in trace.replay
    ]
    st.dataframe(rows, hide_index=True, width="content")
