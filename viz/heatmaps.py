"""Matrix heatmaps on integer axes: the building block of every matrix figure.

Rows run top to bottom (y reversed), columns left to right. Token axes use integer positions with
token tick text, so repeated tokens keep their own rows. Blocked cells (masked, or not finite such
as -inf) are NaN in the main trace, so they never stretch the colour scale, and a second heatmap
trace ("masked" overlay, uint8 0/1 with a transparent/grey colour scale) paints them grey.

Payload: z is sent as float64 for small matrices and float32 above ``FLOAT64_MAX_CELLS`` (plotly 7
encodes numpy arrays as base64 typed arrays); token names go into hover ``customdata`` only up to
``HOVER_TOKENS_MAX_CELLS`` cells, and values are written into cells only up to ``CELL_TEXT_MAX``
rows and columns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .checks import as_mask, as_matrix, check_labels
from .labels import escape_label, hover_labels, tick_labels, visible_label
from .theme import DIVERGING, MASK_COLOUR, SEQUENTIAL, apply_theme

CELL_TEXT_MAX = 24  # values written in cells when rows and columns are both <= this
HOVER_TOKENS_MAX_CELLS = 8192  # token names in hover customdata up to this many cells
TICKS_MAX = 30  # every position gets a tick up to this many; above, every k-th
FLOAT64_MAX_CELLS = 64 * 64  # above this many cells z is sent as float32
DISPLAY_MAX = 512  # a single heatmap shows at most this many cells per side (about its pixels); above, block means
MASK_RECTANGLES_MAX = 4096  # blocked cells drawn as filled rectangles up to this many, else a uint8 heatmap

_TRANSPARENT_GREY = [[0.0, "rgba(0,0,0,0)"], [0.5, "rgba(0,0,0,0)"], [0.5, MASK_COLOUR], [1.0, MASK_COLOUR]]


def tick_positions(n: int, max_ticks: int = TICKS_MAX) -> list[int]:
    """Positions 0..n-1 that get a tick label: all of them, or every k-th when n > ``max_ticks``."""
    if n <= max_ticks:
        return list(range(n))
    step = math.ceil(n / max_ticks)
    return list(range(0, n, step))


def compact(values: np.ndarray) -> np.ndarray:
    """float64 for small arrays, float32 above ``FLOAT64_MAX_CELLS`` (half the JSON payload)."""
    return values.astype(np.float64 if values.size <= FLOAT64_MAX_CELLS else np.float32)


def blocked_cells(values: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """True where a cell is blocked: ``mask`` False (True = may attend) or the value is not finite."""
    blocked = ~np.isfinite(values)
    if mask is not None:
        blocked |= ~mask
    return blocked


def wants_values(shape: tuple[int, ...], show_values: bool | None) -> bool:
    """``show_values`` if given, else True when both sides are at most ``CELL_TEXT_MAX``."""
    if show_values is not None:
        return bool(show_values)
    return max(shape) <= CELL_TEXT_MAX


def _format_blocked(value: float) -> str:
    if np.isneginf(value):
        return "−∞"
    if np.isposinf(value):
        return "+∞"
    if np.isnan(value):
        return "NaN"
    return f"{value:.2g}"


def add_matrix(
    fig: go.Figure,
    values: np.ndarray,
    *,
    row: int | None = None,
    col: int | None = None,
    mask: np.ndarray | None = None,
    coloraxis: str = "coloraxis",
    show_values: bool = False,
    value_format: str = ".2f",
    blocked_text: str | None = None,
    row_tokens: Sequence[str] | None = None,
    col_tokens: Sequence[str] | None = None,
    row_name: str = "query",
    col_name: str = "key",
    value_name: str = "value",
    name: str = "matrix",
) -> np.ndarray:
    """Add ``values`` (R, C) as a heatmap (and a grey overlay for blocked cells) to ``fig``.

    Cell (i, j) sits at x = j, y = i. Blocked cells (``mask`` False or not finite) are NaN in
    the main trace (named ``name``) and covered by the overlay trace ``name + " masked"`` (see
    ``mask_overlay``); with values shown, a text trace ``name + " masked values"`` labels them.
    Returns the boolean (R, C) array of blocked cells.
    """
    rows, cols = values.shape
    if row is None and max(rows, cols) > DISPLAY_MAX:  # more rows than a chart has pixels: a display copy
        block = add_block_matrix(
            fig,
            values,
            row=None,
            col=None,
            mask=mask,
            max_side=DISPLAY_MAX,
            coloraxis=coloraxis,
            value_name=value_name,
            name=name,
        )
        fig.add_annotation(
            text=f"each cell: the mean of a {block}×{block} block ({max(rows, cols)} positions, more than the "
            "chart's pixels); exact values in CSV and in the Query inspector",
            xref="paper",
            yref="paper",
            x=0.5,
            y=1.0,
            yanchor="bottom",
            showarrow=False,
            name="display note",
        )
        return blocked_cells(values, mask)
    blocked = blocked_cells(values, mask)
    shown = np.where(blocked, np.nan, values)
    where = {} if row is None else dict(row=row, col=col)

    parts: list[str] = []
    custom: list[np.ndarray] = []
    use_names = values.size <= HOVER_TOKENS_MAX_CELLS
    if row_tokens is not None and use_names:
        parts.append(f"{row_name} %{{customdata[{len(custom)}]}}")
        custom.append(np.broadcast_to(np.array(hover_labels(row_tokens), dtype=object)[:, None], (rows, cols)))
    else:
        parts.append(f"{row_name} %{{y}}")
    if col_tokens is not None and use_names:
        parts.append(f"{col_name} %{{customdata[{len(custom)}]}}")
        custom.append(np.broadcast_to(np.array(hover_labels(col_tokens), dtype=object)[None, :], (rows, cols)))
    else:
        parts.append(f"{col_name} %{{x}}")
    parts.append(f"{value_name} %{{z:.4g}}")
    hovertemplate = "<br>".join(parts) + "<extra></extra>"

    text_kwargs: dict = {}
    if show_values:
        finite = np.where(blocked, 0.0, values)
        text = np.array([[format(v, value_format) for v in line] for line in finite], dtype=object)
        text[blocked] = ""
        text_kwargs = dict(text=text.tolist(), texttemplate="%{text}")

    fig.add_trace(
        go.Heatmap(
            z=compact(shown),
            x=np.arange(cols),
            y=np.arange(rows),
            coloraxis=coloraxis,
            customdata=np.stack(custom, axis=-1) if custom else None,
            hovertemplate=hovertemplate,
            name=name,
            xgap=0,
            ygap=0,
            **text_kwargs,
        ),
        **where,
    )
    if blocked.any():
        fig.add_trace(mask_overlay(blocked, name=f"{name} masked"), **where)
        if show_values:
            fig.add_trace(mask_text(values, blocked, blocked_text, name=f"{name} masked values"), **where)
    return blocked


def _block_tiles(values: np.ndarray, mask: np.ndarray | None, max_side: int) -> tuple[np.ndarray, int]:
    """(tiles, b): the matrix cut into b x b blocks, (R', C', b*b), NaN where blocked or padding; b is the
    smallest block that keeps both sides within ``max_side`` (1: every cell is its own block)."""
    rows, cols = values.shape
    block = max(1, math.ceil(max(rows, cols) / max_side))
    shown = np.where(blocked_cells(values, mask), np.nan, values)  # (R, C)
    padded = np.pad(shown, ((0, -rows % block), (0, -cols % block)), constant_values=np.nan)  # padding: blocked
    shape = (padded.shape[0] // block, block, padded.shape[1] // block, block)
    return padded.reshape(shape).transpose(0, 2, 1, 3).reshape(shape[0], shape[2], -1), block  # (R', C', b*b)


def block_means(values: np.ndarray, mask: np.ndarray | None, max_side: int) -> tuple[np.ndarray, np.ndarray, int]:
    """A display copy no larger than ``max_side`` per side: (means, all_blocked, block) of b x b blocks.

    Each display cell is the mean of the allowed cells of its block (NaN where every cell is blocked);
    ``block`` = b is 1 (the values themselves) when both sides fit. For thumbnails whose panels have
    fewer pixels than the matrix has cells: the exact values stay in the full-size figures and CSV.
    """
    tiles, block = _block_tiles(values, mask, max_side)
    counts = np.isfinite(tiles).sum(axis=-1)  # (R', C') allowed cells per block
    sums = np.nansum(tiles, axis=-1, dtype=np.float64)  # (R', C')
    empty = counts == 0
    means = np.where(empty, np.nan, sums / np.maximum(counts, 1))
    return (tiles[..., 0] if block == 1 else means), empty, block


def block_extremes(values: np.ndarray, mask: np.ndarray | None, max_side: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Like ``block_means``, but each display cell is the allowed value of largest magnitude in its
    block, sign kept: a difference map's display copy never hides its worst cell."""
    tiles, block = _block_tiles(values, mask, max_side)
    empty = np.isnan(tiles).all(axis=-1)
    where = np.argmax(np.nan_to_num(np.abs(tiles), nan=-1.0), axis=-1)  # (R', C') index of the largest |value|
    extremes = np.take_along_axis(tiles, where[..., None], axis=-1)[..., 0]
    return np.where(empty, np.nan, extremes), empty, block


