"""Display copies: a thumbnail never sends more cells than it has pixels, and says what a cell means."""

from __future__ import annotations

import numpy as np

from viz.heads import GRID_DISPLAY_MAX, head_grid
from viz.heatmaps import block_means
from viz.stats import overview_matrix, row_entropy


def test_block_means_by_hand():
    values = np.arange(16, dtype=np.float32).reshape(4, 4)
    mask = np.tril(np.ones((4, 4), bool))  # causal: the upper right block is empty
    means, empty, block = block_means(values, mask, max_side=2)
    assert block == 2
    assert means[0, 0] == (0 + 4 + 5) / 3  # allowed cells of the top-left block: (0,0), (1,0), (1,1)
    assert np.isnan(means[0, 1]) and empty[0, 1]
    assert means[1, 0] == (8 + 9 + 12 + 13) / 4
    assert means[1, 1] == (10 + 14 + 15) / 3


def test_block_means_pads_a_side_that_does_not_divide():
    values = np.ones((5, 3))
    means, empty, block = block_means(values, None, max_side=2)
    assert block == 3 and means.shape == (2, 1) and np.all(means == 1.0) and not empty.any()


def test_block_means_is_the_matrix_itself_when_it_fits():
    values = np.random.default_rng(0).random((6, 6))
    means, _, block = block_means(values, None, max_side=8)
    assert block == 1 and np.array_equal(means, values)


