"""viz.theme.themed_figure: the heatmaps built from plain dicts in one go are the figures the step-by-step path
builds (go.Figure, add_matrix, style_axis, update_layout, apply_theme), compared as plotly's JSON."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from viz import heatmaps
from viz.heatmaps import add_matrix, colour_axis, matrix_heatmap, style_axis, wants_values
from viz.scores import ROW_SUM_LABEL, STAGE_TITLES, SUM_GAP, attention_heatmap, score_heatmap
from viz.theme import apply_theme, themed_figure


def as_json(fig: go.Figure) -> dict:
    return json.loads(pio.to_json(fig.to_dict(), validate=False))


def stepwise_matrix(values, tokens, *, title, mask=None, show_values=None, theme="screen", **colours):
    values = np.asarray(values, dtype=np.float64)  # as viz.checks.as_matrix reads every matrix
    fig = go.Figure()
    add_matrix(fig, values, mask=mask, show_values=wants_values(values.shape, show_values), row_tokens=tokens,
               col_tokens=tokens, row_name="query", col_name="key", value_name="value")  # fmt: skip
    style_axis(fig, "y", values.shape[0], tokens=tokens, title="query")
    style_axis(fig, "x", values.shape[1], tokens=tokens, title="key")
    fig.update_layout(title_text=title, coloraxis=colour_axis(colours.get("scale", "diverging"), title="value",
                      zmin=colours.get("zmin"), zmax=colours.get("zmax")))  # fmt: skip
    return apply_theme(fig, theme)


def stepwise_scores(scores, tokens, *, mask=None, stage="scores", show_values=None, theme="screen"):
    scores = np.asarray(scores, dtype=np.float64)
    fig = go.Figure()
    add_matrix(fig, scores, mask=mask, show_values=wants_values(scores.shape, show_values), row_tokens=tokens,
               col_tokens=tokens, value_name="score", name=stage)  # fmt: skip
    style_axis(fig, "y", scores.shape[0], tokens=tokens, title="query")
    style_axis(fig, "x", scores.shape[1], tokens=tokens, title="key")
    note = f"({scores.shape[0]} queries × {scores.shape[1]} keys)"
    fig.update_layout(title_text=f"{STAGE_TITLES[stage]}   {note}", coloraxis=colour_axis("diverging", title="score"))
    return apply_theme(fig, theme)


def stepwise_weights(weights, tokens, *, mask=None, show_values=None, theme="screen"):
    weights = np.asarray(weights, dtype=np.float64)
    rows, cols = weights.shape
    show = wants_values(weights.shape, show_values)
    fig = go.Figure()
    add_matrix(fig, weights, mask=mask, show_values=show, blocked_text="0", row_tokens=tokens, col_tokens=tokens,
               value_name="weight", name="weights")  # fmt: skip
    sums = np.nansum(np.where(np.isfinite(weights), weights, np.nan), axis=1)
    left, right = cols - 0.5 + SUM_GAP, cols + 0.5 + SUM_GAP
    text = dict(text=[[f"{s:.2f}"] for s in sums], texttemplate="%{text}") if show else {}
    fig.add_trace(go.Heatmap(z=sums[:, None], x=[left, right], y=np.arange(rows), coloraxis="coloraxis",
                             name="row sums", hovertemplate="row %{y}<br>Σ<sub>j</sub> weight = %{z:.6f}<extra></extra>",
                             **text))  # fmt: skip
    fig.add_annotation(x=(left + right) / 2, y=-0.5, xref="x", yref="y", yanchor="bottom", text=ROW_SUM_LABEL,
                       showarrow=False, name="row sums")  # fmt: skip
    style_axis(fig, "y", rows, tokens=tokens, title="query")
    style_axis(fig, "x", cols, tokens=tokens, title="key", extend_to=right)
    note = f"({rows} queries × {cols} keys)"
    fig.update_layout(title_text=f"Attention weights  softmax(rows)   {note}",
                      coloraxis=colour_axis("sequential", title="weight", zmin=0.0, zmax=1.0))  # fmt: skip
    return apply_theme(fig, theme)


CASES = [(n, theme, shown) for n in (3, 24, 64, 600) for theme in ("screen", "slides") for shown in (None, True, False)]


@pytest.mark.parametrize(("n", "theme", "shown"), CASES)
def test_each_heatmap_equals_the_step_by_step_figure(n, theme, shown):
    rng = np.random.default_rng(n)
    tokens = [f"tok{i}" if i % 5 else f"'{i}" for i in range(n)]
    causal = np.tril(np.ones((n, n), bool))
    scores = rng.standard_normal((n, n)).astype(np.float32)
    masked = np.where(causal, scores, -np.inf)
    weights = np.exp(masked - masked.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    common = dict(show_values=shown, theme=theme)
    pairs = [
        (
            matrix_heatmap(scores, tokens, tokens, title="S", **common),
            stepwise_matrix(scores, tokens, title="S", **common),
        ),
        (
            matrix_heatmap(
                weights, tokens, tokens, title="W", mask=causal, scale="sequential", zmin=0, zmax=1, **common
            ),
            stepwise_matrix(weights, tokens, title="W", mask=causal, scale="sequential", zmin=0, zmax=1, **common),
        ),
        (score_heatmap(scores, tokens, tokens, **common), stepwise_scores(scores, tokens, **common)),
        (
            score_heatmap(masked, tokens, tokens, mask=causal, stage="masked", **common),
            stepwise_scores(masked, tokens, mask=causal, stage="masked", **common),
        ),
        (
            attention_heatmap(weights, tokens, tokens, mask=causal, **common),
            stepwise_weights(weights, tokens, mask=causal, **common),
        ),
    ]
    for fast, reference in pairs:
        assert as_json(fast) == as_json(reference)
    if n > heatmaps.DISPLAY_MAX:  # the display copy's note is kept beside the row-sum label
        names = [a.name for a in pairs[-1][0].layout.annotations]
        assert names == ["display note", "row sums"]


def test_themed_figure_merges_like_plotly_s_update():
    layout = {
        "title": {"text": "T"},
        "xaxis2": {"title": {"text": "x2"}},
        "annotations": [{"text": "a"}, {"text": "b", "name": "fixed-size", "font": {"size": 9}}],
    }
    traces = [{"type": "scatter", "name": "w masked values", "textfont": {"color": "white"}}, {"type": "heatmap"}]
    fig = themed_figure(traces, layout, "slides")
    assert fig.layout.title.text == "T" and fig.layout.title.x == 0.5
    assert (
        fig.layout.xaxis2.title.text == "x2" and fig.layout.xaxis2.title.font.size == fig.layout.xaxis.title.font.size
    )
    assert fig.layout.annotations[1].font.size == 9 and fig.layout.annotations[0].font.size is not None
    assert fig.data[0].textfont.color == "white" and fig.data[0].textfont.size is not None
    assert fig.data[1].textfont.size is None
    assert fig.layout.meta == {"theme": "slides"}
    assert as_json(fig) == as_json(apply_theme(go.Figure(data=traces, layout=layout), "slides"))
