"""One query row, step by step: q·k_j, scaled, softmax weights, and the weighted sum of V.

Four panels share the key axis (keys left to right): bars of the raw scores, bars of the scaled
scores, bars of the softmax weights, and a heatmap of each key's contribution α_j v_j (rows =
value dimensions, columns = keys) with the output row Σ_j α_j v_j as an extra column on the right.
Blocked keys are grey bars in the score panels, "×" markers at 0 in the weight panel.
``step_panels`` draws the four panels; ``viz.query_shown`` uses it for the row as the display options show
it, where the score panels may keep token keys on their own axis while the weights are merged into words.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .checks import as_mask, as_matrix, as_vector, check_labels
from .heatmaps import add_matrix, colour_axis, style_axis
from .labels import escape_label, hover_labels, visible_label
from .query_frames import ALLOWED_COLOUR, Frames, RowParts, bar_text, fill, key_colours
from .theme import MASK_COLOUR, apply_theme

BAR_TEXT_MAX = 16  # values written on the bars up to this many keys
OUTPUT_GAP = 0.6  # gap between the last key column and the output column, in cells


def query_contributions(weights_row, values) -> np.ndarray:
    """(S, Ev): α_j v_j for every key j; the column sums (over j) are the output row."""
    weights_row = as_vector("weights_row", weights_row)
    values = as_matrix("values", values)
    if values.shape[0] != weights_row.shape[0]:
        raise ValueError(f"weights_row has shape {weights_row.shape} but values has shape {values.shape}")
    return np.where(np.isfinite(weights_row), weights_row, 0.0)[:, None] * values


def _score_bars(fig: go.Figure, rows, positions: np.ndarray, colours: list[str], names, show: bool) -> None:
    """Panels 1 and 2: bars of the raw and the scaled scores (blocked keys grey), a line at 0."""
    for row, (name, row_values) in enumerate(rows, start=1):
        shown = np.where(np.isfinite(row_values), row_values, np.nan)
        fig.add_trace(
            go.Bar(
                x=positions,
                y=shown,
                marker_color=colours,
                name=name,
                customdata=names,
                showlegend=False,
                hovertemplate=f"key %{{customdata}}<br>{name} %{{y:.4g}}<extra></extra>",
                **(dict(text=bar_text(shown), textposition="outside", cliponaxis=False) if show else {}),
            ),
            row=row,
            col=1,
        )
        fig.add_hline(y=0, line=dict(color="#444", width=1), row=row, col=1)


def _weight_bars(
    fig: go.Figure, weights_row, blocked: np.ndarray, positions: np.ndarray, names, show: bool, top: float = 1.0
) -> None:
    """Panel 3: bars of the softmax weights, "×" at 0 for blocked keys, y from 0 to 1.15 × ``top``."""
    weights_shown = np.where(blocked, np.nan, weights_row)
    fig.add_trace(
        go.Bar(
            x=positions,
            y=weights_shown,
            marker_color=ALLOWED_COLOUR,
            name="weight",
            customdata=names,
            showlegend=False,
            hovertemplate="key %{customdata}<br>weight %{y:.4f}<extra></extra>",
            **(
                dict(
                    text=bar_text(weights_shown, blank_missing=True),
                    textposition="outside",
                    cliponaxis=False,
                )
                if show
                else {}
            ),
        ),
        row=3,
        col=1,
    )
    if blocked.any():
        fig.add_trace(
            go.Scatter(
                x=positions[blocked],
                y=np.zeros(int(blocked.sum())),
                mode="markers",
                name="masked",
                marker=dict(symbol="x-thin", size=10, line=dict(width=2, color=MASK_COLOUR)),
                showlegend=False,
                hovertemplate="masked key<extra></extra>",
            ),
            row=3,
            col=1,
        )
    fig.update_yaxes(range=[0, 1.15 * top], row=3, col=1)


def _contribution_panel(fig: go.Figure, contributions: np.ndarray, key_tokens: list[str]) -> None:
    """Panel 4: α_j v_j as a heatmap (dims × keys) and the output Σ_j α_j v_j as a column right of it."""
    keys, dims = contributions.shape
    output = contributions.sum(axis=0)  # (Ev,) Σ_j α_j v_j
    add_matrix(
        fig,
        contributions.T,
        row=4,
        col=1,
        coloraxis="coloraxis",
        show_values=False,
        col_tokens=key_tokens,
        row_name="dim",
        col_name="key",
        value_name="α v",
        name="contributions",
    )
    width = max(1.0, 0.06 * keys)  # the output column stays visible for long sequences
    left, right = keys - 0.5 + OUTPUT_GAP * width, keys - 0.5 + OUTPUT_GAP * width + width
    fig.add_trace(
        go.Heatmap(
            z=output[:, None],
            x=[left, right],
            y=np.arange(dims),
            coloraxis="coloraxis",
            name="output",
            hovertemplate="output dim %{y}<br>%{z:.4g}<extra></extra>",
        ),
        row=4,
        col=1,
    )
    fig.add_annotation(  # under the column (above it, it would run into the panel's title)
        x=(left + right) / 2,
        y=dims - 0.5,
        xref="x4",
        yref="y4",
        yanchor="top",
        text="output",
        showarrow=False,
    )
    style_axis(fig, "x", keys, tokens=key_tokens, title="key", row=4, col=1, extend_to=right)
    style_axis(fig, "y", dims, title="value dim", row=4, col=1)


STEP_TITLES = (
    "1. raw score  q<sub>i</sub>·k<sub>j</sub>",
    "2. scaled score  (grey = key masked)",
    "3. softmax weight  α<sub>ij</sub>",
    "4. contribution  α<sub>ij</sub> v<sub>j</sub>  (rows = value dims)  and output  Σ<sub>j</sub> α<sub>ij</sub> v<sub>j</sub>",
)


def step_panels(
    score_rows: Sequence[tuple[str, np.ndarray]],
    weights_row: np.ndarray,
    blocked: np.ndarray,
    contributions: np.ndarray,
    key_tokens: list[str],
    *,
    show: bool,
    titles: Sequence[str] = STEP_TITLES,
    score_keys: tuple[list[str], np.ndarray] | None = None,
    weight_top: float = 1.0,
) -> go.Figure:
    """The four panels of a step-through, validated inputs only (no title, no theme).

    ``score_rows`` (("q·k", scores (K,)), ("scaled", scaled (K,))), ``weights_row`` (C,), ``blocked`` (C,), ``contributions``
    (C, Ev), ``key_tokens`` (C,). ``score_keys`` = (labels (K,), blocked (K,)) when the score panels have keys
    of their own (words: weights are merged, scores are not): panels 1-2 then share their own key axis,
    panels 3-4 theirs. ``weight_top``: panel 3's axis reaches 1.15 × this (1: weights on 0..1).
    """
    split = score_keys is not None
    fig = make_subplots(
        rows=4,
        cols=1,
        shared_xaxes=not split,
        vertical_spacing=0.09 if split else 0.06,
        row_heights=[0.17, 0.17, 0.17, 0.49],
        subplot_titles=tuple(titles),
    )
    score_tokens, score_blocked = score_keys if split else (key_tokens, blocked)
    score_colours = key_colours(score_blocked)
    score_names = hover_labels(score_tokens)
    _score_bars(fig, score_rows, np.arange(len(score_tokens)), score_colours, score_names, show)
    _weight_bars(fig, weights_row, blocked, np.arange(len(key_tokens)), hover_labels(key_tokens), show, weight_top)
    _contribution_panel(fig, contributions, key_tokens)  # (C, Ev) α_j v_j
    for row in (1, 2, 3):
        fig.update_xaxes(showgrid=False, row=row, col=1)
        fig.update_yaxes(showgrid=True, zeroline=False, row=row, col=1)
    if split:  # x (panel 1) follows x2 (panel 2, token keys); x3 (panel 3) follows x4 (panel 4, the keys shown)
        fig.update_xaxes(matches="x2", showticklabels=False, row=1, col=1)
        style_axis(fig, "x", len(score_tokens), tokens=score_tokens, row=2, col=1)  # token keys: the titles say so
        fig.update_xaxes(matches="x4", showticklabels=False, row=3, col=1)
    return fig


def writes_values(keys: int, show_values: bool | None) -> bool:
    """Whether the step-through writes values on its bars: ``show_values``, else up to ``BAR_TEXT_MAX`` keys."""
    return (keys <= BAR_TEXT_MAX) if show_values is None else bool(show_values)


def row_title(query_token: str, query_index: int | None = None) -> str:
    """The step-through's title for a query (its position when given)."""
    where = "" if query_index is None else f" {query_index}"
    return f"Query{where} '{escape_label(visible_label(query_token, 24))}': scores → weights → weighted sum of V"


