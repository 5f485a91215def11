"""Multi-head attention against torch.nn.MultiheadAttention; the article's claims as numbers."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_core import analysis, masks, positional
from attention_core.multihead import (
    ProjectionWeights,
    init_weights,
    merge_heads,
    multi_head_self_attention,
    split_heads,
)
from viz.stats import head_statistic, overview_matrix


def test_split_merge_round_trip():
    t = torch.randn(2, 5, 12)
    heads = split_heads(t, 3)
    assert heads.shape == (2, 3, 5, 4)
    assert torch.equal(heads[0, 1, 2], t[0, 2, 4:8])
    assert torch.equal(merge_heads(heads), t)


def test_matches_torch_multihead_attention():
    torch.manual_seed(0)
    d_model, heads, L = 12, 3, 5
    ref = torch.nn.MultiheadAttention(d_model, heads, batch_first=True, dtype=torch.float64)
    w_q, w_k, w_v = ref.in_proj_weight.detach().chunk(3)
    b_q, b_k, b_v = ref.in_proj_bias.detach().chunk(3)
    weights = ProjectionWeights(
        w_q=w_q.T,
        w_k=w_k.T,
        w_v=w_v.T,
        b_q=b_q,
        b_k=b_k,
        b_v=b_v,
        w_o=ref.out_proj.weight.detach().T,
        b_o=ref.out_proj.bias.detach(),
        num_heads=heads,
    )
    x = torch.randn(1, L, d_model, dtype=torch.float64)
    causal = masks.causal(L)
    ours = multi_head_self_attention(x, weights, attn_mask=causal)
    expected, expected_weights = ref(x, x, x, attn_mask=~causal, average_attn_weights=False)  # torch: True = blocked
    assert (ours.output - expected).abs().max() < 1e-12
    assert (ours.attention.weights - expected_weights).abs().max() < 1e-12


def test_init_weights_seeded_and_unit_variance():
    a, b = init_weights(64, 16, 4, seed=3), init_weights(64, 16, 4, seed=3)
    assert torch.equal(a.w_q, b.w_q) and not torch.equal(a.w_q, init_weights(64, 16, 4, seed=4).w_q)
    assert a.w_q.shape == (64, 64) and a.w_o.shape == (64, 64) and a.d_k == 16 and a.head("q", 1).shape == (64, 16)
    x = torch.randn(4000, 64, dtype=torch.float64)
    q = x @ a.w_q.double()
    assert 0.8 < q.var().item() < 1.2


def test_grouped_query_weights_share_kv_heads():
    w = init_weights(8, 2, 4, seed=0, with_output=False)
    gqa = ProjectionWeights(w_q=w.w_q, w_k=w.w_k[:, :4], w_v=w.w_v[:, :4], num_heads=4, num_kv_heads=2)
    trace = multi_head_self_attention(torch.randn(3, 8), gqa)
    assert trace.k.shape == (2, 3, 2) and trace.attention.weights.shape == (4, 3, 3)
    assert torch.equal(gqa.head("k", 1), gqa.head("k", 0))  # heads 0, 1 share kv head 0
    with pytest.raises(ValueError):
        ProjectionWeights(w_q=w.w_q, w_k=w.w_k[:, :6], w_v=w.w_v[:, :6], num_heads=4, num_kv_heads=3)


def test_alibi_bias_is_its_own_step_after_the_mask():
    w = init_weights(8, 4, 2, seed=0)
    x = torch.randn(5, 8)
    bias = positional.alibi_bias(2, 5)
    trace = multi_head_self_attention(x, w, score_bias=bias, is_causal=True)
    att, lower = trace.attention, masks.causal(5)
    assert torch.allclose(att.biased[..., ~lower].exp(), torch.tensor(0.0))
    assert torch.allclose(att.biased[:, lower], (att.scaled + bias)[:, lower])
    assert torch.equal(att.masked[:, lower], att.scaled[:, lower])  # the masked map holds the mask alone
    assert att.mask.dtype == torch.bool and att.score_bias is bias
    reference = F.scaled_dot_product_attention(
        trace.q, trace.k, trace.v, attn_mask=bias.masked_fill(~lower, float("-inf"))
    )  # torch's way: the bias folded into a float mask
    assert torch.allclose(att.output, reference, atol=1e-6)


def test_variance_grows_with_dk_and_scaling_fixes_it():
    curve = analysis.dot_product_variance((4, 64, 256), samples=20000)
    assert np.allclose(curve.unscaled / curve.d_k, 1, atol=0.08)
    assert np.allclose(curve.scaled, 1, atol=0.08)


def test_softmax_gradient_matches_analytic_jacobian():
    scores = torch.randn(7, dtype=torch.float64)
    upstream = torch.randn(7, dtype=torch.float64)
    probs = scores.softmax(-1)
    analytic = analysis.softmax_jacobian(probs) @ upstream  # symmetric Jacobian
    assert torch.allclose(analysis.softmax_gradient(scores, upstream), analytic, atol=1e-14)
    assert torch.allclose(
        analysis.softmax_jacobian(probs), torch.autograd.functional.jacobian(lambda s: s.softmax(-1), scores)
    )


def test_saturation_unscaled_collapses_scaled_does_not():
    curve = analysis.saturation_vs_dk((4, 512), num_keys=16, rows=256)
    assert curve.entropy_unscaled[-1] < 0.3 * curve.entropy_scaled[-1]
    assert curve.max_weight_unscaled[-1] > 0.8
    assert curve.grad_norm_unscaled[-1] < 0.3 * curve.grad_norm_scaled[-1]
    assert abs(curve.entropy_scaled[-1] - curve.entropy_scaled[0]) < 0.3 * curve.max_entropy
    temps = analysis.saturation_vs_temperature(torch.randn(64, 10) * 8, [0.5, 1, 8, 64])
    assert np.all(np.diff(temps.entropy_scaled) > 0)


def test_cost_formula_by_hand():
    # n = 3, d_k = 2, one head: QK^T is 3 x 3 dot products of length 2 (9 * 2 multiplies + adds = 36 flops),
    # AV the same (36), softmax about 5 flops per entry (45): 117; the 3 x 3 float32 matrix is 36 bytes.
    # (Measured time and memory against n, with their fitted exponents: tests/test_lab.py.)
    cost = analysis.attention_cost(3, d_k=2, heads=1)
    assert cost.flops == 117 and cost.matrix_bytes == 36 and cost.trace_bytes == 4 * 36
    assert analysis.attention_cost(128).matrix_bytes == 12 * 128 * 128 * 4  # the default: 12 heads, float32


def test_measured_peak_covers_the_maps_the_core_keeps():
    timing = analysis.measure_core(64, heads=2, d_k=8, repeats=2)
    # the trace keeps scores, scaled and weights (masked is scaled itself when nothing is masked): three
    # float32 (H, L, S) maps are alive at the end, and the output (H, L, E) beside them
    assert timing.peak_bytes >= 3 * 2 * 64 * 64 * 4 + 2 * 64 * 8 * 4


def test_head_statistics_by_hand():
    eye = torch.eye(4).unsqueeze(0)
    prev = torch.zeros(1, 4, 4)
    prev[0, 0, 0] = 1
    for i in range(1, 4):
        prev[0, i, i - 1] = 1
    uniform = torch.full((1, 4, 4), 0.25)
    weights = torch.cat([eye, prev, uniform]).numpy()  # (H, L, S)
    assert np.allclose(analysis.row_entropy(torch.from_numpy(weights)).mean(-1), [0, 0, math.log(4)])
    assert np.allclose(head_statistic(weights, "entropy"), [0, 0, math.log(4)])
    assert np.allclose(head_statistic(weights, "max_weight"), [1, 1, 0.25])
    assert np.allclose(head_statistic(weights, "previous_token"), [0, 1, 0.25])
    assert np.allclose(head_statistic(weights, "first_token"), [0.25, 0.5, 0.25])
    assert np.allclose(head_statistic(weights, "distance"), [0, 0.75, np.mean([1.5, 1, 1, 1.5])])


@pytest.mark.parametrize("statistic", ["entropy", "max_weight", "distance", "previous_token", "first_token"])
def test_head_statistics_of_float32_weights_equal_a_float64_copy_bit_for_bit(statistic):
    """The statistics read float32 weights without widening all of them first (max, the previous-token
    diagonal and the first column widen only what they read): the numbers are exactly those of a float64
    copy with non-finite cells as 0, the definition."""
    rng = np.random.default_rng(3)
    weights = rng.random((3, 4, 9, 11)).astype(np.float32)  # (layers, H, L, S)
    weights /= weights.sum(-1, keepdims=True)
    weights[0, 0, 5, :] = np.nan  # a fully masked row returned as NaN
    weights[1, 2, 3, 2] = -np.inf
    weights[2, 1, :, 0] = np.inf
    wide = np.asarray(weights, dtype=np.float64)
    wide = np.where(np.isfinite(wide), wide, 0.0)
    assert np.array_equal(head_statistic(weights, statistic), head_statistic(wide, statistic))
    assert np.array_equal(overview_matrix(weights, statistic), head_statistic(wide, statistic))


@pytest.mark.parametrize("encoding", ["sinusoidal", "learned", "rotary", "alibi"])
def test_permutation_equivariance_only_without_position(encoding):
    L, D = 6, 16
    w = init_weights(D, 8, 2, seed=0, dtype=torch.float64)
    x = torch.randn(L, D, dtype=torch.float64)
    perm = [3, 0, 5, 1, 4, 2]

    def plain(t):
        return multi_head_self_attention(t, w).output

    def with_position(t):
        if encoding in ("sinusoidal", "learned"):
            table = (
                positional.sinusoidal(L, D, dtype=t.dtype)
                if encoding == "sinusoidal"
                else positional.learned(L, D, dtype=t.dtype)
            )
            return multi_head_self_attention(t + table, w).output
        if encoding == "rotary":
            cos, sin = positional.rotary_cos_sin(L, 8, dtype=t.dtype)
            return multi_head_self_attention(t, w, rotate=lambda z: positional.apply_rotary(z, cos, sin)).output
        return multi_head_self_attention(t, w, score_bias=positional.alibi_bias(2, L, dtype=t.dtype)).output

    assert analysis.permutation_check(x, plain, perm).equivariant
    check = analysis.permutation_check(x, with_position, perm)
    assert not check.equivariant and check.max_difference > 1e-3
