"""Head statistics and rollout against hand-computed values; entropy against the core's torch version."""

from __future__ import annotations

import math

import numpy as np
import pytest

from viz.rollout import attention_rollout, rollout_by_layer
from viz.stats import STATISTICS, head_statistic, overview_matrix, row_entropy


def test_statistics_on_a_hand_computed_example():
    weights = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])  # (3, 3)
    entropy_rows = [0.0, math.log(2), -(0.2 * math.log(0.2) + 0.3 * math.log(0.3) + 0.5 * math.log(0.5))]
    assert np.allclose(row_entropy(weights), entropy_rows)
    assert head_statistic(weights, "entropy") == pytest.approx(np.mean(entropy_rows))
    assert head_statistic(weights, "max_weight") == pytest.approx((1.0 + 0.5 + 0.5) / 3)
    # row 0: 0; row 1: 0.5*1 + 0.5*0; row 2: 0.2*2 + 0.3*1 + 0.5*0
    assert head_statistic(weights, "distance") == pytest.approx((0.0 + 0.5 + 0.7) / 3)
    assert head_statistic(weights, "previous_token") == pytest.approx((0.5 + 0.3) / 2)
    assert head_statistic(weights, "first_token") == pytest.approx((1.0 + 0.5 + 0.2) / 3)


def test_statistics_shapes_and_errors():
    attentions = np.random.default_rng(0).dirichlet(np.ones(5), size=(2, 3, 5))  # (layers, H, L, S)
    for name in STATISTICS:
        assert overview_matrix(attentions, name).shape == (2, 3)
    assert head_statistic(np.ones((1, 1)), "previous_token") == 0.0
    with pytest.raises(ValueError, match="unknown statistic"):
        head_statistic(attentions, "nope")
    with pytest.raises(ValueError, match=r"\(5,\)"):
        head_statistic(np.ones(5), "entropy")
    with pytest.raises(ValueError, match=r"\(3, 5, 5\)"):
        overview_matrix(attentions[0], "entropy")


def test_entropy_agrees_with_the_core():
    torch = pytest.importorskip("torch")
    analysis = pytest.importorskip("attention_core.analysis")
    weights = np.random.default_rng(1).dirichlet(np.ones(7), size=(4, 7))  # (H, L, S)
    weights[0, 0] = np.eye(7)[2]  # a one-hot row: 0 ln 0 = 0 on both sides
    assert np.allclose(row_entropy(weights), analysis.row_entropy(torch.from_numpy(weights)).numpy())
    assert np.allclose(head_statistic(weights, "entropy"), analysis.row_entropy(torch.from_numpy(weights)).mean(-1))


def test_rollout_follows_abnar_and_zuidema():
    rng = np.random.default_rng(2)
    attentions = rng.dirichlet(np.ones(4), size=(2, 3, 4))  # (layers=2, H=3, L=4, S=4)
    eye = np.eye(4)
    layer0 = 0.5 * attentions[0].mean(0) + 0.5 * eye
    layer1 = 0.5 * attentions[1].mean(0) + 0.5 * eye
    layer0 /= layer0.sum(1, keepdims=True)
    layer1 /= layer1.sum(1, keepdims=True)
    expected = layer1 @ layer0
    assert np.allclose(attention_rollout(attentions), expected)
    assert np.allclose(attention_rollout(attentions, upto=0), layer0)
    assert np.allclose(rollout_by_layer(attentions).sum(-1), 1.0)
    identity = np.broadcast_to(eye, (3, 2, 4, 4))
    assert np.allclose(attention_rollout(identity), eye)
    with pytest.raises(ValueError, match=r"\(1, 1, 2, 3\)"):
        attention_rollout(np.ones((1, 1, 2, 3)))
