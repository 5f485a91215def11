"""Each figure's data equals its input; masks are marked; wrong shapes fail loudly; payloads stay small."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest

from viz.compare import compare_figure
from viz.heads import head_grid, head_overview
from viz.heatmaps import mask_rectangles, matrix_heatmap, token_matrix_heatmap, weight_matrix_heatmap
from viz.lines import attention_lines
from viz.pitfalls import (
    cost_figure,
    permutation_figure,
    realign,
    saturation_figure,
    temperature_figure,
    variance_figure,
)
from viz.positional import position_similarity, position_similarity_figure, positional_heatmap
from viz.query import query_step_figure
from viz.rollout import rollout_heatmap
from viz.scores import attention_heatmap, score_heatmap
from viz.stats import overview_matrix
from viz.theme import SPECS, apply_theme

TOKENS = ["The", " cat", " sat", " on", " the", " mat"]


def softmax(x: np.ndarray) -> np.ndarray:
    finite_max = np.max(np.where(np.isfinite(x), x, -np.inf), axis=-1, keepdims=True)
    e = np.exp(x - finite_max)
    return e / e.sum(-1, keepdims=True)


def causal(n: int) -> np.ndarray:
    return np.tril(np.ones((n, n), dtype=bool))


def trace_named(fig: go.Figure, name: str):
    matches = [t for t in fig.data if t.name == name]
    assert matches, f"no trace named {name!r} in {[t.name for t in fig.data]}"
    return matches[0]


def z_of(trace) -> np.ndarray:
    return np.asarray(trace.z, dtype=float)


def marked_cells(fig: go.Figure, name: str, shape: tuple[int, int]) -> np.ndarray:
    """Cells the overlay trace ``name`` paints, rasterised back to a boolean (R, C) array."""
    marked = np.zeros(shape, dtype=bool)
    overlays = [t for t in fig.data if t.name == name]
    if not overlays:
        return marked
    overlay = overlays[0]
    if overlay.type == "heatmap":
        return z_of(overlay) == 1
    xs = np.asarray(overlay.x, dtype=float).reshape(-1, 6)[:, :5]
    ys = np.asarray(overlay.y, dtype=float).reshape(-1, 6)[:, :5]
    for x, y in zip(xs, ys, strict=True):
        c0, c1 = int(round(x.min() + 0.5)), int(round(x.max() - 0.5))
        r0, r1 = int(round(y.min() + 0.5)), int(round(y.max() - 0.5))
        marked[r0 : r1 + 1, c0 : c1 + 1] = True
    return marked


@pytest.fixture
def head():
    rng = np.random.default_rng(0)
    n = len(TOKENS)
    scores = rng.normal(size=(n, n)) * 3
    scaled = scores / 2
    mask = causal(n)
    masked = np.where(mask, scaled, -np.inf)
    return dict(
        scores=scores, scaled=scaled, masked=masked, weights=softmax(masked), mask=mask, v=rng.normal(size=(n, 4))
    )


def test_attention_heatmap_data_mask_and_row_sums(head):
    fig = attention_heatmap(head["weights"], TOKENS, TOKENS, mask=head["mask"])
    z = z_of(trace_named(fig, "weights"))
    assert np.array_equal(z[head["mask"]], head["weights"][head["mask"]])
    assert np.isnan(z[~head["mask"]]).all()
    assert np.array_equal(marked_cells(fig, "weights masked", z.shape), ~head["mask"])
    sums = z_of(trace_named(fig, "row sums"))
    assert np.allclose(sums[:, 0], 1.0)
    assert fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.cmax == 1
    assert fig.layout.yaxis.title.text == "query" and fig.layout.xaxis.title.text == "key"
    assert fig.layout.yaxis.range[0] > fig.layout.yaxis.range[1]  # queries top to bottom
    assert list(trace_named(fig, "weights").text[0][:2]) == ["1.00", ""]  # values in cells for small n
    assert "0" in trace_named(fig, "weights masked values").text


def test_score_heatmap_masked_stage_keeps_minus_inf_out_of_the_scale(head):
    fig = score_heatmap(head["masked"], TOKENS, TOKENS, mask=head["mask"], stage="masked")
    z = z_of(trace_named(fig, "masked"))
    assert np.all(np.isfinite(z[head["mask"]])) and np.isnan(z[~head["mask"]]).all()
    assert np.array_equal(z[head["mask"]], head["masked"][head["mask"]])
    assert fig.layout.coloraxis.cmid == 0
    assert fig.layout.coloraxis.colorscale[0][1] != fig.layout.coloraxis.colorscale[-1][1]
    assert np.array_equal(marked_cells(fig, "masked masked", z.shape), ~head["mask"])
    assert set(trace_named(fig, "masked masked values").text) == {"−∞"}
    json.loads(fig.to_json())  # -inf never reaches the JSON


def test_score_heatmap_marks_non_finite_cells_even_without_a_mask(head):
    fig = score_heatmap(head["masked"], TOKENS, TOKENS, stage="masked")
    z = z_of(trace_named(fig, "masked"))
    assert np.array_equal(marked_cells(fig, "masked masked", z.shape), ~head["mask"])


def test_raw_scores_unmasked(head):
    fig = score_heatmap(head["scores"], TOKENS, TOKENS)
    assert np.array_equal(z_of(trace_named(fig, "scores")), head["scores"])
    assert not [t for t in fig.data if t.name == "scores masked"]
    assert fig.layout.coloraxis.cmid == 0


def test_mask_rectangles_cover_exactly_the_blocked_cells():
    rng = np.random.default_rng(3)
    for blocked in (~causal(7), rng.random((6, 9)) < 0.4, np.zeros((3, 3), bool), np.ones((2, 5), bool)):
        covered = np.zeros(blocked.shape, dtype=int)
        for r0, r1, c0, c1 in mask_rectangles(blocked):
            covered[r0 : r1 + 1, c0 : c1 + 1] += 1
        assert np.array_equal(covered, blocked.astype(int))  # every blocked cell once, nothing else
    padding = np.zeros((5, 5), bool)
    padding[:, 3:] = True
    assert mask_rectangles(padding) == [(0, 4, 3, 4)]


def test_matrix_figures_for_x_w_and_qkv():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(6, 10))
    fig = token_matrix_heatmap(x, TOKENS, name="X")
    assert np.array_equal(z_of(fig.data[0]), x)
    assert "6 tokens × 10 dims" in fig.layout.title.text
    assert fig.layout.xaxis.title.text == "dimension"
    w = rng.normal(size=(10, 4))
    fig = weight_matrix_heatmap(w, name="W<sup>Q</sup>")
    assert np.array_equal(z_of(fig.data[0]), w)
    assert "d_model 10 × d_head 4" in fig.layout.title.text
    assert fig.layout.yaxis.title.text == "d_model dimension"


def test_compare_figure_states_the_largest_difference(head):
    model = head["weights"] + 1e-3 * np.eye(len(TOKENS))
    fig = compare_figure(head["weights"], model, TOKENS, TOKENS, mask=head["mask"], head=2)
    assert np.allclose(z_of(trace_named(fig, "core"))[head["mask"]], head["weights"][head["mask"]])
    assert np.allclose(z_of(trace_named(fig, "model"))[head["mask"]], model[head["mask"]])
    diff = z_of(trace_named(fig, "difference"))
    assert np.allclose(diff[head["mask"]], -1e-3 * np.eye(len(TOKENS))[head["mask"]])
    assert "1.00e-03" in fig.layout.title.text and "head 2" in fig.layout.title.text
    with pytest.raises(ValueError, match=r"\(6, 6\).*\(5, 6\)"):
        compare_figure(head["weights"], model[:5], TOKENS, TOKENS)


def test_head_grid_and_overview():
    rng = np.random.default_rng(5)
    attentions = rng.dirichlet(np.ones(6), size=(3, 4, 6))  # (layers, H, L, S)
    fig = head_grid(attentions[1], TOKENS, TOKENS, layer=1, selected=2)
    for h in range(4):
        assert np.array_equal(z_of(trace_named(fig, f"head {h}")), attentions[1, h])
    assert [a.text for a in fig.layout.annotations if a.font.color] == ["head 2"]
    assert [s.xref for s in fig.layout.shapes] == ["x3 domain"]  # the chosen panel outlined
    fig = head_overview(attentions, "first_token", selected=(1, 2))
    assert np.allclose(z_of(trace_named(fig, "overview")), overview_matrix(attentions, "first_token"))
    assert fig.layout.yaxis.title.text == "layer" and fig.layout.xaxis.title.text == "head"
    assert len(fig.layout.shapes) == 1
    with pytest.raises(ValueError, match=r"\(4, 6, 6\)"):
        head_overview(attentions[0], "entropy")


def test_query_step_figure(head):
    i = 4
    fig = query_step_figure(
        head["scores"][i],
        head["scaled"][i],
        head["weights"][i],
        head["v"],
        TOKENS,
        query_token=TOKENS[i],
        query_index=i,
        mask_row=head["mask"][i],
    )
    assert np.array_equal(np.asarray(trace_named(fig, "q·k").y, float), head["scores"][i])
    assert np.array_equal(np.asarray(trace_named(fig, "scaled").y, float), head["scaled"][i])
    weights = np.asarray(trace_named(fig, "weight").y, float)
    assert np.array_equal(weights[head["mask"][i]], head["weights"][i][head["mask"][i]])
    contributions = z_of(trace_named(fig, "contributions"))
    assert np.allclose(
        contributions[:, head["mask"][i]], (head["weights"][i][:, None] * head["v"]).T[:, head["mask"][i]]
    )
    assert np.allclose(z_of(trace_named(fig, "output"))[:, 0], head["weights"][i] @ head["v"])
    assert list(trace_named(fig, "masked").x) == [5]
    assert "␣the" in fig.layout.title.text
    with pytest.raises(ValueError, match=r"\(5,\).*\(6, 4\)"):
        query_step_figure(head["scores"][i][:5], head["scaled"][i], head["weights"][i], head["v"], TOKENS)


def test_attention_lines(head):
    weights = head["weights"]
    fig = attention_lines(weights, TOKENS, TOKENS, threshold=0.1)
    segments = sum(len([x for x in t.x if x is None]) for t in fig.data if t.name.startswith("lines"))
    assert segments == int((weights >= 0.1).sum()) == fig.layout.meta["segments"]
    for trace in fig.data:
        if trace.name.startswith("lines"):
            level = float(trace.name.split("≈")[1])
            assert abs(trace.opacity - level) < 1e-9
    assert list(trace_named(fig, "queries").text) == ["The", "␣cat", "␣sat", "␣on", "␣the", "␣mat"]
    one = attention_lines(weights, TOKENS, TOKENS, threshold=0.0, query=3)
    assert one.layout.meta["segments"] == 6
    assert "<b>␣on</b>" in list(trace_named(one, "queries").text)


def test_rollout_heatmap_shows_its_input():
    rollout = np.random.default_rng(6).dirichlet(np.ones(6), size=6)
    fig = rollout_heatmap(rollout, TOKENS, layers=3)
    assert np.array_equal(z_of(fig.data[0]), rollout)
    assert "3 layers" in fig.layout.title.text


def test_pitfall_figures_hold_their_arrays():
    d_k = np.array([4.0, 16.0, 64.0])
    fig = variance_figure(d_k, [4.1, 15.8, 65.0], [1.02, 0.98, 1.01])
    assert np.allclose(trace_named(fig, "unscaled q·k").y, [4.1, 15.8, 65.0])
    assert np.allclose(trace_named(fig, "theory: d<sub>k</sub>").y, d_k)
    assert np.allclose(trace_named(fig, "theory: 1").y, 1.0)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    with pytest.raises(ValueError, match=r"var_scaled has shape \(2,\).*\(3,\)"):
        variance_figure(d_k, [1, 2, 3], [1, 2])

    fig = saturation_figure(d_k, [2.0, 1.0, 0.1], [2.5, 2.5, 2.5], [0.3, 0.1, 1e-4], [0.3, 0.3, 0.3], max_entropy=2.77)
    assert len([t for t in fig.data if t.name == "unscaled"]) == 2

    n = np.array([128.0, 256.0, 512.0])
    fig = cost_figure(n, bytes_used=[1e6, 4e6, 16e6], seconds=[1e-3, 3e-3, 1.2e-2])
    reference = [t for t in fig.data if t.name == "n² reference"]
    assert np.allclose(reference[0].y, [1e6, 4e6, 16e6])  # through the largest n, slope 2
    assert np.allclose(reference[1].y, [1.2e-2 / 16, 1.2e-2 / 4, 1.2e-2])
    with pytest.raises(ValueError, match="both are None"):
        cost_figure(n)

    out = np.random.default_rng(7).normal(size=(6, 3))
    order = np.array([2, 0, 1, 5, 3, 4])
    assert np.array_equal(realign(out[order], order), out)
    fig = permutation_figure(out, out[order], order, TOKENS)
    assert np.allclose(z_of(trace_named(fig, "difference")), 0.0)
    assert "same rows" in fig.layout.title.text
    fig = permutation_figure(out, out[order] + 1.0, order, TOKENS, encoding="sinusoidal")
    assert "order is seen" in fig.layout.title.text
    with pytest.raises(ValueError, match="permutation"):
        realign(out, [0, 0, 1, 2, 3, 4])


def test_temperature_figure_marks_sit_inside_the_log_axis_and_all_say_something():
    """Plotly places an annotation on a log axis at 10**x: a label given the raw t = 8 lands at 10**8,
    stretching the axis and squashing the curve. Every label's x must be log10 of a t within the sweep,
    each mark labelled once (an annotation with no text is drawn as "new text"), the lines at the raw t."""
    t = np.array([0.25, 0.5, 1.0, 2.0, 4.0, 5.657, 8.0, 16.0, 64.0])
    marks = {"√d_k": 8.0, "this head": 5.657}
    fig = temperature_figure(t, np.linspace(0.1, 2.0, t.size), np.logspace(-3, 0, t.size), marks=marks)
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis2.type == "log"
    texts = [a.text for a in fig.layout.annotations]
    assert all(text for text in texts), texts  # None or "" is drawn as plotly's "new text"
    labels = {a.text: a for a in fig.layout.annotations if a.text in marks}
    assert set(labels) == set(marks) and texts.count("√d_k") == texts.count("this head") == 1
    low, high = np.log10(t.min()), np.log10(t.max())
    for label, value in marks.items():
        assert labels[label].xref == "x" and low <= labels[label].x <= high
        assert np.isclose(labels[label].x, np.log10(value))
    lines = [s for s in fig.layout.shapes if s.type == "line" and s.x0 == s.x1]
    assert sorted(s.x0 for s in lines) == sorted([5.657, 5.657, 8.0, 8.0])  # on both panels, at t itself
    assert labels["this head"].xanchor != labels["√d_k"].xanchor  # two close marks write away from each other
    assert 5.657 not in fig.layout.xaxis.tickvals and 8.0 in fig.layout.xaxis.tickvals  # a label names the mark


def test_positional_figures():
    table = np.random.default_rng(8).normal(size=(10, 6))
    similarity = position_similarity(table)
    assert np.allclose(np.diag(similarity), 1.0)
    assert np.array_equal(z_of(positional_heatmap(table).data[0]), table)
    fig = position_similarity_figure(table)
    assert np.allclose(z_of(fig.data[0]), similarity)
    assert fig.layout.coloraxis.cmin == -1 and fig.layout.coloraxis.cmax == 1


@pytest.mark.parametrize(
    "call, shapes",
    [
        (lambda: attention_heatmap(np.ones((3, 4)), ["a"] * 3, ["b"] * 3), r"\(3, 4\)"),
        (lambda: attention_heatmap(np.ones((3, 4, 1)), ["a"] * 3, ["b"] * 4), r"\(3, 4, 1\)"),
        (
            lambda: score_heatmap(np.ones((3, 3)), ["a"] * 3, ["b"] * 3, mask=np.ones((2, 2), bool)),
            r"\(2, 2\).*\(3, 3\)",
        ),
        (lambda: head_grid(np.ones((3, 3)), ["a"] * 3, ["a"] * 3), r"\(3, 3\)"),
        (lambda: token_matrix_heatmap(np.ones((4, 2)), ["a"] * 3), r"\(4, 2\)"),
        (lambda: matrix_heatmap(np.ones(5)), r"\(5,\)"),
        (lambda: attention_lines(np.ones((2, 3)), ["a"] * 2, ["b"] * 2), r"\(2, 3\)"),
    ],
)
def test_wrong_shapes_raise_value_errors_naming_them(call, shapes):
    with pytest.raises(ValueError, match=shapes):
        call()


def test_large_heatmaps_stay_within_the_payload_budget():
    n = 512
    rng = np.random.default_rng(9)
    mask = causal(n)
    weights = softmax(np.where(mask, rng.normal(size=(n, n)), -np.inf))
    tokens = [f"tok{i}" for i in range(n)]
    for fig in (
        attention_heatmap(weights, tokens, tokens, mask=mask),
        score_heatmap(np.where(mask, rng.normal(size=(n, n)), -np.inf), tokens, tokens, mask=mask, stage="masked"),
        score_heatmap(rng.normal(size=(n, n)), tokens, tokens),
    ):
        payload = fig.to_json()
        assert len(payload) <= 2_000_000, len(payload)
        data = json.loads(payload)["data"][0]
        assert "bdata" in data["z"]  # numpy sent as a base64 typed array
        assert "customdata" not in data and "text" not in data  # no per-cell strings at this size
        assert len(json.loads(payload)["layout"]["xaxis"]["tickvals"]) <= 40
    main = trace_named(fig, "scores")
    assert np.allclose(z_of(main), np.asarray(main.z, dtype=np.float32))


def test_themes():
    fig = attention_heatmap(np.full((2, 2), 0.5), ["a", "b"], ["a", "b"], theme="slides")
    assert fig.layout.font.size == SPECS["slides"].font_size
    assert fig.layout.paper_bgcolor == "white"
    apply_theme(fig, "screen")
    assert fig.layout.font.size == SPECS["screen"].font_size
    with pytest.raises(ValueError, match="unknown theme"):
        apply_theme(fig, "dark")


@pytest.mark.parametrize("theme", sorted(SPECS))
def test_theme_lets_tick_labels_overflow_so_plotly_does_not_measure_each(theme):
    """Array ticks default to "hide past div" in plotly.js, which measures every label on each redraw; the
    theme's template says "allow" for every axis (subplots included), unless a figure sets its own."""
    fig = apply_theme(go.Figure(go.Heatmap(z=np.eye(3))).set_subplots(1, 2), theme)
    assert fig.layout.template.layout.xaxis.ticklabeloverflow == "allow"
    assert fig.layout.template.layout.yaxis.ticklabeloverflow == "allow"


