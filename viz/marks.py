"""Which head each figure of a view kept for every head marks (``viz.selection``'s updates, per figure name).

Heads & layers and the attention lines are built once for head 0 (``ui.compute.figures(every_head=True)``);
``head_marks`` gives, for the head a person chose, the update that turns each of those figures into the one built
for that head. Pure: no Streamlit, no tensors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .heads_figures import heads_source
from .selection import Update, cell_selection, grid_selection, slider_selection

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from attention_core.traces import ModelTrace

MARKED_VIEWS = ("heads", "lines")  # views whose figures are the same for every head but its mark (viz.selection)
NO_MARK: Update = ({}, {})


def head_marks(view: str, figures: dict[str, go.Figure], trace: ModelTrace) -> dict:
    """name -> the ``viz.selection`` update that marks trace.head on each figure of ``view``
    (one of ``MARKED_VIEWS``) built for head 0: base figure + update == the figure built for that head.

    None for a figure that cannot be marked so: the attention lines of one head only (a layer with more than
    ``viz.lines.FLIP_SEGMENTS`` lines has no slider), for a head other than 0; that head's own figure is needed."""
    if view not in MARKED_VIEWS:
        raise ValueError(f"view {view!r} has no head marks; one of {MARKED_VIEWS}")
    h = trace.head
    if view == "lines":
        update = slider_selection(figures["lines"], h)
        return {"lines": update if update is not None else (NO_MARK if h == 0 else None)}
    attentions, layer, _ = heads_source(trace)
    marks: dict = {}
    for name, fig in figures.items():
        if name == "head_grid":
            marks[name] = grid_selection(attentions.shape[1], h)
        elif name == "head_flip":
            marks[name] = slider_selection(fig, min(h, attentions.shape[1] - 1))
        else:  # overview_switch, overview_<statistic>
            marks[name] = cell_selection(layer, h)
    return marks