def add_block_matrix(
    fig: go.Figure,
    values: np.ndarray,
    *,
    row: int,
    col: int,
    mask: np.ndarray | None,
    max_side: int,
    coloraxis: str = "coloraxis",
    value_name: str = "value",
    name: str = "matrix",
    how: str = "mean",
) -> int:
    """Like ``add_matrix`` for a thumbnail: ``block_means`` (or ``block_extremes`` with how="extreme")
    drawn on the full matrix's integer axes (a block spans b rows and b columns), hover names the
    block; returns the block size b."""
    reduce = block_extremes if how == "extreme" else block_means
    what = "largest |value|" if how == "extreme" else "mean"
    means, empty, block = reduce(values, mask, max_side)
    centres_r = np.arange(means.shape[0]) * block + (block - 1) / 2  # (R',) centre of each block, in positions
    centres_c = np.arange(means.shape[1]) * block + (block - 1) / 2
    fig.add_trace(
        go.Heatmap(
            z=means.astype(np.float32),
            x=centres_c,
            y=centres_r,
            coloraxis=coloraxis,
            name=name,
            xgap=0,
            ygap=0,
            hovertemplate=f"queries ≈ %{{y:.0f}} ± {block / 2:g}, keys ≈ %{{x:.0f}} ± {block / 2:g}"
            f"<br>{what} {value_name} of the {block}×{block} block %{{z:.4g}}<extra></extra>",
        ),
        row=row,
        col=col,
    )
    if empty.any():
        fig.add_trace(
            go.Heatmap(
                z=empty.astype(np.uint8),
                x=centres_c,
                y=centres_r,
                colorscale=_TRANSPARENT_GREY,
                zmin=0,
                zmax=1,
                showscale=False,
                hoverinfo="skip",
                name=f"{name} masked",
            ),
            row=row,
            col=col,
        )
    return block