def query_step_figure(
    scores_row,
    scaled_row,
    weights_row,
    values,
    key_tokens: Sequence[str],
    *,
    query_token: str = "",
    query_index: int | None = None,
    mask_row=None,
    show_values: bool | None = None,
    title: str | None = None,
    theme: str = "screen",
) -> go.Figure:
    """The step-through for one query i: rows of scores (S,), scaled (S,), weights (S,), values V (S, Ev).

    Traces: "q·k" (bars), "scaled" (bars), "weight" (bars), "contributions" (heatmap Ev × S of
    α_j v_j, i.e. ``query_contributions(...).T``), "output" (heatmap Ev × 1 of Σ_j α_j v_j).
    """
    values = as_matrix("values", values)
    keys = values.shape[0]
    scores_row = as_vector("scores_row", scores_row, keys, f"values of shape {values.shape}")
    scaled_row = as_vector("scaled_row", scaled_row, keys, f"values of shape {values.shape}")
    weights_row = as_vector("weights_row", weights_row, keys, f"values of shape {values.shape}")
    key_tokens = check_labels("key_tokens", key_tokens, keys, "values", values.shape)
    mask_row = as_mask("mask_row", mask_row, (keys,))
    blocked = ~np.isfinite(weights_row) if mask_row is None else (~mask_row | ~np.isfinite(weights_row))
    show = writes_values(keys, show_values)
    contributions = query_contributions(weights_row, values)  # (S, Ev) α_j v_j
    row = RowParts(
        scores=np.where(np.isfinite(scores_row), scores_row, np.nan),
        scaled=np.where(np.isfinite(scaled_row), scaled_row, np.nan),
        weights=np.where(blocked, np.nan, weights_row),
        blocked=blocked,
        contributions=contributions,
        title=title if title is not None else row_title(query_token, query_index),
        show=show,
    )
    if not np.isfinite(contributions).all():  # (a value row that is not finite: its cells are drawn blocked)
        return _built(row, key_tokens, theme)
    key = row.frame_key(key_tokens, theme)
    frame = FRAMES.get(key)
    if frame is not None:
        return fill(frame, row)  # the frame of another query of these keys, with this one's numbers
    fig = _built(row, key_tokens, theme)
    FRAMES.keep(key, fig)
    return fig


FRAMES = Frames()  # step-throughs' frames, for the next query of the same keys (viz/query_frames.py)


def _built(row: RowParts, key_tokens: list[str], theme: str) -> go.Figure:
    """The step-through built from scratch with plotly's figure API."""
    fig = step_panels(
        (("q·k", row.scores), ("scaled", row.scaled)),
        row.weights,
        row.blocked,
        row.contributions,
        key_tokens,
        show=row.show,
    )
    fig.update_layout(
        title_text=row.title,
        coloraxis=colour_axis("diverging", title="α v"),
        height=940,
        bargap=0.25,
    )
    fig.layout.coloraxis.colorbar.update(len=0.45, y=0.0, yanchor="bottom")
    return apply_theme(fig, theme)
