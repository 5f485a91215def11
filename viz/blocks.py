"""Display copies: a matrix larger than its chart's pixels drawn as b x b blocks (mean, or the value
of largest magnitude), on the full matrix's integer axes. The exact values stay in CSV and hover
of the full-size figures.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from .blocked import blocked_cells, grey_cells


def _tiled(matrix: np.ndarray, block: int) -> np.ndarray:
    """(R, C) -> (R/b, C/b, b*b): each b x b block's cells in row order (a copy, or a view when b = 1)."""
    shape = (matrix.shape[0] // block, block, matrix.shape[1] // block, block)
    return matrix.reshape(shape).transpose(0, 2, 1, 3).reshape(shape[0], shape[2], -1)


def _block_tiles(values: np.ndarray, mask: np.ndarray | None, max_side: int) -> tuple[np.ndarray, int]:
    """(tiles, b): the matrix cut into b x b blocks, (R', C', b*b), NaN where blocked or padding; b is the
    smallest block that keeps both sides within ``max_side`` (1: every cell is its own block)."""
    rows, cols = values.shape
    block = max(1, math.ceil(max(rows, cols) / max_side))
    blocked = blocked_cells(values, mask)  # (R, C)
    if values.dtype.kind == "f" and rows % block == 0 and cols % block == 0:
        # No padding: the tiles copied straight from the values, then NaN where blocked. The same numbers as the
        # general path below in one copy instead of three (the server maps each large temporary on its own, and
        # faults its pages in: report section 7, "thirty-ninth").
        tiles = _tiled(values, block)  # (R', C', b*b)
        if np.may_share_memory(tiles, values):  # b = 1: a view, never written into
            tiles = tiles.copy()
        tiles[_tiled(blocked, block)] = np.nan
        return tiles, block
    shown = np.where(blocked, np.nan, values)  # (R, C)
    padded = np.pad(shown, ((0, -rows % block), (0, -cols % block)), constant_values=np.nan)  # padding: blocked
    return _tiled(padded, block), block  # (R', C', b*b)


def block_means(values: np.ndarray, mask: np.ndarray | None, max_side: int) -> tuple[np.ndarray, np.ndarray, int]:
    """A display copy no larger than ``max_side`` per side: (means, all_blocked, block) of b x b blocks.

    Each display cell is the mean of the allowed cells of its block (NaN where every cell is blocked);
    ``block`` = b is 1 (the values themselves) when both sides fit. For thumbnails whose panels have
    fewer pixels than the matrix has cells: the exact values stay in the full-size figures and CSV.
    """
    tiles, block = _block_tiles(values, mask, max_side)
    allowed = np.isfinite(tiles)  # (R', C', b*b) every cell not blocked (the others are NaN: no infinity is left)
    counts = allowed.sum(axis=-1)  # (R', C') allowed cells per block
    if block == 1:
        return tiles[..., 0], counts == 0, block
    np.copyto(tiles, 0, where=~allowed)  # NaN -> 0 in the tiles' own copy: what np.nansum sums, without its copy
    sums = tiles.sum(axis=-1, dtype=np.float64)  # (R', C')
    empty = counts == 0
    means = np.where(empty, np.nan, sums / np.maximum(counts, 1))
    return means, empty, block


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
            grey_cells(empty, centres_c, centres_r, name=f"{name} masked"),
            row=row,
            col=col,
        )
    return block
