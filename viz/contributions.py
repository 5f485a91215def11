"""Head contributions: raw weights against value-weighted contributions, head shares, ablation, direct logits.

Pure figures from numpy arrays (what ``attention_core.contributions`` / ``attention_core.ablation`` return,
read as plain arrays and numbers): viz never imports attention_core at run time.

- ``contribution_grid``    every head of a layer, raw weights alpha or contribution shares
                           ||alpha_ij v_j W^O_h|| / sum_j (same axes, same 0..1 scale: switch ``mode``)
- ``row_comparison``       one head's row at one query: weight and contribution share side by side per key
- ``head_share_figure``    each head's share of the block's output, per token (stacked to 1)
- ``ablation_bars``        one layer: the effect of switching off each head
- ``ablation_map_figure``  layers × heads: the effect of switching off each head
- ``next_token_figure``    a decoder's top next tokens before and after switching a head off
- ``direct_logit_figure``  each head's direct contribution to a token's logit, with the rest of the stream
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .checks import as_array, check_labels
from .heads import head_grid, layer_head_map
from .heatmaps import colour_axis, style_axis, title_with_tokens
from .labels import escape_label, hover_labels, tick_labels, visible_label
from .theme import LINE_COLOURS, SEQUENTIAL_OTHER, apply_theme

CONTRIBUTION_MODES = ("weights", "contributions")  # what the head grid shows (the view's switch)
CONTRIBUTION_MODE_LABELS = {
    "weights": "Raw weights α",
    "contributions": "Contributions ‖α v W^O‖",
}
HEAD_COLOURS = (*LINE_COLOURS, "#F0E442", "#000000", "#999999", "#882255", "#44AA99", "#117733")


def contribution_grid(
    weights,
    shares,
    tokens: Sequence[str],
    *,
    mode: str = "weights",
    layer: int | None = None,
    selected: int | None = None,
    mask=None,
    theme: str = "screen",
) -> go.Figure:
    """Every head (H, L, S): ``mode`` "weights" draws alpha, "contributions" the contribution shares
    (each row of ||alpha_ij v_j W^O_h|| scaled to sum to 1), on the same axes and the same 0..1 scale."""
    if mode not in CONTRIBUTION_MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {CONTRIBUTION_MODES}")
    weights = as_array("weights", weights, 3)
    shares = as_array("shares", shares, 3)
    if weights.shape != shares.shape:
        raise ValueError(f"weights {weights.shape} and shares {shares.shape} must have one shape")
    values = weights if mode == "weights" else shares
    heads, rows, cols = values.shape
    where = "" if layer is None else f"layer {layer}: "
    title = (
        f"{where}raw attention weights α of all {heads} heads   ({rows} queries × {cols} keys)"
        if mode == "weights"
        else f"{where}contribution shares ‖α<sub>ij</sub> v<sub>j</sub> W<sup>O</sup><sub>h</sub>‖ (each row scaled "
        f"to sum to 1)   ({rows} × {cols})"
    )
    fig = head_grid(values, tokens, tokens, mask=mask, layer=layer, selected=selected, title=title, theme=theme)
    fig.update_layout(coloraxis_colorbar_title_text="weight" if mode == "weights" else "share")
    return fig


def row_comparison(
    weights_row,
    shares_row,
    tokens: Sequence[str],
    *,
    query_index: int,
    head: int,
    layer: int | None = None,
    theme: str = "screen",
) -> go.Figure:
    """One query's row of one head: weight alpha_ij and contribution share per key j, side by side."""
    weights_row = as_array("weights_row", weights_row, 1)
    shares_row = as_array("shares_row", shares_row, 1)
    if weights_row.shape != shares_row.shape:
        raise ValueError(f"weights_row {weights_row.shape} and shares_row {shares_row.shape} must have one shape")
    labels = check_labels("tokens", tokens, weights_row.shape[0], "weights_row", weights_row.shape)
    x = np.arange(len(labels))
    fig = go.Figure()
    for name, values, colour in (
        ("weight α", weights_row, LINE_COLOURS[0]),
        ("contribution share", shares_row, LINE_COLOURS[1]),
    ):
        fig.add_trace(
            go.Bar(
                x=x,
                y=values,
                name=name,
                marker_color=colour,
                customdata=hover_labels(labels),
                hovertemplate=f"key %{{customdata}}<br>{name} %{{y:.4f}}<extra></extra>",
            )
        )
    style_axis(fig, "x", len(labels), tokens=labels, title="key")
    where = "" if layer is None else f"layer {layer}, "
    fig.update_layout(
        barmode="group",
        title_text=title_with_tokens(f"{where}head {head}: where query {query_index}", labels[query_index])
        + " looks (weight) and what it takes (contribution)",
        yaxis=dict(title_text="share of the row", range=[0, 1]),
        legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"),
        height=420,
    )
    return apply_theme(fig, theme)


