"""Attention as lines between tokens (bertviz head_view style) for one head.

Queries in the left column, keys in the right column, one line per (query, key) pair whose
weight reaches ``threshold``; a line's opacity is its weight (in steps of ``1 / OPACITY_STEPS``,
since lines of one opacity share one trace).

Built from the plain dicts plotly keeps for its traces, in one ``viz.theme.themed_figure`` without plotly's
per-property validation: a layer's hundred line traces at 16 tokens took about 185 ms through ``go.Scatter`` and
``add_trace``. tests/test_viz_lines.py compares the JSON with the figures built step by step.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .checks import as_array, as_matrix, check_labels
from .labels import escape_label, tick_labels, visible_label
from .theme import LINE_COLOURS, themed_figure

OPACITY_STEPS = 20
ROW_HEIGHT = 24  # pixels per token row
LABELS_MAX = 80  # every token labelled up to this many; above, every k-th
LINE_COLOUR = LINE_COLOURS[0]


def line_segments(weights: np.ndarray, threshold: float, query: int | None = None) -> list[tuple[int, int, float]]:
    """(query, key, weight) for every weight >= ``threshold`` (only row ``query`` when given)."""
    block = weights if query is None else weights[query : query + 1]  # (L or 1, S)
    first = 0 if query is None else query
    with np.errstate(invalid="ignore"):
        rows, cols = np.nonzero(np.isfinite(block) & (block >= threshold))  # row-major: by query, then key
    values = block[rows, cols].tolist()  # Python floats, as float(weights[i, j])
    return list(zip((rows + first).tolist(), cols.tolist(), values, strict=True))


def _line_traces(
    segments,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    head: int | None = None,
    visible=True,
) -> list[dict]:
    """One "lines α≈x.xx" trace per opacity step (named "head h lines α≈x.xx" for a ``head``), each segment
    from its query (x=0) to its key (x=1), as the plain dicts plotly keeps for them."""
    bins: dict[int, list[tuple[int, int, float]]] = {}
    for segment in segments:
        step = min(OPACITY_STEPS, max(1, int(np.ceil(segment[2] * OPACITY_STEPS))))
        bins.setdefault(step, []).append(segment)
    left_names = [visible_label(t, 16) for t in query_tokens]
    right_names = [visible_label(t, 16) for t in key_tokens]
    prefix = "" if head is None else f"head {head} "
    traces = []
    for step in sorted(bins):
        xs: list[float | None] = []
        ys: list[float | None] = []
        texts: list[str | None] = []
        for i, j, w in bins[step]:
            text = escape_label(f"{i} {left_names[i]} → {j} {right_names[j]}: {w:.3f}")
            xs += [0.0, 1.0, None]
            ys += [i, j, None]
            texts += [text, text, None]
        traces.append(
            dict(
                type="scatter",
                x=xs,
                y=ys,
                mode="lines",
                line=dict(color=LINE_COLOUR, width=3),
                opacity=step / OPACITY_STEPS,
                name=f"{prefix}lines α≈{step / OPACITY_STEPS:.2f}",
                text=texts,
                hovertemplate="%{text}<extra></extra>",
                showlegend=False,
                visible=visible,
            )
        )
    return traces


def _token_columns(query_tokens: Sequence[str], key_tokens: Sequence[str], query: int | None) -> list[dict]:
    """The token labels: "queries" on the left, "keys" on the right (every k-th above LABELS_MAX)."""
    rows, cols = len(query_tokens), len(key_tokens)
    labels_left = tick_labels(query_tokens, max_chars=16)
    labels_right = tick_labels(key_tokens, max_chars=16)
    if query is not None:
        labels_left = [f"<b>{t}</b>" if i == query else t for i, t in enumerate(labels_left)]
    shown_left = list(range(0, rows, max(1, int(np.ceil(rows / LABELS_MAX)))))
    shown_right = list(range(0, cols, max(1, int(np.ceil(cols / LABELS_MAX)))))

    def column(x: float, shown: list[int], labels: list[str], side: str, name: str) -> dict:
        return dict(
            type="scatter", mode="text", hoverinfo="skip", showlegend=False, x=[x] * len(shown), y=shown,
            text=[labels[i] for i in shown], textposition=f"middle {side}", name=name,
        )  # fmt: skip

    return [
        column(0.0, shown_left, labels_left, "left", "queries"),
        column(1.0, shown_right, labels_right, "right", "keys"),
    ]


def attention_lines(
    weights,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    *,
    threshold: float = 0.05,
    query: int | None = None,
    title: str | None = None,
    theme: str = "screen",
) -> go.Figure:
    """Lines from each query token (left) to the key tokens (right) it attends to, opacity = weight.

    ``weights`` is (L, S). Lines below ``threshold`` are left out. With ``query`` only that query's
    lines are drawn and its label is bold. Line traces are named "lines α≈x.xx" and carry, per
    segment, the text "query → key: weight"; the token columns are traces "queries" and "keys".
    """
    weights = as_matrix("weights", weights)
    rows, cols = weights.shape
    query_tokens = check_labels("query_tokens", query_tokens, rows, "weights", weights.shape)
    key_tokens = check_labels("key_tokens", key_tokens, cols, "weights", weights.shape)
    if query is not None and not 0 <= query < rows:
        raise ValueError(f"query {query} out of range for weights of shape {weights.shape}")
    segments = line_segments(weights, threshold, query)
    traces = _line_traces(segments, query_tokens, key_tokens) + _token_columns(query_tokens, key_tokens, query)
    which = "" if query is None else f" from query {query}"
    layout = _frame(
        max(rows, cols),
        title if title is not None else f"Attention lines{which}  (weight ≥ {threshold:g}; opacity = weight)",
    )
    layout["meta"] = {"segments": len(segments), "threshold": threshold}
    return themed_figure(traces, layout, theme, validate=False)


def _frame(longest: int, title: str) -> dict:
    """The layout: hidden axes with the two token columns, "query" and "key" headings, height by the token count."""
    heading = dict(xref="x", yref="y", y=-0.5, showarrow=False, yanchor="bottom")
    return dict(
        xaxis=dict(range=[-0.55, 1.55], visible=False, fixedrange=True),
        yaxis=dict(range=[longest - 0.5, -0.5], visible=False),
        annotations=[
            dict(heading, x=0.0, text="<b>query</b>", xanchor="right"),
            dict(heading, x=1.0, text="<b>key</b>", xanchor="left"),
        ],
        title=dict(text=title),
        height=max(420, 150 + ROW_HEIGHT * min(longest, LABELS_MAX)),
        hovermode="closest",
    )


FLIP_SEGMENTS = 6000  # lines for every head of a layer in one chart up to this many; above, the chosen head only


def attention_lines_flip(
    weights,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    *,
    layer: int,
    start: int,
    threshold: float = 0.05,
    theme: str = "screen",
) -> go.Figure:
    """``attention_lines`` for every head (H, L, S) of a layer in one chart, flipped by a slider in the
    browser as bertviz's head view does (traces "head h lines α≈x.xx", visible for head ``start``). When
    all heads together have more than ``FLIP_SEGMENTS`` lines, only head ``start`` is drawn (no slider),
    said in the title."""
    from .flip import SLIDER_PREFIX, SLIDER_TRANSITION, head_steps

    weights = as_array("weights", weights, 3)
    heads, rows, cols = weights.shape
    if not 0 <= start < heads:
        raise ValueError(f"start head {start} out of range 0..{heads - 1}")
    query_tokens = check_labels("query_tokens", query_tokens, rows, "weights", weights.shape)
    key_tokens = check_labels("key_tokens", key_tokens, cols, "weights", weights.shape)
    segments = [line_segments(weights[h], threshold) for h in range(heads)]
    total = sum(len(s) for s in segments)
    titles = [
        f"Layer {layer}, head {h}: attention lines  (weight ≥ {threshold:g}; opacity = weight)" for h in range(heads)
    ]
    traces: list[dict] = []
    owners: list[int | None] = []
    chosen = range(heads) if total <= FLIP_SEGMENTS else [start]
    for h in chosen:
        lines = _line_traces(segments[h], query_tokens, key_tokens, head=h, visible=h == start)
        traces += lines
        owners += [h] * len(lines)
    columns = _token_columns(query_tokens, key_tokens, None)
    for column in columns:  # shown for every head: said as the slider's steps say it (viz.selection)
        column["visible"] = True
    traces += columns
    owners += [None, None]
    if total > FLIP_SEGMENTS:
        layout = _frame(max(rows, cols), titles[start] + f"<br><sup>{total:,} lines in the layer: this head only</sup>")
    else:
        layout = _frame(max(rows, cols), titles[start])
        layout["sliders"] = [
            dict(
                active=start,
                steps=head_steps(owners, titles),
                currentvalue=dict(prefix=SLIDER_PREFIX),
                transition=dict(SLIDER_TRANSITION),  # a copy: each figure owns its layout
            )
        ]
    layout["meta"] = {"segments": total, "threshold": threshold}
    return themed_figure(traces, layout, theme, validate=False)
