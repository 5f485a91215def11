"""View 3: every head of the layer, the layer x head statistics, attention lines and rollout."""

from __future__ import annotations

import streamlit as st

from attention_core.traces import ModelTrace
from viz.labels import plain_labels
from viz.stats import SHORT_NAMES
from viz.views import heads_source

from .. import compute, display, prefetch
from ..chart import draw
from ..settings import STATISTICS, Settings
from .common import figure, lazy_matrices

STATISTIC_HELP = {
    "entropy": "mean row entropy: low = focused, high = spread out",
    "max_weight": "mean of each row's largest weight",
    "distance": "mean |i - j| weighted by attention: how far a head looks",
    "previous_token": "mean weight on the token just before",
    "first_token": "mean weight on the first token (an 'attention sink')",
}

FLIP_LABEL = "One head at a time, full size: flip with the slider under the chart (in your browser)"
FLIP_HELP = (
    "Every head of this layer is in this one chart; the slider under it only changes which one is shown, in "
    "your browser, with no wait and nothing sent. Each head's colours run from 0 to its own largest "
    "weight (hover for the numbers). The sidebar's Head picks the head of every other step and chart."
)


def _overviews(trace: ModelTrace, request) -> dict:
    """The five layer x head statistics, made once per capture (``compute.overview``)."""
    return {f"overview_{name}": compute.overview(trace, request, name) for name in STATISTICS}


def _options(settings: Settings) -> dict:
    """The options of this view's figures (the same for the click and for ``ahead``)."""
    return dict(
        theme=settings.theme,
        show_values=settings.show_values or None,
        statistic=settings.statistic,
        only=("head_grid", "head_flip", "overview_switch"),
    )


def _lines_options(trace: ModelTrace, settings: Settings) -> dict:
    return dict(head=trace.head, theme=settings.theme)


LINES_KEY = "open_lines"  # the attention lines' drawer (open: True)


def ahead(trace: ModelTrace, settings: Settings) -> None:
    """Queue this view's figures (the grid, the flip chart, the overview and the attention lines, whose drawers
    start open) for the background builder, once the server has paused for ``prefetch.PAUSE_S`` (a few hundred
    milliseconds of building that would slow the next head change); the overviews are made there too."""
    request, pause = settings.request(), prefetch.PAUSE_S
    compute.figures(
        trace, request, "heads", ahead=pause, precomputed=lambda: _overviews(trace, request), **_options(settings)
    )
    if st.session_state.get(LINES_KEY, True):  # the lines' drawer starts open; once closed, they are not built
        compute.figures(trace, request, "lines", ahead=pause, **_lines_options(trace, settings))


def render(trace: ModelTrace, settings: Settings) -> None:
    theme, shown = settings.theme, settings.show_values or None
    source = "the model's returned attentions" if trace.model_attentions is not None else "the own core"
    st.subheader(f"All heads of layer {trace.layer} ({source})")
    request = settings.request()
    precomputed = _overviews(trace, request)
    # kept once for every head (for the model's weights, whatever the core's settings): the head is only marked
    figs = compute.marked_figures(trace, request, "heads", precomputed=precomputed, **_options(settings))
    if display.active(settings):
        figure(display.grid_view(trace, settings), "head_grid")
    else:
        fig, update = figs["head_grid"]
        figure(fig, "head_grid", update=update)
    flip_box = st.expander(FLIP_LABEL, expanded=True, key="open_flip", on_change="rerun")
    if flip_box.open:
        with flip_box:
            st.caption(
                FLIP_HELP
                + (
                    " This chart shows every token as the model saw it: the display options apply to the grid above."
                    if display.active(settings)
                    else ""
                )
            )
            fig, update = figs["head_flip"]
            figure(fig, "head_flip", update=update)
    _overview(trace, figs["overview_switch"])
    roles_box = st.expander(
        "Head roles: sink, previous-token, induction, positional", key="open_roles", on_change="rerun"
    )
    if roles_box.open:
        with roles_box:
            head_roles_section(trace, settings)
    lines = st.expander(
        "Attention lines, every head (bertviz-style): flip with the slider under the chart",
        expanded=True,
        key=LINES_KEY,
        on_change="rerun",
    )
    if lines.open:
        with lines:
            fig, update = compute.marked_figures(trace, request, "lines", **_lines_options(trace, settings))["lines"]
            figure(fig, "lines", lazy_matrices(settings.request(), "lines", trace.head)["lines_weights"], update=update)
    if trace.model_attentions is not None:
        box = st.expander("Attention rollout across layers", expanded=False, key="open_rollout", on_change="rerun")
        if box.open:  # the rollout (every layer multiplied through: seconds at long inputs) only when opened
            precomputed["rollout"] = compute.rollout(trace, request)
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