def mask_rectangles(blocked: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Blocked cells as rectangles (row0, row1, col0, col1), inclusive, covering exactly the True cells.

    Runs of blocked cells in each row, merged down while the next row has the same run: a
    padding mask is one rectangle, a causal mask one per row.
    """
    rectangles: list[tuple[int, int, int, int]] = []
    open_runs: dict[tuple[int, int], int] = {}  # (col0, col1) -> first row
    for i, line in enumerate(np.vstack([blocked, np.zeros((1, blocked.shape[1]), bool)])):
        padded = np.concatenate([[False], line, [False]]).astype(np.int8)
        edges = np.flatnonzero(np.diff(padded))  # starts at even, ends (exclusive) at odd positions
        runs = {(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2], strict=True)}
        for run in list(open_runs):
            if run not in runs:
                rectangles.append((open_runs.pop(run), i - 1, run[0], run[1]))
        for run in runs:
            open_runs.setdefault(run, i)
    return sorted(rectangles)


def mask_overlay(blocked: np.ndarray, *, name: str = "masked") -> go.Scatter | go.Heatmap:
    """A trace painting the blocked cells grey: filled rectangles (a scatter with ``fill="toself"``).

    Each rectangle is 5 corner points followed by a NaN gap. With more than ``MASK_RECTANGLES_MAX``
    rectangles (an irregular mask) it is instead a uint8 heatmap, 1 = blocked, with a
    transparent/grey colour scale.
    """
    rectangles = mask_rectangles(blocked)
    if len(rectangles) > MASK_RECTANGLES_MAX:
        rows, cols = blocked.shape
        return go.Heatmap(
            z=blocked.astype(np.uint8),
            x=np.arange(cols),
            y=np.arange(rows),
            colorscale=_TRANSPARENT_GREY,
            zmin=0,
            zmax=1,
            showscale=False,
            hoverinfo="skip",
            name=name,
        )
    corners = np.empty((len(rectangles), 6, 2), dtype=np.float32)  # 5 corners + a NaN gap per rectangle
    for k, (r0, r1, c0, c1) in enumerate(rectangles):
        x0, x1, y0, y1 = c0 - 0.5, c1 + 0.5, r0 - 0.5, r1 + 0.5
        corners[k] = [[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0], [np.nan, np.nan]]
    points = corners.reshape(-1, 2)
    return go.Scatter(
        x=points[:, 0],
        y=points[:, 1],
        mode="lines",
        fill="toself",
        fillcolor=MASK_COLOUR,
        line=dict(color=MASK_COLOUR, width=0.5),
        hoveron="fills",
        hoverinfo="name",
        name=name,
        showlegend=False,
    )


def mask_text(values: np.ndarray, blocked: np.ndarray, blocked_text: str | None, *, name: str) -> go.Scatter:
    """White text on blocked cells: ``blocked_text``, or what the value was ("−∞", "+∞", "NaN", or the fill)."""
    rows, cols = np.nonzero(blocked)
    texts = [
        blocked_text if blocked_text is not None else _format_blocked(values[i, j])
        for i, j in zip(rows, cols, strict=True)
    ]
    return go.Scatter(
        x=cols,
        y=rows,
        mode="text",
        text=texts,
        textfont=dict(color="white"),
        hoverinfo="skip",
        name=name,
        showlegend=False,
    )


def style_axis(
    fig: go.Figure,
    axis: str,
    count: int,
    *,
    tokens: Sequence[str] | None = None,
    title: str | None = None,
    row: int | None = None,
    col: int | None = None,
    extra_ticks: Sequence[tuple[float, str]] = (),
    extend_to: float | None = None,
    max_ticks: int = TICKS_MAX,
    show_ticks: bool = True,
) -> None:
    """Integer axis 0..count-1 for a heatmap side; token tick text when ``tokens`` are given.

    The y axis is reversed (first row at the top). ``extra_ticks`` adds (position, text) pairs,
    ``extend_to`` widens the range to include that position (e.g. the row-sum column). Without
    tokens the axis shows plain integer ticks.
    """
    where = {} if row is None else dict(row=row, col=col)
    settings: dict = dict(showgrid=False, zeroline=False, ticks="", showline=False)
    if title is not None:
        settings["title_text"] = title
    upper = max([count - 0.5, *(p + 0.5 for p, _ in extra_ticks), *([] if extend_to is None else [extend_to])])
    if axis == "y":
        settings["range"] = [upper, -0.5]
    else:
        settings["range"] = [-0.5, upper]
    if not show_ticks:
        settings["showticklabels"] = False
    elif tokens is not None:
        labels = tick_labels(tokens)
        positions = tick_positions(count, max_ticks)
        values = positions + [p for p, _ in extra_ticks]
        texts = [labels[p] for p in positions] + [t for _, t in extra_ticks]
        settings.update(tickmode="array", tickvals=values, ticktext=texts)
        if axis == "x":
            settings["tickangle"] = -45 if any(len(labels[p]) > 3 for p in positions) else 0
    else:
        settings.update(tickmode="auto", nticks=min(count, 12), tickformat="d")
        if extra_ticks:
            settings.update(tickmode="array")
            positions = tick_positions(count, 12)
            settings.update(
                tickvals=positions + [p for p, _ in extra_ticks],
                ticktext=[str(p) for p in positions] + [t for _, t in extra_ticks],
            )
    if axis == "y":
        fig.update_yaxes(**settings, **where)
    else:
        fig.update_xaxes(**settings, **where)


def colour_axis(scale: str, *, title: str, zmin: float | None = None, zmax: float | None = None) -> dict:
    """A layout coloraxis: "diverging" (RdBu, centred on 0 via cmid=0) or "sequential" (Viridis)."""
    axis: dict = dict(colorbar=dict(title=dict(text=title, side="right"), thickness=16, len=0.85))
    if scale == "diverging":
        axis.update(colorscale=DIVERGING, cmid=0.0)
    elif scale == "sequential":
        axis.update(colorscale=SEQUENTIAL)
    else:
        axis.update(colorscale=scale)
    if zmin is not None:
        axis["cmin"] = zmin
    if zmax is not None:
        axis["cmax"] = zmax
    return axis


def matrix_heatmap(
    values,
    row_tokens: Sequence[str] | None = None,
    col_tokens: Sequence[str] | None = None,
    *,
    title: str = "",
    row_title: str = "query",
    col_title: str = "key",
    scale: str = "diverging",
    zmin: float | None = None,
    zmax: float | None = None,
    mask=None,
    show_values: bool | None = None,
    value_format: str = ".2f",
    value_name: str = "value",
    blocked_text: str | None = None,
    theme: str = "screen",
) -> go.Figure:
    """Any (R, C) matrix as a heatmap: rows top to bottom, integer axes, token ticks where given.

    ``scale`` is "diverging" (centred on 0) or "sequential"; ``mask`` (broadcastable to (R, C),
    True = may attend) marks blocked cells grey, as do non-finite values.
    """
    values = as_matrix("values", values)
    if row_tokens is not None:
        row_tokens = check_labels("row_tokens", row_tokens, values.shape[0], "values", values.shape)
    if col_tokens is not None:
        col_tokens = check_labels("col_tokens", col_tokens, values.shape[1], "values", values.shape)
    mask = as_mask("mask", mask, values.shape)
    fig = go.Figure()
    add_matrix(
        fig,
        values,
        mask=mask,
        show_values=wants_values(values.shape, show_values),
        value_format=value_format,
        blocked_text=blocked_text,
        row_tokens=row_tokens,
        col_tokens=col_tokens,
        row_name=row_title,
        col_name=col_title,
        value_name=value_name,
    )
    style_axis(fig, "y", values.shape[0], tokens=row_tokens, title=row_title)
    style_axis(fig, "x", values.shape[1], tokens=col_tokens, title=col_title)
    fig.update_layout(title_text=title, coloraxis=colour_axis(scale, title=value_name, zmin=zmin, zmax=zmax))
    return apply_theme(fig, theme)


def token_matrix_heatmap(
    values,
    tokens: Sequence[str],
    *,
    name: str = "X",
    title: str | None = None,
    show_values: bool | None = None,
    theme: str = "screen",
) -> go.Figure:
    """X, Q, K or V: (n, d) with one row per token and one column per dimension, shape in the title.

    ``name`` may hold plotly markup (e.g. ``"Q = XW<sup>Q</sup>"``); it is not escaped.
    """
    values = as_matrix(name, values)
    check_labels("tokens", tokens, values.shape[0], name, values.shape)
    n, d = values.shape
    if title is None:
        title = f"{name}   ({n} tokens × {d} dims)"
    return matrix_heatmap(
        values,
        tokens,
        None,
        title=title,
        row_title="token",
        col_title="dimension",
        scale="diverging",
        show_values=show_values,
        value_name="value",
        theme=theme,
    )


def weight_matrix_heatmap(
    values,
    *,
    name: str = "W<sup>Q</sup>",
    title: str | None = None,
    show_values: bool | None = None,
    theme: str = "screen",
) -> go.Figure:
    """W^Q, W^K or W^V: (d_model, d_k) with rows = model dimensions, columns = head dimensions."""
    values = as_matrix(name, values)
    d_model, d_head = values.shape
    if title is None:
        title = f"{name}   (d_model {d_model} × d_head {d_head})"
    return matrix_heatmap(
        values,
        None,
        None,
        title=title,
        row_title="d_model dimension",
        col_title="head dimension",
        scale="diverging",
        show_values=show_values,
        value_name="weight",
        theme=theme,
    )


def title_with_tokens(prefix: str, token: str) -> str:
    """A title naming a token safely: ``prefix 'token'`` with the token made visible and escaped."""
    return f"{prefix} '{escape_label(visible_label(token, 24))}'"