def _block_means_as_first_written(values, mask, max_side):
    """viz.blocks.block_means as it was written first (every cell through np.where, np.pad and np.nansum): the
    reference the one-copy path must equal bit for bit."""
    import math

    from viz.blocked import blocked_cells

    rows, cols = values.shape
    block = max(1, math.ceil(max(rows, cols) / max_side))
    shown = np.where(blocked_cells(values, mask), np.nan, values)
    padded = np.pad(shown, ((0, -rows % block), (0, -cols % block)), constant_values=np.nan)
    shape = (padded.shape[0] // block, block, padded.shape[1] // block, block)
    tiles = padded.reshape(shape).transpose(0, 2, 1, 3).reshape(shape[0], shape[2], -1)
    counts = np.isfinite(tiles).sum(axis=-1)
    sums = np.nansum(tiles, axis=-1, dtype=np.float64)
    empty = counts == 0
    means = np.where(empty, np.nan, sums / np.maximum(counts, 1))
    return (tiles[..., 0] if block == 1 else means), empty, block


def test_block_means_are_the_first_formulation_s_numbers_bit_for_bit_and_leave_the_input_alone():
    """The one-copy path (sides that divide into blocks) and the padded one: the same means, the same empty blocks,
    for float32 and float64, masks or none, NaN and infinite cells; the caller's array is never written into."""
    rng = np.random.default_rng(7)
    for rows, cols, max_side in [(512, 512, 128), (64, 64, 64), (96, 64, 32), (100, 70, 32), (7, 7, 2), (5, 3, 8)]:
        for dtype in (np.float32, np.float64):
            values = rng.random((rows, cols)).astype(dtype)
            values[rng.random((rows, cols)) < 0.02] = np.nan
            values[0, -1], values[-1, 0] = np.inf, -np.inf
            for mask in (None, np.tril(np.ones((rows, cols), bool)), rng.random((rows, cols)) < 0.8):
                kept = values.copy()
                got = block_means(values, mask, max_side)
                want = _block_means_as_first_written(values, mask, max_side)
                assert got[2] == want[2] and got[0].dtype == want[0].dtype, (rows, cols, dtype)
                np.testing.assert_array_equal(got[0], want[0])
                np.testing.assert_array_equal(got[1], want[1])
                np.testing.assert_array_equal(values, kept)


def test_head_grid_sends_thumbnails_for_long_inputs():
    n, heads = 300, 4
    weights = np.random.default_rng(1).random((heads, n, n)).astype(np.float32)
    weights /= weights.sum(-1, keepdims=True)
    tokens = [f"t{i}" for i in range(n)]
    fig = head_grid(weights, tokens, tokens, mask=np.tril(np.ones((n, n), bool)))
    panels = [
        trace for trace in fig.data if trace.name and trace.name.startswith("head ") and "masked" not in trace.name
    ]
    assert len(panels) == heads
    for h, panel in enumerate(panels):
        z = np.asarray(panel.z)
        assert max(z.shape) <= GRID_DISPLAY_MAX
        block = int(np.ceil(n / GRID_DISPLAY_MAX))
        expected, _, _ = block_means(weights[h], np.tril(np.ones((n, n), bool)), GRID_DISPLAY_MAX)
        assert np.allclose(np.nan_to_num(z), np.nan_to_num(expected), atol=1e-6)
        assert f"{block}×{block} block" in panel.hovertemplate
    assert "mean of a" in fig.layout.title.text


def test_head_grid_keeps_exact_cells_for_short_inputs():
    weights = np.random.default_rng(2).random((2, 10, 10))
    fig = head_grid(weights, list("abcdefghij"), list("abcdefghij"))
    assert np.allclose(np.asarray(fig.data[0].z), weights[0])


def test_overview_per_layer_equals_the_whole_array_at_once():
    attentions = np.random.default_rng(3).random((3, 2, 5, 5)).astype(np.float32)
    attentions /= attentions.sum(-1, keepdims=True)
    by_layer = overview_matrix(attentions, "entropy")
    assert by_layer.shape == (3, 2)
    assert np.allclose(by_layer, row_entropy(attentions.astype(np.float64)).mean(-1))


def test_block_extremes_keep_the_worst_cell_and_its_sign():
    from viz.heatmaps import block_extremes

    values = np.array([[0.1, -0.9, 0.0, 0.2], [0.3, 0.4, 0.5, -0.6], [0, 0, 0, 0], [0, 0, 0, 1e-9]])
    extremes, empty, block = block_extremes(values, None, max_side=2)
    assert block == 2 and not empty.any()
    assert extremes.tolist() == [[-0.9, -0.6], [0.0, 1e-9]]


def test_compare_figure_for_long_inputs_sends_display_copies_and_the_exact_maximum():
    from viz.compare import COMPARE_DISPLAY_MAX, compare_figure

    n = 400
    rng = np.random.default_rng(4)
    core = rng.random((n, n)).astype(np.float32)
    model = core.copy()
    model[123, 321] += 3e-3  # one cell differs
    tokens = [str(i) for i in range(n)]
    fig = compare_figure(core, model, tokens, tokens)
    for trace in fig.data:
        assert max(np.asarray(trace.z).shape) <= COMPARE_DISPLAY_MAX
    difference = np.asarray(next(t for t in fig.data if t.name == "difference").z)
    assert np.isclose(np.nanmin(difference), -3e-3, rtol=1e-3)  # the one differing cell survives the reduction
    assert fig.layout.meta["max_abs_difference"] == float(np.abs(core - model).max())


def test_a_heatmap_longer_than_the_chart_has_pixels_sends_a_display_copy():
    from viz.heatmaps import DISPLAY_MAX
    from viz.scores import attention_heatmap

    n = 2 * DISPLAY_MAX + 3
    causal = np.tril(np.ones((n, n), bool))
    weights = (np.random.default_rng(5).random((n, n)) * causal).astype(np.float32)  # 0 on blocked keys
    tokens = [str(i) for i in range(n)]
    fig = attention_heatmap(weights, tokens, tokens, mask=causal)
    main = next(t for t in fig.data if t.name == "weights")
    assert max(np.asarray(main.z).shape) <= DISPLAY_MAX
    expected, _, block = block_means(weights, np.tril(np.ones((n, n), bool)), DISPLAY_MAX)
    assert block == 3 and np.allclose(np.nan_to_num(main.z), np.nan_to_num(expected), atol=1e-6)
    assert any("mean of a 3×3 block" in a.text for a in fig.layout.annotations)
    sums = next(t for t in fig.data if t.name == "row sums")
    assert np.asarray(sums.z).shape == (n, 1)  # the exact row sums stay per row
