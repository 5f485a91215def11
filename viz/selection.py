"""Which head a figure marks, as a small update applied on top of a figure that marks none.

The Heads & layers view shows numbers that do not depend on the chosen head: every head of the layer, the
layer x head statistics, the attention lines of every head. Only the mark of the chosen head does (a bold
panel title, an outlined cell, the head a slider starts at). So those figures are built once for head 0 (or
for no head), kept once for every head, and the mark is an ``Update``: exactly what plotly.js's
``Plotly.update(gd, restyle, relayout)`` takes and plotly.py's ``Figure.plotly_update`` applies, so the browser
applies it to the chart already drawn (a head change then sends a few hundred bytes and redraws one title).

Every update here is complete: it sets every value the mark can change (all the panel titles, the whole list
of shapes, every trace's visibility), so it gives the same figure whichever update was applied before it.
tests/test_selection.py checks, for every head, that the base figure plus the update is the figure built for
that head (``head_grid(selected=h)``, ``head_flip(start=h)``, ...).

Pure: no Streamlit, no tensors.
"""

from __future__ import annotations

import copy

import plotly.graph_objects as go

Update = tuple[dict, dict]  # (restyle: trace attribute -> value, or a list of one per trace; relayout: path -> value)

SELECTED_COLOUR = "#D55E00"  # the chosen head's mark, on every figure
SELECTED_LINE = dict(color=SELECTED_COLOUR, width=3)  # the outline of the chosen (layer, head) cell or panel
PANEL_MARGIN = 0.02  # the chosen panel's outline, this far outside its plot area (a fraction of its side)


def panel_title(h: int) -> str:
    """Head h's panel title in the grid of every head (the same whichever head is chosen: see grid_selection)."""
    return f"head {h}"


def panel_outline(h: int) -> dict:
    """The outline around head h's panel of the grid (its subplot's plot area: axes x, x2, x3, ...), as a shape."""
    k = "" if h == 0 else str(h + 1)
    low, high = -PANEL_MARGIN, 1 + PANEL_MARGIN
    return dict(type="rect", xref=f"x{k} domain", yref=f"y{k} domain", x0=low, x1=high, y0=low, y1=high,
                line=dict(SELECTED_LINE))  # fmt: skip


def grid_selection(heads: int, selected: int) -> Update:
    """The grid of every head (``viz.heads.head_grid``, whose first ``heads`` annotations are the panel titles):
    the chosen panel outlined and its title coloured, every other title's colour reset. Only edits plotly.js
    redraws without computing the figure again: changing the titles' text (bold) made every head change
    recompute all twelve heatmaps in the browser (65-100 ms at 64 tokens); a colour and a shape take 1-6 ms."""
    colours = {f"annotations[{h}].font.color": SELECTED_COLOUR if h == selected else None for h in range(heads)}
    return {}, {**colours, "shapes": [panel_outline(selected)]}


def selected_cell(layer: int, head: int) -> dict:
    """The outline of one cell of a layer x head map (x = head, y = layer), as a plotly shape."""
    return dict(type="rect", x0=head - 0.5, x1=head + 0.5, y0=layer - 0.5, y1=layer + 0.5, line=dict(SELECTED_LINE))


def cell_selection(layer: int, head: int) -> Update:
    """A layer x head map (``viz.heads.layer_head_map`` and the overview built on it): the chosen cell outlined."""
    return {}, {"shapes": [selected_cell(layer, head)]}


def slider_selection(fig, step: int) -> Update | None:
    """A figure whose first slider flips heads (``viz.flip.head_flip``, ``viz.lines.attention_lines_flip``):
    what clicking step ``step`` does (that step's own ``update`` arguments, as plotly.js applies them) and the
    slider moved there. None when the figure has no such slider (it then shows one head only).

    ``fig``: a plotly Figure, or a figure kept as it is sent (``ui.plotly_spec.Sent``), whose ``sliders`` are
    plotly's JSON of them."""
    sliders = [s.to_plotly_json() for s in fig.layout.sliders] if isinstance(fig, go.Figure) else fig.sliders
    steps = (sliders[0].get("steps") or []) if sliders else []
    if not 0 <= step < len(steps):
        return None
    chosen = steps[step]
    args = chosen.get("args") or []
    if chosen.get("method") != "update" or len(args) != 2:
        return None
    restyle, relayout = (copy.deepcopy(dict(part)) for part in args)
    return restyle, {**relayout, "sliders[0].active": step}


def marked(fig: go.Figure, update: Update | None) -> go.Figure:
    """A copy of ``fig`` with ``update`` applied by plotly.py (downloads of a figure whose mark was sent apart)."""
    copied = go.Figure(fig)
    if update is not None:
        copied.plotly_update(restyle_data=dict(update[0]), relayout_data=dict(update[1]))
    return copied
