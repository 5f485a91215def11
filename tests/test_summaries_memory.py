"""ui.compute's per-capture summaries (overview, rollout) computed a layer or a head at a time.

The numbers must be exactly viz's (``viz.stats.overview_matrix``, ``viz.rollout.attention_rollout`` on the
whole array: the independent reference), bit for bit, while the temporaries stay one layer's or one head's.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from ui import compute
from viz.rollout import attention_rollout
from viz.stats import STATISTICS, overview_matrix


def _attentions(layers: int, heads: int, length: int, *, causal: bool, seed: int = 0) -> np.ndarray:
    """(layers, H, L, L) float32 rows that sum to 1, zero above the diagonal when causal."""
    weights = np.random.default_rng(seed).random((layers, heads, length, length)).astype(np.float32)
    if causal:
        weights *= np.tril(np.ones((length, length), dtype=np.float32))
    return weights / weights.sum(-1, keepdims=True)


CASES = [(1, 1, 1, True), (2, 3, 7, True), (4, 9, 65, True), (3, 2, 33, False)]


@pytest.mark.parametrize(("layers", "heads", "length", "causal"), CASES)
def test_rollout_streamed_is_attention_rollout_bit_for_bit(layers, heads, length, causal):
    attentions = _attentions(layers, heads, length, causal=causal)
    streamed = compute.rollout_streamed(attentions)
    assert streamed.dtype == np.float64 and streamed.shape == (length, length)
    np.testing.assert_array_equal(streamed, attention_rollout(attentions))


def test_rollout_streamed_treats_non_finite_cells_as_viz_does():
    attentions = _attentions(3, 2, 6, causal=True, seed=1)
    attentions[1, 0, 2, :] = np.nan  # a row with every key masked (NaN softmax)
    attentions[2, 1, 4, 5] = -np.inf
    np.testing.assert_array_equal(compute.rollout_streamed(attentions), attention_rollout(attentions))


def test_rollout_streamed_fails_when_a_layer_is_dropped_or_reordered():
    """The check above can fail: the same layers in another order, or one fewer, give other numbers."""
    attentions = _attentions(3, 2, 9, causal=True, seed=2)
    reference = attention_rollout(attentions)
    assert not np.array_equal(compute.rollout_streamed(attentions[::-1]), reference)
    assert not np.array_equal(compute.rollout_streamed(attentions[1:]), reference)


def test_rollout_streamed_owns_a_small_result_and_keeps_one_layer_alive():
    """The store counts ``value.nbytes``: the result must not be a view of every layer's rollout (viz's
    ``attention_rollout`` returns ``rollouts[-1]``, which keeps (layers, L, L) float64 alive)."""
    attentions = _attentions(12, 4, 128, causal=True, seed=3)
    assert attention_rollout(attentions).base is not None  # the reference is a view of a bigger array
    tracemalloc.start()
    try:
        result = compute.rollout_streamed(attentions)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.base is None and result.nbytes == 128 * 128 * 8
    one_layer = attentions[0].nbytes  # float32 (H, L, L)
    assert peak < 2 * one_layer + 6 * result.nbytes  # a layer's isfinite copy and a few (L, L) float64 maps
    tracemalloc.start()
    try:
        attention_rollout(attentions)
        _, reference_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert reference_peak > 3 * peak  # what this saves: every layer's float64 maps at once


@pytest.mark.parametrize(("layers", "heads", "length", "causal"), CASES)
@pytest.mark.parametrize("statistic", STATISTICS)
def test_overview_by_head_is_overview_matrix_bit_for_bit(layers, heads, length, causal, statistic):
    attentions = _attentions(layers, heads, length, causal=causal, seed=4)
    by_head = compute.overview_by_head(attentions, statistic)
    reference = overview_matrix(attentions, statistic)
    assert by_head.shape == reference.shape == (layers, heads) and by_head.dtype == reference.dtype
    np.testing.assert_array_equal(by_head, reference)


@pytest.mark.parametrize(("layers", "heads", "length", "causal"), CASES)
def test_every_statistic_in_one_pass_is_overview_matrix_bit_for_bit(layers, heads, length, causal):
    """``overviews_by_head`` with every statistic at once (what the Heads & layers view builds): each head widened
    once for all five (``viz.stats.head_statistics``), each number still viz's own; non-finite cells (a fully
    masked row of NaN, an infinity) count as 0 in both."""
    attentions = _attentions(layers, heads, length, causal=causal, seed=6)
    attentions[0, 0, -1] = np.nan  # a fully masked row, as a model may return it
    attentions[-1, -1, 0, 0] = np.inf
    together = compute.overviews_by_head(attentions, tuple(STATISTICS))
    assert list(together) == list(STATISTICS)
    for statistic in STATISTICS:
        reference = overview_matrix(attentions, statistic)
        assert together[statistic].dtype == reference.dtype
        np.testing.assert_array_equal(together[statistic], reference, err_msg=statistic)


def test_an_unknown_statistic_is_refused_in_one_pass_too():
    with pytest.raises(ValueError, match="unknown statistic 'median'"):
        compute.overviews_by_head(_attentions(1, 1, 4, causal=True), ("entropy", "median"))


def test_overview_by_head_puts_each_head_in_its_own_cell():
    attentions = _attentions(2, 3, 8, causal=True, seed=5)
    swapped = attentions[:, [1, 0, 2]]
    assert not np.array_equal(compute.overview_by_head(swapped, "entropy"), overview_matrix(attentions, "entropy"))


def test_summaries_of_the_bundled_smollm2_are_viz_s_numbers():
    """On the real model's returned attentions (the bundled SmolLM2, causal, grouped-query)."""
    from attention_core import pipeline
    from attention_core.request import TraceRequest

    request = TraceRequest(model="smollm2", text="The cat sat on the mat because it was warm there.", max_tokens=24)
    loaded = pipeline.load(request)
    cap = pipeline.capture_text(loaded, request)
    attentions = cap.attentions.numpy()  # (layers, H, L, S) the model's own weights
    np.testing.assert_array_equal(compute.rollout_streamed(attentions), attention_rollout(attentions))
    for statistic in STATISTICS:
        np.testing.assert_array_equal(
            compute.overview_by_head(attentions, statistic), overview_matrix(attentions, statistic)
        )