def test_statistic_switch_carries_every_overview_and_each_button_shows_exactly_one():
    """The app's overview: one trace per statistic with that overview's own numbers and colour range; each
    button makes only its statistic's trace visible, with its title and colour bar."""
    from viz.heads import statistic_overview, statistic_switch
    from viz.stats import STATISTICS

    rng = np.random.default_rng(2)
    attentions = rng.random((3, 4, 6, 6))
    attentions /= attentions.sum(-1, keepdims=True)  # (layers, H, L, S)
    values = {name: overview_matrix(attentions, name) for name in STATISTICS}
    fig = statistic_switch(values, "distance", selected=(1, 2), show_values=False)
    names = list(STATISTICS)
    assert [t.name for t in fig.data] == [f"overview_{name}" for name in names]
    assert [t.visible for t in fig.data] == [name == "distance" for name in names]
    assert fig.layout.updatemenus[0].active == names.index("distance")
    buttons = fig.layout.updatemenus[0].buttons
    assert len(buttons) == len(names)
    for k, (name, button) in enumerate(zip(names, buttons, strict=True)):
        own = statistic_overview(values[name], name, selected=(1, 2), show_values=False)
        trace = fig.data[k]
        assert np.array_equal(np.asarray(trace.z, dtype=float), np.asarray(own.data[0].z, dtype=float))
        axis = fig.layout[trace.coloraxis]
        assert (axis.cmin, axis.cmax, axis.colorbar.title.text) == (
            own.layout.coloraxis.cmin,
            own.layout.coloraxis.cmax,
            own.layout.coloraxis.colorbar.title.text,
        )
        restyle, relayout = button.args
        assert restyle["visible"] == [j == k for j in range(len(names))]
        assert relayout["title.text"] == own.layout.title.text
        shown = [key for key, on in relayout.items() if key.endswith(".showscale") and on]
        assert shown == [f"{trace.coloraxis}.showscale"]
    assert fig.layout.title.text == statistic_overview(values["distance"], "distance").layout.title.text
    with pytest.raises(ValueError, match="start"):
        statistic_switch({"entropy": values["entropy"]}, "distance")


def test_default_template_changes_nothing_a_figure_shows():
    """viz.theme makes its screen look plotly's default template (creating figures is far cheaper than from
    plotly's own default): every figure of every view comes out the same as when built from plotly's."""
    import plotly.io as pio

    from attention_core.pipeline import run_trace
    from attention_core.request import TraceRequest
    from viz.theme import THEMES
    from viz.views import VIEWS, figures_for_trace

    trace = run_trace(TraceRequest(text="The cat sat on the mat."))  # the bundled MiniLM

    def every_figure() -> dict:
        return {
            (view, theme, name): json.loads(fig.to_json())  # what it shows: the order of keys may differ
            for view in VIEWS
            for theme in THEMES
            for name, fig in figures_for_trace(trace, view, theme=theme).items()
        }

    previous = pio.templates.default  # "streamlit" where streamlit was imported after viz.theme
    try:
        pio.templates.default = "attention_lens_screen"  # as in the app, which imports streamlit first
        ours = every_figure()
        pio.templates.default = "plotly"
        theirs = every_figure()
    finally:
        pio.templates.default = previous
    assert len(ours) > 10 and ours == theirs
