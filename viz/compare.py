"""The own core beside the real model for one head, and the difference between them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .checks import as_mask, as_matrix, check_labels, same_shape
from .heatmaps import CELL_TEXT_MAX, add_block_matrix, add_matrix, colour_axis, style_axis
from .theme import apply_theme

COMPARE_TEXT_MAX = 10  # three panels side by side: values in cells only for small matrices
PANEL_TICKS_MAX = 12  # key ticks per (narrow) panel
COMPARE_DISPLAY_MAX = 160  # cells per side a panel shows (about its pixels); above, display copies of blocks


def max_abs_difference(core: np.ndarray, model: np.ndarray, mask: np.ndarray | None = None) -> float:
    """max |core - model| over cells that are finite in both (and allowed by ``mask``); 0 if none."""
    usable = np.isfinite(core) & np.isfinite(model)
    if mask is not None:
        usable &= mask
    if not usable.any():
        return 0.0
    return float(np.max(np.abs(core[usable] - model[usable])))


def _add_panels(fig: go.Figure, core, model, difference, mask, query_tokens, key_tokens, show: bool) -> int:
    """The three heatmaps (core, model, difference) and their axes; returns the display block size (1: exact)."""
    block = 1
    if max(core.shape) > COMPARE_DISPLAY_MAX:  # three panels side by side: display copies at about their pixels
        for col, (values, name) in enumerate(((core, "core"), (model, "model")), start=1):
            block = add_block_matrix(
                fig, values, row=1, col=col, mask=mask, max_side=COMPARE_DISPLAY_MAX, value_name="weight", name=name
            )
        add_block_matrix(
            fig,
            difference,
            row=1,
            col=3,
            mask=mask,
            max_side=COMPARE_DISPLAY_MAX,
            how="extreme",
            value_name="difference",
            name="difference",
            coloraxis="coloraxis2",
        )
    else:
        common = dict(row_tokens=query_tokens, col_tokens=key_tokens, mask=mask)
        add_matrix(
            fig, core, row=1, col=1, value_name="weight", name="core", blocked_text="0", show_values=show, **common
        )
        add_matrix(
            fig, model, row=1, col=2, value_name="weight", name="model", blocked_text="0", show_values=show, **common
        )
        add_matrix(
            fig,
            difference,
            row=1,
            col=3,
            value_name="difference",
            name="difference",
            coloraxis="coloraxis2",
            show_values=False,
            **common,
        )
    for col in (1, 2, 3):
        style_axis(fig, "x", core.shape[1], tokens=key_tokens, title="key", row=1, col=col, max_ticks=PANEL_TICKS_MAX)
        style_axis(
            fig,
            "y",
            core.shape[0],
            tokens=query_tokens,
            title="query" if col == 1 else None,
            row=1,
            col=col,
            show_ticks=col == 1,
        )
    return block


def _colour_axes(fig: go.Figure, worst: float) -> tuple[dict, dict]:
    """The shared 0..1 weight scale (bar right of the model panel) and the difference scale ±worst."""
    bound = worst if worst > 0 else 1e-12
    weight_axis = colour_axis("sequential", title="weight", zmin=0.0, zmax=1.0)
    right_of_model = fig.layout.xaxis2.domain[1] + 0.01
    weight_axis["colorbar"].update(x=right_of_model, xanchor="left", len=0.8, thickness=12, title_side="top")
    diff_axis = colour_axis("diverging", title="difference", zmin=-bound, zmax=bound)
    diff_axis.pop("cmid")
    diff_axis["colorbar"].update(x=1.01, xanchor="left", len=0.8, thickness=12, exponentformat="e", title_side="top")
    return weight_axis, diff_axis


def compare_figure(
    core,
    model,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    *,
    mask=None,
    head: int | None = None,
    title: str | None = None,
    labels: tuple[str, str] = ("own core", "real model"),
    show_values: bool | None = None,
    theme: str = "screen",
) -> go.Figure:
    """Three panels: core weights, model weights (shared 0..1 scale), and core - model.

    ``core`` and ``model`` are (L, S) weights of the same head. The difference panel uses a
    diverging scale centred on 0 (its own colour bar) and the title states max |difference|.
    Traces are named "core", "model" and "difference".
    """
    core = as_matrix("core", core)
    model = as_matrix("model", model)
    same_shape("core", core, "model", model)
    query_tokens = check_labels("query_tokens", query_tokens, core.shape[0], "core", core.shape)
    key_tokens = check_labels("key_tokens", key_tokens, core.shape[1], "core", core.shape)
    mask = as_mask("mask", mask, core.shape)
    with np.errstate(invalid="ignore"):
        difference = core - model
    worst = max_abs_difference(core, model, mask)
    show = max(core.shape) <= min(COMPARE_TEXT_MAX, CELL_TEXT_MAX) if show_values is None else bool(show_values)

    panel_titles = (labels[0], labels[1], "difference  (core − model)")
    fig = make_subplots(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.1, subplot_titles=panel_titles)
    block = _add_panels(fig, core, model, difference, mask, query_tokens, key_tokens, show)
    weight_axis, diff_axis = _colour_axes(fig, worst)
    head_text = "" if head is None else f", head {head}"
    fig.update_layout(
        title_text=title
        if title is not None
        else f"Own core vs real model{head_text}:  max |difference| = {worst:.2e}"
        + (
            f"<br><sup>{block}×{block} blocks: mean weight; difference: the largest |core − model| of each block "
            "(exact values: CSV)</sup>"
            if block > 1
            else ""
        ),
        coloraxis=weight_axis,
        coloraxis2=diff_axis,
    )
    fig.layout.meta = {"max_abs_difference": worst}
    return apply_theme(fig, theme)
