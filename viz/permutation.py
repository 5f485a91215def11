"""Order and attention: the output rows of a shuffled input, put back in place, against the original.

- ``realign(shuffled_output, order)``: rows of a shuffled input's output back in the original order.
- ``permutation_figure(output, shuffled_output, order, tokens)``: output rows before shuffling and
  after (put back in the original order), and their difference.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .checks import as_array, as_matrix, check_labels, same_shape
from .heatmaps import add_matrix, colour_axis, style_axis
from .theme import apply_theme


def realign(shuffled_output, order) -> np.ndarray:
    """Rows of ``shuffled_output`` put back in the original order.

    ``order`` (L,) is the permutation used: the shuffled sequence is ``tokens[order]``, so row k
    of ``shuffled_output`` belongs to original position ``order[k]``.
    """
    shuffled_output = as_matrix("shuffled_output", shuffled_output)
    order = as_array("order", order, 1, dtype=np.int64)
    if sorted(order.tolist()) != list(range(shuffled_output.shape[0])):
        raise ValueError(f"order must be a permutation of 0..{shuffled_output.shape[0] - 1}, got shape {order.shape}")
    realigned = np.empty_like(shuffled_output)
    realigned[order] = shuffled_output
    return realigned


def permutation_figure(
    output,
    shuffled_output,
    order,
    tokens: Sequence[str],
    *,
    encoding: str = "none",
    title: str | None = None,
    theme: str = "screen",
) -> go.Figure:
    """Output rows (L, Ev) for the original order, for the shuffled input put back in order, and the difference.

    Without a positional encoding the two are equal (difference ~0): attention alone cannot see
    order. Traces: "original", "shuffled, realigned", "difference"; the title states max |difference|.
    """
    output = as_matrix("output", output)
    shuffled_output = as_matrix("shuffled_output", shuffled_output)
    same_shape("output", output, "shuffled_output", shuffled_output)
    tokens = check_labels("tokens", tokens, output.shape[0], "output", output.shape)
    realigned = realign(shuffled_output, order)
    difference = output - realigned
    worst = float(np.max(np.abs(difference))) if difference.size else 0.0
    fig = make_subplots(
        rows=1,
        cols=3,
        shared_yaxes=True,
        horizontal_spacing=0.1,
        subplot_titles=("output, original order", "output of shuffled input, rows put back", "difference"),
    )
    rows, dims = output.shape
    for col, (name, values, axis) in enumerate(
        (
            ("original", output, "coloraxis"),
            ("shuffled, realigned", realigned, "coloraxis"),
            ("difference", difference, "coloraxis2"),
        ),
        1,
    ):
        add_matrix(
            fig, values, row=1, col=col, coloraxis=axis, row_tokens=tokens, row_name="token", col_name="dim", name=name
        )
        style_axis(
            fig, "y", rows, tokens=tokens, title="token" if col == 1 else None, row=1, col=col, show_ticks=col == 1
        )
        style_axis(fig, "x", dims, title="output dim", row=1, col=col)
    values_axis = colour_axis("diverging", title="output")
    values_axis["colorbar"].update(
        x=fig.layout.xaxis2.domain[1] + 0.01, xanchor="left", len=0.8, thickness=12, title_side="top"
    )
    bound = max(worst, 1e-12)
    diff_axis = colour_axis("diverging", title="difference", zmin=-bound, zmax=bound)
    diff_axis.pop("cmid")
    diff_axis["colorbar"].update(x=1.01, xanchor="left", len=0.8, thickness=12, exponentformat="e", title_side="top")
    equal = worst <= 1e-6 * max(1.0, float(np.max(np.abs(output))) if output.size else 1.0)
    verdict = "same rows, only reordered" if equal else "rows change: order is seen"
    fig.update_layout(
        title_text=title
        if title is not None
        else f"Shuffled input, encoding {encoding}: {verdict}  (max |diff| {worst:.1e})",
        coloraxis=values_axis,
        coloraxis2=diff_axis,
    )
    fig.layout.meta = {"max_abs_difference": worst}
    return apply_theme(fig, theme)