def head_share_figure(
    shares, tokens: Sequence[str], *, layer: int | None = None, selected: int | None = None, theme: str = "screen"
) -> go.Figure:
    """(H, L) each head's share of the block's output per token, stacked (each token's bar sums to 1)."""
    shares = as_array("shares", shares, 2)
    heads, length = shares.shape
    labels = check_labels("tokens", tokens, length, "shares", shares.shape)
    x = np.arange(length)
    fig = go.Figure()
    for h in range(heads):
        fig.add_trace(
            go.Bar(
                x=x,
                y=shares[h],
                name=f"head {h}",
                marker_color=HEAD_COLOURS[h % len(HEAD_COLOURS)],
                marker_line=dict(width=2 if h == selected else 0, color="#000"),
                customdata=hover_labels(labels),
                hovertemplate=f"token %{{customdata}}<br>head {h}: %{{y:.3f}}<extra></extra>",
            )
        )
    style_axis(fig, "x", length, tokens=labels, title="token")
    where = "" if layer is None else f"layer {layer}: "
    fig.update_layout(
        barmode="stack",
        title_text=f"{where}each head's share of the attention output, ‖o<sub>h</sub> W<sup>O</sup><sub>h</sub>‖ / "
        "Σ<sub>h'</sub> ‖o<sub>h'</sub> W<sup>O</sup><sub>h'</sub>‖, per token",
        yaxis=dict(title_text="share", range=[0, 1]),
        height=440,
    )
    return apply_theme(fig, theme)


