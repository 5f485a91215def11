"""View 3: every head of the layer, the layer x head statistics, attention lines and rollout."""

from __future__ import annotations

import streamlit as st

from attention_core.traces import ModelTrace
from viz.labels import plain_labels
from viz.stats import STATISTICS as STATISTIC_LABELS
from viz.views import matrices_for_trace

from .. import compute
from ..settings import STATISTICS, Settings
from .common import figure

STATISTIC_HELP = {
    "entropy": "mean row entropy: low = focused, high = spread out",
    "max_weight": "mean of each row's largest weight",
    "distance": "mean |i - j| weighted by attention: how far a head looks",
    "previous_token": "mean weight on the token just before",
    "first_token": "mean weight on the first token (an 'attention sink')",
}


def render(trace: ModelTrace, settings: Settings) -> None:
    theme, shown = settings.theme, settings.show_values or None
    source = "the model's returned attentions" if trace.model_attentions is not None else "the own core"
    st.subheader(f"All heads of layer {trace.layer} ({source})")
    request = settings.request()
    precomputed = {f"overview_{settings.statistic}": compute.overview(trace, request, settings.statistic)}
    if trace.model_attentions is not None:
        precomputed["rollout"] = compute.rollout(trace, request)
    figs = compute.figures(
        trace, request, "heads", theme=theme, show_values=shown, statistic=settings.statistic, precomputed=precomputed
    )
    figure(figs["head_grid"], "head_grid")
    name = f"overview_{settings.statistic}"
    st.markdown(
        f"**Layer × head overview**: {STATISTIC_HELP.get(settings.statistic, '')}. Pick one to look at it everywhere:"
    )
    event = st.plotly_chart(
        figs[name], width="stretch", theme=None, key="fig_overview", on_select="rerun", selection_mode="points"
    )
    points = (
        (event or {}).get("selection", {}).get("points", [])
        if isinstance(event, dict)
        else getattr(getattr(event, "selection", None), "points", [])
    )
    if points:
        point = points[0]
        layer, head = int(point.get("y", trace.layer)), int(point.get("x", trace.head))
        if (layer, head) != (trace.layer, trace.head):
            st.session_state["layer"], st.session_state["head"] = layer, head
            st.rerun()
    cols = st.columns(2)
    cols[0].selectbox(
        "Statistic", STATISTICS, key="statistic", format_func=STATISTIC_LABELS.get, help="What colours the overview."
    )
    cols[1].caption("Click a cell of the overview to select that layer and head.")
    lines = st.expander(
        "Attention lines for the selected head (bertviz-style)", expanded=True, key="open_lines", on_change="rerun"
    )
    if lines.open:
        with lines:
            fig = compute.figures(trace, request, "lines", head=trace.head, theme=theme)["lines"]
            figure(fig, "lines", matrices_for_trace(trace, "lines", head=trace.head)["lines_weights"])
    if trace.model_attentions is not None:
        box = st.expander("Attention rollout across layers", expanded=False, key="open_rollout", on_change="rerun")
        if box.open:
            with box:
                st.caption(
                    "Each layer's head-averaged attention, mixed with the residual path (0.5·A + 0.5·I), "
                    "multiplied through the layers: which input tokens reach each position at the top."
                )
                rollout = compute.figures(
                    trace, request, "rollout", theme=theme, show_values=shown, precomputed=precomputed
                )
                figure(
                    rollout["rollout"],
                    "rollout",
                    (precomputed["rollout"], plain_labels(trace.tokens), plain_labels(trace.tokens)),
                )