def cell(point: dict, num_layers: int, num_heads: int) -> tuple[int, int] | None:
    """(layer, head) of a clicked overview cell (x = head, y = layer), kept within the model; None when the
    point holds no usable numbers."""
    try:
        layer, head = int(point.get("y")), int(point.get("x"))
    except (TypeError, ValueError):
        return None
    return min(max(layer, 0), num_layers - 1), min(max(head, 0), num_heads - 1)


SELECTED = "_overview_selected"  # set by the click callback, read by the view's run that follows


def _select(point: dict, num_layers: int, num_heads: int) -> None:
    """The overview's click callback: that layer and head everywhere (it runs before any widget is drawn)."""
    chosen = cell(point, num_layers, num_heads)
    if chosen is not None:
        st.session_state["layer"], st.session_state["head"] = chosen
        st.session_state[SELECTED] = chosen


def _overview(trace: ModelTrace, marked_figure) -> None:
    """The layer x head overview (every statistic, switched by its buttons in the browser); a clicked cell
    selects that layer and head everywhere."""
    st.markdown(
        "**Layer × head overview**: one statistic of every head of every layer; the buttons above the chart "
        "switch the statistic in your browser. Click a cell to look at that layer and head everywhere."
    )
    st.caption(" · ".join(f"**{SHORT_NAMES[name]}**: {text}" for name, text in STATISTIC_HELP.items()))
    layers, heads = trace.facts.num_layers, trace.core.num_heads
    fig, update = marked_figure
    draw(fig, "fig_overview", update=update, on_click=lambda point: _select(point, layers, heads))
    chosen = st.session_state.pop(SELECTED, None)
    if chosen is not None and chosen[0] != trace.layer:
        # The click reran only this view (a fragment): the sidebar's Layer and every number drawn from the
        # old layer belong to the whole page, so the whole page runs again with the new layer.
        st.rerun()


ROLES_HELP = (
    "Each head scored four ways, 0..1. **Sink**: mean weight on the first token and special tokens. "
    "**Previous-token**: mean weight on the token just before. **Positional**: share of rows whose largest "
    "weight sits at one fixed offset (other than -1). **Induction**, the standard test: {length} random tokens "
    "repeated twice; mean weight from each token of the second copy to the token after its first occurrence "
    "(a copying head scores about 1, an even spread about 1/n). Sink, previous-token and positional are read on "
    "this text; induction on the random sequence (one extra forward pass of the model). A head is named after "
    "the first of induction, previous-token, positional, sink whose score reaches {threshold:g}, else mixed "
    "(sink last: a head with nothing to do on this text rests on the first token)."
)


def head_roles_section(trace: ModelTrace, settings: Settings) -> None:
    """The layer x head map of roles, with every score in the hover and the CSV."""
    from attention_core.head_roles import INDUCTION_LENGTH
    from viz.roles import role_map

    roles = display.roles(trace, settings.request())
    st.caption(ROLES_HELP.format(length=INDUCTION_LENGTH, threshold=roles.threshold))
    if trace.model_attentions is None:
        st.caption("No model here (from-scratch core only): induction is not measured.")
    _, layer, _ = heads_source(trace)
    figure(role_map(roles, selected=(layer, trace.head), theme=settings.theme), "head_roles", roles.table())
