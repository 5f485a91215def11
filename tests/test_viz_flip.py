"""viz.flip: every head of a layer in one chart, switched by a plotly slider in the browser."""

from __future__ import annotations

import numpy as np
import pytest

from viz.flip import FLIP_CELLS, head_flip


def _weights(heads: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    mask = np.tril(np.ones((n, n), bool))  # causal
    scores = np.where(mask, rng.normal(size=(heads, n, n)), -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True), mask


def _maps(fig):
    return [t for t in fig.data if not t.name.endswith("masked")]


def test_each_head_is_its_own_exact_map_and_only_the_start_head_shows():
    weights, mask = _weights(4, 6)
    tokens = ["a", "b", "c", "a", "b", "<c>"]
    fig = head_flip(weights, tokens, tokens, layer=2, start=1, mask=mask)
    maps = _maps(fig)
    assert [t.name for t in maps] == ["head 0", "head 1", "head 2", "head 3"]
    for h, trace in enumerate(maps):
        z = np.asarray(trace.z, dtype=np.float64)
        assert np.allclose(z[mask], weights[h][mask], rtol=0, atol=1e-7)  # float32 of the exact weights
        assert np.isnan(z[~mask]).all()  # blocked cells are not coloured...
    overlay = [t for t in fig.data if t.name.endswith("masked")]
    assert [t.name for t in overlay] == ["every head masked"]  # ...but grey, by one overlay for all heads
    assert np.array_equal(np.asarray(overlay[0].z) == 1, ~mask)
    assert [bool(t.visible) for t in fig.data] == [False, True, False, False, True]
    assert "head 1" in fig.layout.title.text and "Layer 2" in fig.layout.title.text
    # repeated tokens keep their own rows and columns: the categories are unique, the ticks read the token
    assert len(set(maps[0].x)) == 6 and list(fig.layout.xaxis.ticktext)[:2] == ["a", "b"]
    assert "&lt;c&gt;" in maps[0].x[-1]  # escaped for plotly's HTML


def test_the_slider_switches_heads_in_the_browser():
    weights, mask = _weights(3, 5)
    fig = head_flip(weights, list("abcde"), list("abcde"), layer=0, start=2, mask=mask)
    (slider,) = fig.layout.sliders
    assert slider.active == 2 and [s.label for s in slider.steps] == ["0", "1", "2"]
    assert slider.transition.duration == 0  # the handle jumps to the head clicked, as the chart does
    for h, step in enumerate(slider.steps):
        assert step.method == "update"  # restyle + relayout in the browser: no server round trip
        visible, layout = step.args
        assert visible["visible"] == [i == h for i in range(3)] + [True]
        assert f"head {h}" in layout["title.text"]
        assert layout["coloraxis.cmax"] == pytest.approx(weights[h].max(), rel=1e-6)  # each head: 0 to its own max
    assert fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.cmax == pytest.approx(weights[2].max(), rel=1e-6)


def test_long_inputs_send_block_means_within_the_budget():
    heads, n = 12, 300
    weights, mask = _weights(heads, n, seed=1)
    fig = head_flip(weights, [f"t{i}" for i in range(n)], [f"t{i}" for i in range(n)], layer=0, mask=mask)
    maps = _maps(fig)
    sent = sum(np.asarray(t.z).size for t in maps)
    assert sent <= FLIP_CELLS
    z = np.asarray(maps[5].z, dtype=np.float64)
    block = -(-n // z.shape[0])
    assert block > 1 and f"means of {block}×{block} blocks" in fig.layout.title.text
    # a display cell is the mean of the allowed weights of its block (computed here by hand)
    r, c = 7, 3
    cells = weights[5][r * block : (r + 1) * block, c * block : (c + 1) * block]
    allowed = mask[r * block : (r + 1) * block, c * block : (c + 1) * block]
    assert z[r, c] == pytest.approx(cells[allowed].mean(), rel=1e-6)
    assert maps[0].x[1] == f"{block}-{2 * block - 1}"  # hover names the block's positions


def test_a_leaking_mask_is_never_painted_grey_and_heads_that_differ_get_their_own_overlay():
    weights, mask = _weights(2, 4)
    weights[1, 0, 3] = 0.25  # head 1 puts weight on a blocked key (the -1e9 leak): it must stay visible
    fig = head_flip(weights, list("abcd"), list("abcd"), layer=0, start=0, mask=mask)
    overlays = [t for t in fig.data if t.name.endswith("masked")]
    assert [t.name for t in overlays] == ["head 0 masked", "head 1 masked"]
    assert overlays[0].z[0][3] == 1 and overlays[1].z[0][3] == 0
    assert np.asarray(_maps(fig)[1].z, dtype=float)[0, 3] == pytest.approx(0.25)
    assert fig.layout.sliders[0].steps[1].args[0]["visible"] == [False, True, False, True]


def test_bad_start_and_shapes_are_refused():
    weights, _ = _weights(2, 3)
    with pytest.raises(ValueError, match="start head 2"):
        head_flip(weights, list("abc"), list("abc"), layer=0, start=2)
    with pytest.raises(ValueError, match="3-D"):
        head_flip(weights[0], list("abc"), list("abc"), layer=0)


def test_attention_lines_flip_draws_each_heads_own_lines_and_switches_in_the_browser():
    from viz.lines import attention_lines, attention_lines_flip, line_segments

    weights, mask = _weights(3, 6, seed=3)
    tokens = list("abcdef")
    fig = attention_lines_flip(weights, tokens, tokens, layer=4, start=1, threshold=0.1)
    for h in range(3):  # head h's traces hold exactly the segments of the single-head chart of head h
        mine = [t for t in fig.data if t.name.startswith(f"head {h} lines")]
        single = [
            t for t in attention_lines(weights[h], tokens, tokens, threshold=0.1).data if t.name.startswith("lines")
        ]
        assert [t.name.removeprefix(f"head {h} ") for t in mine] == [t.name for t in single]
        assert [list(t.y) for t in mine] == [list(t.y) for t in single]
        assert sum(list(t.x).count(None) for t in mine) == len(line_segments(weights[h], 0.1))
        assert all(bool(t.visible) == (h == 1) for t in mine)
    columns = [t for t in fig.data if t.name in ("queries", "keys")]
    assert len(columns) == 2 and all(t.visible is not False for t in columns)
    (slider,) = fig.layout.sliders
    assert slider.active == 1 and slider.transition.duration == 0
    step = slider.steps[2].args[0]["visible"]
    shown = [t.name for t, v in zip(fig.data, step, strict=True) if v]
    assert {"queries", "keys"} <= set(shown) and all(n.startswith("head 2") for n in shown if "lines" in n)
    assert "head 2" in slider.steps[2].args[1]["title.text"]


def test_attention_lines_flip_keeps_one_head_when_the_layer_has_too_many_lines(monkeypatch):
    import viz.lines as lines

    weights, _ = _weights(4, 8, seed=4)
    monkeypatch.setattr(lines, "FLIP_SEGMENTS", 5)
    fig = lines.attention_lines_flip(weights, list("abcdefgh"), list("abcdefgh"), layer=0, start=2, threshold=0.0)
    assert not fig.layout.sliders and "this head only" in fig.layout.title.text
    assert {t.name.split(" lines")[0] for t in fig.data if "lines" in t.name} == {"head 2"}


@pytest.mark.parametrize("query", [None, 0, 4])
def test_line_segments_are_every_weight_over_the_threshold_in_row_order(query):
    from viz.lines import line_segments

    rng = np.random.default_rng(7)
    weights = rng.random((6, 5))
    weights[1, 2], weights[3, 0], weights[4, 4] = np.nan, -np.inf, 0.5  # non-finite cells never draw a line
    rows = range(6) if query is None else [query]
    by_hand = [(i, j, float(weights[i, j])) for i in rows for j in range(5) if weights[i, j] >= 0.5]  # NaN >= is False
    found = line_segments(weights, 0.5, query)
    assert found == by_hand and all(type(v) is float and type(i) is int for i, _, v in found)
