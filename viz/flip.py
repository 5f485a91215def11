"""Every head of a layer in one chart, switched in the browser: a plotly slider, no server round trip.

The figure holds one heatmap per head (and its grey overlay of blocked cells); the slider's steps only
change which pair is visible (``Plotly.update``), so flipping heads repaints one heatmap and sends
nothing. Each head's colour scale runs from 0 to its own largest shown value (set by the same step),
so a head that spreads its weight thinly still shows its pattern; hover gives the exact numbers.

Payload: float32 typed arrays, at most ``FLIP_CELLS`` weights over all heads. A layer whose heads hold
more (12 heads above 112 positions) is drawn as block means on a coarser grid, said in the title
and in hover; the exact values stay in the Derivation view, the Query inspector and CSV. Hover names
the query and key tokens by their axis labels ("position token"), so no per-cell token arrays are sent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .blocked import grey_cells
from .blocks import block_means
from .checks import as_array, as_mask, check_labels
from .heatmaps import colour_axis, tick_positions
from .labels import hover_labels, tick_labels
from .theme import apply_theme

FLIP_CELLS = 12 * 112 * 112  # weights sent for all heads together (about 0.6 MB of float32)
SLIDER_PREFIX = "head "
# Every slider that flips a chart in the browser (heads here and in viz/lines.py, queries in viz/query_flip.py): its
# handle jumps to the step chosen. plotly.js eases it there over 150 ms by default, and the chart, flipped at once,
# then waited on a handle still moving (a page's last change 0.19 s after a click whose chart was drawn at 0.05 s).
SLIDER_TRANSITION = dict(duration=0)
HEIGHT = 720  # pixels: the map keeps about the height of the single-head charts, the slider sits below it


def flip_side(heads: int, cells: int = FLIP_CELLS) -> int:
    """Displayed rows/columns per side at most, so that ``heads`` maps hold no more than ``cells`` weights."""
    return max(1, math.isqrt(max(1, cells // max(1, heads))))


def _blocked(weights: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """Blocked cells of one head (L, S): masked with weight exactly 0, or not finite. A blocked key that
    still got weight (a mask bug such as the -1e9 leak) keeps its colour: never hidden."""
    blocked = ~np.isfinite(weights)
    if mask is not None:
        blocked |= ~mask & (weights == 0)
    return blocked


def _axis_labels(tokens: Sequence[str], block: int) -> list[str]:
    """One category per displayed row/column: "position 'token'" (unique, escaped), or "a-b" for a block."""
    count = math.ceil(len(tokens) / block)
    if block == 1:
        return hover_labels(tokens)
    return [f"{i * block}-{min(len(tokens), (i + 1) * block) - 1}" for i in range(count)]


def _axis(tokens: Sequence[str], labels: list[str], block: int, title: str, reverse: bool) -> dict:
    """A category axis with token tick text (every k-th when long); blocks keep their position ranges."""
    axis: dict = dict(type="category", title_text=title, showgrid=False, zeroline=False, ticks="")
    if reverse:
        axis["autorange"] = "reversed"
    positions = tick_positions(len(labels))
    if block == 1:
        ticks = tick_labels(tokens)
        axis.update(tickmode="array", tickvals=[labels[p] for p in positions], ticktext=[ticks[p] for p in positions])
    else:
        axis.update(tickmode="array", tickvals=[labels[p] for p in positions], ticktext=[labels[p] for p in positions])
    return axis


def _top(shown: np.ndarray) -> float:
    """The largest finite value of a displayed map (1.0 when none): the top of its colour scale."""
    finite = shown[np.isfinite(shown)]
    return float(finite.max()) if finite.size and finite.max() > 0 else 1.0


def head_steps(owners: Sequence[int | None], titles: Sequence[str], extra: Sequence[dict] | None = None) -> list[dict]:
    """Slider steps, one per head: step h shows the traces whose owner is h or None (shared), sets the title
    to ``titles[h]`` and applies ``extra[h]`` (more layout changes) in the same ``Plotly.update``."""
    return [
        dict(
            method="update",
            label=str(h),
            args=[
                {"visible": [owner is None or owner == h for owner in owners]},
                {"title.text": titles[h], **(extra[h] if extra else {})},
            ],
        )
        for h in range(len(titles))
    ]


def _title(layer: int, h: int, rows: int, cols: int, block: int) -> str:
    shape = f"{rows} queries × {cols} keys" if block == 1 else f"{rows} × {cols}, means of {block}×{block} blocks"
    return f"Layer {layer}, head {h}: softmax weights   ({shape})"


def head_flip(
    weights,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    *,
    layer: int,
    start: int = 0,
    mask=None,
    cells: int = FLIP_CELLS,
    theme: str = "screen",
) -> go.Figure:
    """Heads (H, L, S) of one layer in one figure; a slider shows head ``start`` first and flips in the browser.

    Traces: one heatmap per head in head order ("head h"; only ``start`` visible), then the blocked
    cells: one overlay for every head ("every head masked") when they agree, else one per head
    ("head h masked"). ``mask`` (L, S), True = may attend.
    """
    weights = as_array("weights", weights, ndim=3)
    heads, rows, cols = weights.shape
    if not 0 <= start < heads:
        raise ValueError(f"start head {start} out of range 0..{heads - 1}")
    query_tokens = check_labels("query_tokens", query_tokens, rows, "weights", weights.shape)
    key_tokens = check_labels("key_tokens", key_tokens, cols, "weights", weights.shape)
    mask = as_mask("mask", mask, (rows, cols))
    side = flip_side(heads, cells)
    maps = [block_means(weights[h], ~_blocked(weights[h], mask), side) for h in range(heads)]  # (L', S') each
    block = maps[0][2]
    y_labels, x_labels = _axis_labels(query_tokens, block), _axis_labels(key_tokens, block)
    what = "weight" if block == 1 else f"mean weight of the {block}×{block} block"
    shared = all(np.array_equal(empty, maps[0][1]) for _, empty, _ in maps)  # one overlay serves every head
    fig = go.Figure()
    for h, (shown, _, _) in enumerate(maps):
        fig.add_trace(
            go.Heatmap(
                z=shown.astype(np.float32),
                x=x_labels,
                y=y_labels,
                coloraxis="coloraxis",
                name=f"head {h}",
                visible=h == start,
                hovertemplate=f"head {h}<br>query %{{y}}<br>key %{{x}}<br>{what} %{{z:.4g}}<extra></extra>",
            )
        )
    for h, (_, empty, _) in enumerate(maps[:1] if shared else maps):
        whose = "every head" if shared else f"head {h}"
        fig.add_trace(grey_cells(empty, x_labels, y_labels, name=f"{whose} masked", visible=shared or h == start))
    tops = [_top(shown) for shown, _, _ in maps]  # each head's colour scale: 0 to its largest shown value
    owners = [*range(heads), *([None] if shared else range(heads))]  # the trace order above
    titles = [_title(layer, h, rows, cols, block) for h in range(heads)]
    steps = head_steps(owners, titles, [{"coloraxis.cmax": top} for top in tops])
    fig.update_layout(
        title_text=titles[start],
        height=HEIGHT,
        coloraxis=colour_axis("sequential", title="weight<br>(0 to this<br>head's max)", zmin=0.0, zmax=tops[start]),
        xaxis=_axis(key_tokens, x_labels, block, "key", reverse=False),
        yaxis=_axis(query_tokens, y_labels, block, "query", reverse=True),
        sliders=[
            dict(
                active=start,
                steps=steps,
                currentvalue=dict(prefix=SLIDER_PREFIX, visible=True),
                transition=dict(SLIDER_TRANSITION),  # a copy: each figure owns its layout
                pad=dict(t=50, b=10),
                len=1.0,
            )
        ],
    )
    if any(len(label) > 3 for label in fig.layout.xaxis.ticktext or ()):
        fig.update_xaxes(tickangle=-45)
    return apply_theme(fig, theme)
