"""The traces of one matrix heatmap as plotly keeps them: the heatmap as a plain dict, the grey overlay for blocked
cells and, with values shown, their text. ``viz.heatmaps.add_matrix`` adds them to a figure; ``matrix_heatmap``
and the score figures pass them to ``viz.theme.themed_figure`` and build the figure in one go.

Payload: z is float64 for small matrices and float32 above ``FLOAT64_MAX_CELLS`` (plotly 7 sends numpy arrays as
base64 typed arrays); token names go into hover ``customdata`` only up to ``HOVER_TOKENS_MAX_CELLS`` cells.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .blocked import blocked_cells, mask_overlay, mask_text
from .labels import hover_labels

HOVER_TOKENS_MAX_CELLS = 8192  # token names in hover customdata up to this many cells
FLOAT64_MAX_CELLS = 64 * 64  # above this many cells z is sent as float32


def compact(values: np.ndarray) -> np.ndarray:
    """float64 for small arrays, float32 above ``FLOAT64_MAX_CELLS`` (half the JSON payload)."""
    return values.astype(np.float64 if values.size <= FLOAT64_MAX_CELLS else np.float32)


def _hover(
    shape: tuple[int, int], row_tokens, col_tokens, row_name: str, col_name: str, value_name: str
) -> tuple[str, list[np.ndarray]]:
    """(hovertemplate, customdata layers): token names per cell while the matrix is small enough, else positions."""
    rows, cols = shape
    parts: list[str] = []
    custom: list[np.ndarray] = []
    use_names = rows * cols <= HOVER_TOKENS_MAX_CELLS
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
    return "<br>".join(parts) + "<extra></extra>", custom


def matrix_traces(
    values: np.ndarray,
    *,
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
) -> tuple[list, np.ndarray]:
    """(traces, blocked) of ``add_matrix`` for a matrix of at most ``DISPLAY_MAX`` a side: the heatmap as a plain
    dict (``{"type": "heatmap", ...}``, what plotly keeps for it), then the overlay and the masked-value traces."""
    rows, cols = values.shape
    blocked = blocked_cells(values, mask)
    shown = np.where(blocked, np.nan, values)
    hovertemplate, custom = _hover(values.shape, row_tokens, col_tokens, row_name, col_name, value_name)
    heatmap: dict = dict(
        type="heatmap",
        z=compact(shown),
        x=np.arange(cols),
        y=np.arange(rows),
        coloraxis=coloraxis,
        hovertemplate=hovertemplate,
        name=name,
        xgap=0,
        ygap=0,
    )
    if custom:
        heatmap["customdata"] = np.stack(custom, axis=-1)
    if show_values:
        finite = np.where(blocked, 0.0, values)
        text = np.array([[format(v, value_format) for v in line] for line in finite], dtype=object)
        text[blocked] = ""
        heatmap.update(text=text.tolist(), texttemplate="%{text}")
    traces: list = [heatmap]
    if blocked.any():
        traces.append(mask_overlay(blocked, name=f"{name} masked"))
        if show_values:
            traces.append(mask_text(values, blocked, blocked_text, name=f"{name} masked values"))
    return traces, blocked
