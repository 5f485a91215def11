"""A head's mark sent apart from the figure (viz/selection.py): base figure + update == the figure built for that head.

The Heads & layers view keeps one figure for every head and sends the chosen head's mark as a plotly update; these
tests build each figure the old way, for every head, and compare it with the base figure plus the update, as
plotly.py applies it (``Figure.plotly_update``, plotly.js's own ``Plotly.update`` semantics) and as the page's
packed bytes carry it (``ui.plotly_spec.with_update`` / ``unpack``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ui import plotly_spec
from viz import selection
from viz.flip import head_flip
from viz.heads import head_grid, statistic_overview, statistic_switch
from viz.lines import attention_lines_flip
from viz.stats import STATISTICS

HEADS, L = 4, 6
TOKENS = [f"t{i}" for i in range(L)]


def _weights(seed: int = 0) -> np.ndarray:
    logits = np.random.default_rng(seed).normal(size=(HEADS, L, L))
    logits = np.where(np.tril(np.ones((L, L), bool)), logits, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    return (weights / weights.sum(-1, keepdims=True)).astype(np.float32)


def _same(a, b) -> None:
    assert json.loads(a.to_json()) == json.loads(b.to_json())


def _sent(fig, update) -> dict:
    """What the page draws: the packed figure with the update after it, read back as the browser reads it."""
    return plotly_spec.unpack(plotly_spec.with_update(plotly_spec.spec_bytes(fig), update))


MASK = np.tril(np.ones((L, L), bool))


@pytest.mark.parametrize("chosen", range(HEADS))
def test_the_grid_marks_the_chosen_head_by_an_update(chosen):
    base = head_grid(_weights(), TOKENS, TOKENS, mask=MASK, layer=2)
    built = head_grid(_weights(), TOKENS, TOKENS, mask=MASK, layer=2, selected=chosen)
    update = selection.grid_selection(HEADS, chosen)
    _same(selection.marked(base, update), built)
    assert _sent(base, update) == json.loads(built.to_json())
    titles = built.to_dict()["layout"]["annotations"][:HEADS]
    assert [a["text"] for a in titles] == [f"head {h}" for h in range(HEADS)]  # the text never changes (see below)
    assert [a.get("font", {}).get("color") for a in titles] == [
        selection.SELECTED_COLOUR if h == chosen else None for h in range(HEADS)
    ]
    k = "" if chosen == 0 else str(chosen + 1)
    assert [(s["xref"], s["yref"]) for s in built.to_dict()["layout"]["shapes"]] == [(f"x{k} domain", f"y{k} domain")]
    assert "shapes" not in base.to_dict()["layout"]
    assert all(a.get("font", {}).get("color") is None for a in base.to_dict()["layout"]["annotations"][:HEADS])


def test_the_grid_mark_changes_nothing_that_makes_plotly_js_compute_the_figure_again():
    """plotly.js recomputes every trace for an annotation's text (editType calc+arraydraw): 65-100 ms a head change
    at 64 tokens. The mark only sets titles' colours and the shapes (arraydraw: redrawn, not recomputed)."""
    restyle, relayout = selection.grid_selection(HEADS, 2)
    assert restyle == {}
    assert all(path.endswith(".font.color") or path == "shapes" for path in relayout)


def test_an_update_is_complete_whatever_was_applied_before():
    base = head_grid(_weights(), TOKENS, TOKENS, mask=MASK, layer=2)
    twice = selection.marked(
        selection.marked(base, selection.grid_selection(HEADS, 3)), selection.grid_selection(HEADS, 1)
    )
    _same(twice, head_grid(_weights(), TOKENS, TOKENS, mask=MASK, layer=2, selected=1))


@pytest.mark.parametrize("chosen", range(HEADS))
def test_the_flip_chart_starts_at_the_chosen_head_by_its_own_slider_step(chosen):
    base = head_flip(_weights(), TOKENS, TOKENS, layer=1, start=0, mask=MASK)
    built = head_flip(_weights(), TOKENS, TOKENS, layer=1, start=chosen, mask=MASK)
    update = selection.slider_selection(base, chosen)
    assert update is not None
    _same(selection.marked(base, update), built)
    assert _sent(base, update) == json.loads(built.to_json())
    # from a figure already moved to another head, too
    _same(selection.marked(selection.marked(base, selection.slider_selection(base, HEADS - 1)), update), built)


@pytest.mark.parametrize("chosen", range(HEADS))
def test_the_attention_lines_start_at_the_chosen_head(chosen):
    base = attention_lines_flip(_weights(), TOKENS, TOKENS, layer=0, start=0)
    built = attention_lines_flip(_weights(), TOKENS, TOKENS, layer=0, start=chosen)
    update = selection.slider_selection(base, chosen)
    _same(selection.marked(base, update), built)
    assert _sent(base, update) == json.loads(built.to_json())


def test_lines_of_one_head_only_have_no_slider_to_select_with(monkeypatch):
    import viz.lines

    monkeypatch.setattr(viz.lines, "FLIP_SEGMENTS", 1)
    base = attention_lines_flip(_weights(), TOKENS, TOKENS, layer=0, start=0)
    assert selection.slider_selection(base, 1) is None  # the caller builds that head's own figure


@pytest.mark.parametrize("cell", [(0, 0), (1, 3), (2, 2)])
def test_the_overviews_outline_the_chosen_cell(cell):
    values = {name: np.random.default_rng(7).random((3, HEADS)) for name in STATISTICS}
    update = selection.cell_selection(*cell)
    for name in STATISTICS:
        base, built = statistic_overview(values[name], name), statistic_overview(values[name], name, selected=cell)
        _same(selection.marked(base, update), built)
    base = statistic_switch(values, "distance")
    built = statistic_switch(values, "distance", selected=cell)
    _same(selection.marked(base, update), built)
    assert _sent(base, update) == json.loads(built.to_json())
    again = selection.marked(selection.marked(base, selection.cell_selection(2, 0)), update)
    _same(again, built)


def test_a_packed_figure_without_an_update_reads_back_unchanged():
    fig = head_grid(_weights(), TOKENS, TOKENS, layer=0)
    packed = plotly_spec.spec_bytes(fig)
    assert plotly_spec.unpack(packed) == json.loads(fig.to_json())
    assert plotly_spec.with_update(packed, None) == packed
    assert plotly_spec.update_of(plotly_spec.with_update(packed, selection.grid_selection(HEADS, 2))) == [
        {},
        selection.grid_selection(HEADS, 2)[1],
    ]