def ablation_bars(effects, *, metric: str, layer: int, decoder: bool, theme: str = "screen") -> go.Figure:
    """(H,) the effect of switching off each head of one layer."""
    effects = as_array("effects", effects, 1)
    colours = [LINE_COLOURS[1] if decoder and e < 0 else LINE_COLOURS[0] for e in effects]
    fig = go.Figure(
        go.Bar(
            x=np.arange(len(effects)),
            y=effects,
            marker_color=colours,
            name="effect",
            hovertemplate="head %{x}<br>effect %{y:.3g}<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="head switched off", tickmode="array", tickvals=list(range(len(effects))))
    fig.update_layout(
        title_text=f"layer {layer}: what switching off each head changes<br><sup>{escape_label(metric)}</sup>",
        yaxis_title_text="Δ log p" if decoder else "1 − cos",
        height=380,
        showlegend=False,
    )
    return apply_theme(fig, theme)


def ablation_map_figure(
    effects,
    *,
    metric: str,
    decoder: bool,
    selected: tuple[int, int] | None = None,
    show_values: bool | None = None,
    theme: str = "screen",
) -> go.Figure:
    """(layers, H) the effect of switching off each head; diverging (signed Δ log p) for a decoder,
    sequential (1 − cos >= 0) for an encoder. ``selected`` = (layer, head) is outlined."""
    effects = as_array("effects", effects, 2)
    layers, heads = effects.shape
    fig = layer_head_map(
        effects,
        name="ablation",
        value_name="effect",
        value_format=".2g",
        head_title="head switched off",
        selected=selected,
        show_values=show_values,
    )
    if decoder:
        finite = np.abs(effects[np.isfinite(effects)])
        reach = max(float(finite.max()) if finite.size else 1.0, 1e-12)  # symmetric about 0
        axis = colour_axis("diverging", title="Δ log p", zmin=-reach, zmax=reach)
    else:
        axis = colour_axis(SEQUENTIAL_OTHER, title="1 − cos", zmin=0.0)
    fig.update_layout(
        title_text=f"Every head switched off in turn<br><sup>{escape_label(metric)}</sup>",
        coloraxis=axis,
        height=min(1000, max(420, 160 + 28 * layers)),
    )
    return apply_theme(fig, theme)


def next_token_figure(before, after, *, title: str = "", theme: str = "screen") -> go.Figure:
    """A decoder's top next tokens: ``before`` and ``after`` are sequences of (label, log_prob); the bars
    show probabilities of every token in either list, before and after."""
    order: dict[str, list[float | None]] = {}
    for index, choices in enumerate((before, after)):
        for label, log_prob in choices:
            order.setdefault(str(label), [None, None])[index] = float(log_prob)
    labels = list(order)
    shown = [visible_label(label, 16) for label in labels]
    fig = go.Figure()
    for index, (name, colour) in enumerate((("before", LINE_COLOURS[0]), ("after", LINE_COLOURS[1]))):
        probs = [None if order[label][index] is None else float(np.exp(order[label][index])) for label in labels]
        fig.add_trace(
            go.Bar(
                y=np.arange(len(labels)),
                x=probs,
                orientation="h",
                name=name,
                marker_color=colour,
                customdata=hover_labels(labels),
                hovertemplate=f"%{{customdata}}<br>p {name} %{{x:.4f}}<extra></extra>",
            )
        )
    fig.update_yaxes(
        tickmode="array",
        tickvals=list(range(len(labels))),
        ticktext=tick_labels(shown),
        autorange="reversed",
        title_text="next token",
    )
    fig.update_layout(
        barmode="group",
        title_text=title,
        xaxis_title_text="probability (blank: outside that run's top list)",
        height=max(320, 120 + 36 * len(labels)),
        legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"),
    )
    return apply_theme(fig, theme)


def direct_logit_figure(
    heads,
    *,
    bias: float,
    rest: float,
    constant: float,
    logit: float,
    token: str,
    layer: int,
    position: int,
    theme: str = "screen",
) -> go.Figure:
    """(H,) each head's direct contribution to a token's logit, then b^O, the rest of the residual stream
    and the constant terms; the title gives the model's own logit (the bars sum to it)."""
    heads = as_array("heads", heads, 1)
    names = [f"head {h}" for h in range(len(heads))] + ["b<sup>O</sup>", "rest of stream", "norm/unembed bias"]
    values = [*heads.tolist(), bias, rest, constant]
    colours = [LINE_COLOURS[0] if v >= 0 else LINE_COLOURS[1] for v in heads] + ["#999999"] * 3
    fig = go.Figure(
        go.Bar(
            x=np.arange(len(values)),
            y=values,
            marker_color=colours,
            name="logit part",
            hovertemplate="%{customdata}<br>%{y:.4f}<extra></extra>",
            customdata=names,
        )
    )
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(names))), ticktext=names, tickangle=-45)
    fig.update_layout(
        title_text=title_with_tokens(f"layer {layer}: direct logit attribution to", token)
        + f" at position {position}<br><sup>bars sum to the model's logit {logit:.3f} (final norm's scale held fixed)"
        "</sup>",
        yaxis_title_text="logit part",
        height=420,
        showlegend=False,
    )
    return apply_theme(fig, theme)
