"""viz.lines: the attention lines built from plain dicts without plotly's trace validation are the figures the
step-by-step path built (go.Scatter, add_trace, update_xaxes, add_annotation, apply_theme; kept here as the
reference, as the lines were drawn before), compared as plotly's JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from viz.checks import as_array, as_matrix, check_labels
from viz.flip import SLIDER_PREFIX, head_steps
from viz.labels import escape_label, tick_labels, visible_label
from viz.lines import (
    FLIP_SEGMENTS,
    LABELS_MAX,
    LINE_COLOUR,
    OPACITY_STEPS,
    ROW_HEIGHT,
    attention_lines,
    attention_lines_flip,
    line_segments,
)
from viz.theme import apply_theme


def as_json(fig: go.Figure) -> dict:
    return json.loads(pio.to_json(fig.to_dict(), validate=False))


def stepwise_line_traces(
    fig: go.Figure,
    segments,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    head: int | None = None,
    visible=True,
) -> int:
    """One "lines α≈x.xx" trace per opacity step (named "head h lines α≈x.xx" for a ``head``), each segment
    from its query (x=0) to its key (x=1); returns how many traces were added."""
    bins: dict[int, list[tuple[int, int, float]]] = {}
    for segment in segments:
        step = min(OPACITY_STEPS, max(1, int(np.ceil(segment[2] * OPACITY_STEPS))))
        bins.setdefault(step, []).append(segment)
    left_names = [visible_label(t, 16) for t in query_tokens]
    right_names = [visible_label(t, 16) for t in key_tokens]
    prefix = "" if head is None else f"head {head} "
    for step in sorted(bins):
        xs: list[float | None] = []
        ys: list[float | None] = []
        texts: list[str | None] = []
        for i, j, w in bins[step]:
            text = escape_label(f"{i} {left_names[i]} → {j} {right_names[j]}: {w:.3f}")
            xs += [0.0, 1.0, None]
            ys += [i, j, None]
            texts += [text, text, None]
        fig.add_trace(
            go.Scatter(
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
    return len(bins)


def stepwise_token_columns(
    fig: go.Figure, query_tokens: Sequence[str], key_tokens: Sequence[str], query: int | None
) -> None:
    """The token labels: "queries" on the left, "keys" on the right (every k-th above LABELS_MAX)."""
    rows, cols = len(query_tokens), len(key_tokens)
    labels_left = tick_labels(query_tokens, max_chars=16)
    labels_right = tick_labels(key_tokens, max_chars=16)
    if query is not None:
        labels_left = [f"<b>{t}</b>" if i == query else t for i, t in enumerate(labels_left)]
    step_left = max(1, int(np.ceil(rows / LABELS_MAX)))
    step_right = max(1, int(np.ceil(cols / LABELS_MAX)))
    shown_left = list(range(0, rows, step_left))
    shown_right = list(range(0, cols, step_right))
    fig.add_trace(
        go.Scatter(
            x=[0.0] * len(shown_left),
            y=shown_left,
            mode="text",
            text=[labels_left[i] for i in shown_left],
            textposition="middle left",
            name="queries",
            hoverinfo="skip",
            showlegend=False,
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[1.0] * len(shown_right),
            y=shown_right,
            mode="text",
            text=[labels_right[j] for j in shown_right],
            textposition="middle right",
            name="keys",
            hoverinfo="skip",
            showlegend=False,
        )
    )


def stepwise_lines(
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
    fig = go.Figure()
    stepwise_line_traces(fig, segments, query_tokens, key_tokens)
    stepwise_token_columns(fig, query_tokens, key_tokens, query)
    which = "" if query is None else f" from query {query}"
    stepwise_frame(
        fig,
        max(rows, cols),
        title if title is not None else f"Attention lines{which}  (weight ≥ {threshold:g}; opacity = weight)",
    )
    fig.layout.meta = {"segments": len(segments), "threshold": threshold}
    return apply_theme(fig, theme)


def stepwise_frame(fig: go.Figure, longest: int, title: str) -> None:
    """Hidden axes with the two token columns, "query" and "key" headings, height by the token count."""
    fig.update_xaxes(range=[-0.55, 1.55], visible=False, fixedrange=True)
    fig.update_yaxes(range=[longest - 0.5, -0.5], visible=False)
    fig.add_annotation(
        x=0.0, y=-0.5, xref="x", yref="y", text="<b>query</b>", showarrow=False, yanchor="bottom", xanchor="right"
    )
    fig.add_annotation(
        x=1.0, y=-0.5, xref="x", yref="y", text="<b>key</b>", showarrow=False, yanchor="bottom", xanchor="left"
    )
    fig.update_layout(
        title_text=title, height=max(420, 150 + ROW_HEIGHT * min(longest, LABELS_MAX)), hovermode="closest"
    )


def stepwise_flip(
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
    fig = go.Figure()
    owners: list[int | None] = []
    chosen = range(heads) if total <= FLIP_SEGMENTS else [start]
    for h in chosen:
        owners += [h] * stepwise_line_traces(fig, segments[h], query_tokens, key_tokens, head=h, visible=h == start)
    stepwise_token_columns(fig, query_tokens, key_tokens, None)
    owners += [None, None]
    for column in fig.data[-2:]:  # shown for every head: said as the slider's steps say it (viz.selection)
        column.visible = True
    if total > FLIP_SEGMENTS:
        stepwise_frame(
            fig, max(rows, cols), titles[start] + f"<br><sup>{total:,} lines in the layer: this head only</sup>"
        )
    else:
        stepwise_frame(fig, max(rows, cols), titles[start])
        fig.update_layout(
            sliders=[
                dict(
                    active=start,
                    steps=head_steps(owners, titles),
                    currentvalue=dict(prefix=SLIDER_PREFIX),
                    transition=dict(duration=0),  # the handle jumps to the step clicked
                )
            ]
        )
    fig.layout.meta = {"segments": total, "threshold": threshold}
    return apply_theme(fig, theme)


def _weights(heads: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = rng.random((heads, n, n)) ** 3
    w = np.where(np.tril(np.ones((n, n), bool)), w, 0.0)  # causal: zeros above the diagonal
    return w / w.sum(-1, keepdims=True)


def _tokens(n: int) -> list[str]:
    odd = ["<b>", "&amp;", "a\u200bb", " ", "é", "x" * 30]
    return [odd[i % len(odd)] if i % 4 == 1 else f"tok{i}" for i in range(n)]


@pytest.mark.parametrize("n", [1, 5, 16, 90])
@pytest.mark.parametrize("theme", ["screen", "slides"])
@pytest.mark.parametrize("query", [None, 0, "last"])
@pytest.mark.parametrize("threshold", [0.0, 0.05, 0.3])
def test_one_head_lines_equal_the_step_by_step_figure(n, theme, query, threshold):
    weights, tokens = _weights(1, n, n)[0], _tokens(n)
    q = n - 1 if query == "last" else query
    fast = attention_lines(weights, tokens, tokens, threshold=threshold, query=q, theme=theme)
    assert as_json(fast) == as_json(stepwise_lines(weights, tokens, tokens, threshold=threshold, query=q, theme=theme))


@pytest.mark.parametrize(("heads", "n"), [(1, 3), (4, 16), (12, 16), (12, 64)])
@pytest.mark.parametrize("theme", ["screen", "slides"])
def test_every_head_flip_equals_the_step_by_step_figure(heads, n, theme):
    weights, tokens = _weights(heads, n, heads + n), _tokens(n)
    for start in {0, heads - 1}:
        fast = attention_lines_flip(weights, tokens, tokens, layer=2, start=start, theme=theme)
        reference = stepwise_flip(weights, tokens, tokens, layer=2, start=start, theme=theme)
        assert as_json(fast) == as_json(reference)
        assert [t.name for t in fast.data] == [t.name for t in reference.data]


def test_a_layer_over_the_segment_limit_keeps_only_the_chosen_head_as_before():
    weights, tokens = _weights(12, 40, 7), _tokens(40)
    total = sum(len(line_segments(w, 0.0)) for w in weights)
    assert total > FLIP_SEGMENTS, "the case must be over the limit"
    fast = attention_lines_flip(weights, tokens, tokens, layer=0, start=3, threshold=0.0)
    assert as_json(fast) == as_json(stepwise_flip(weights, tokens, tokens, layer=0, start=3, threshold=0.0))
    assert not fast.layout.sliders and "this head only" in fast.layout.title.text


def test_the_figure_reads_like_a_validated_one():
    """Code that reads figures (marks, tests, export) sees plotly objects with the same properties."""
    weights, tokens = _weights(3, 6, 1), _tokens(6)
    fig = attention_lines_flip(weights, tokens, tokens, layer=0, start=1)
    lines = [t for t in fig.data if "lines" in t.name]
    assert lines and all(t.line.color == LINE_COLOUR and t.line.width == 3 for t in lines)
    assert {t.visible for t in lines if t.name.startswith("head 1 ")} == {True}
    assert {t.visible for t in lines if not t.name.startswith("head 1 ")} == {False}
    assert fig.layout.meta["segments"] == sum(len(line_segments(w, 0.05)) for w in weights)
    fig.update_layout(height=500)  # still a figure that can be changed
    assert fig.layout.height == 500
