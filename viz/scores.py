"""The four score matrices of one head: raw q·k, scaled, masked, and the softmax weights.

Scores (signed) use a diverging scale centred on 0; weights use a sequential 0..1 scale and get a
"Σ" column showing each row's sum. Masked cells are NaN in the main trace (so -inf never breaks
the colour scale) and grey in an overlay trace; with values shown they read "−∞" (or the fill).
Axes: queries top to bottom (title "query"), keys left to right (title "key").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .checks import as_mask, as_matrix, check_labels
from .heatmaps import axis_settings, colour_axis, matrix_figure, wants_values

STAGE_TITLES = {
    "scores": "Raw scores  QK<sup>T</sup>   (q<sub>i</sub>·k<sub>j</sub>)",
    "scaled": "Scaled scores  QK<sup>T</sup> · scale",
    "masked": "Masked scores  (blocked = −∞)",
    "biased": "Masked scores + ALiBi bias  −slope·|i−j|",
}

ROW_SUM_LABEL = "Σ row"
SUM_GAP = 0.35  # gap between the last key column and the row-sum column, in cells


def _check(values, query_tokens, key_tokens, mask, name):
    values = as_matrix(name, values)
    query_tokens = check_labels("query_tokens", query_tokens, values.shape[0], name, values.shape)
    key_tokens = check_labels("key_tokens", key_tokens, values.shape[1], name, values.shape)
    return values, query_tokens, key_tokens, as_mask("mask", mask, values.shape)


def _shape_note(values: np.ndarray) -> str:
    return f"({values.shape[0]} queries × {values.shape[1]} keys)"


def score_heatmap(
    scores,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    *,
    mask=None,
    stage: str = "scores",
    title: str | None = None,
    show_values: bool | None = None,
    theme: str = "screen",
) -> go.Figure:
    """A signed (L, S) score matrix on a diverging scale centred on 0 (coloraxis cmid = 0).

    ``stage`` ("scores", "scaled", "masked", "biased") picks the default title. Cells where ``mask`` is False
    or the value is not finite (-inf after masking) are blocked: NaN in the main trace, grey in
    the overlay trace.
    """
    if stage not in STAGE_TITLES:
        raise ValueError(f"unknown stage {stage!r}; choose one of {tuple(STAGE_TITLES)}")
    scores, query_tokens, key_tokens, mask = _check(scores, query_tokens, key_tokens, mask, stage)
    matrix = dict(
        mask=mask,
        show_values=wants_values(scores.shape, show_values),
        row_tokens=query_tokens,
        col_tokens=key_tokens,
        value_name="score",
        name=stage,
    )
    layout = dict(
        yaxis=axis_settings("y", scores.shape[0], tokens=query_tokens, title="query"),
        xaxis=axis_settings("x", scores.shape[1], tokens=key_tokens, title="key"),
        title=dict(text=title if title is not None else f"{STAGE_TITLES[stage]}   {_shape_note(scores)}"),
        coloraxis=colour_axis("diverging", title="score"),
    )
    return matrix_figure(scores, matrix, layout, theme)


def attention_heatmap(
    weights,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    *,
    mask=None,
    title: str | None = None,
    show_values: bool | None = None,
    show_row_sums: bool = True,
    theme: str = "screen",
) -> go.Figure:
    """Softmax weights (L, S) on a sequential 0..1 scale, masked cells grey, row sums in a Σ column.

    The Σ column is a separate heatmap trace named "row sums" just right of the last key
    (same colour scale: a bright 1.00 in every row is the point). Masked cells are shown grey and
    read "0" when values are shown; their z in the main trace is NaN.
    """
    weights, query_tokens, key_tokens, mask = _check(weights, query_tokens, key_tokens, mask, "weights")
    leaks = 0
    if mask is not None:  # a blocked key that still got weight is a mask bug: show it, never hide it
        leaked = ~mask & np.isfinite(weights) & (weights != 0)
        leaks = int(leaked.sum())
        mask = mask | leaked
    rows, cols = weights.shape
    show = wants_values(weights.shape, show_values)
    matrix = dict(
        mask=mask,
        show_values=show,
        blocked_text="0",
        row_tokens=query_tokens,
        col_tokens=key_tokens,
        value_name="weight",
        name="weights",
    )
    extra: list = []
    annotations: list = []
    extend_to = None
    if show_row_sums:
        sums = np.nansum(np.where(np.isfinite(weights), weights, np.nan), axis=1)
        left, right = cols - 0.5 + SUM_GAP, cols + 0.5 + SUM_GAP  # one cell wide, a small gap after the keys
        extend_to = right
        extra.append(
            dict(
                type="heatmap",
                z=sums[:, None],
                x=[left, right],  # bin edges
                y=np.arange(rows),
                coloraxis="coloraxis",
                name="row sums",
                hovertemplate="row %{y}<br>Σ<sub>j</sub> weight = %{z:.6f}<extra></extra>",
                **(dict(text=[[f"{s:.2f}"] for s in sums], texttemplate="%{text}") if show else {}),
            )
        )
        annotations.append(
            dict(
                x=(left + right) / 2,
                y=-0.5,
                xref="x",
                yref="y",
                yanchor="bottom",
                text=ROW_SUM_LABEL,
                showarrow=False,
                name="row sums",
            )
        )
    layout = dict(
        yaxis=axis_settings("y", rows, tokens=query_tokens, title="query"),
        xaxis=axis_settings("x", cols, tokens=key_tokens, title="key", extend_to=extend_to),
        title=dict(
            text=(title if title is not None else f"Attention weights  softmax(rows)   {_shape_note(weights)}")
            + (f"<br><sup>⚠ {leaks} blocked cell(s) still got weight: the mask leaks</sup>" if leaks else "")
        ),
        coloraxis=colour_axis("sequential", title="weight", zmin=0.0, zmax=1.0),
    )
    if annotations:
        layout["annotations"] = annotations
    return matrix_figure(weights, matrix, layout, theme, extra)
