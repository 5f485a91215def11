"""Masks and positional encodings, each against a hand-written expectation."""

import math

import numpy as np
import pytest
import torch

from attention_core import masks, positional
from attention_core.sdpa import scaled_dot_product_attention
from viz.positional import position_similarity


def grid(rows):
    return torch.tensor(rows, dtype=torch.bool)


def test_causal_is_lower_triangle_top_left():
    assert torch.equal(masks.causal(3), grid([[1, 0, 0], [1, 1, 0], [1, 1, 1]]))
    assert torch.equal(masks.causal(2, 4), grid([[1, 0, 0, 0], [1, 1, 0, 0]]))
    assert torch.equal(masks.causal(4, 4), torch.ones(4, 4).tril().bool())


def test_full_and_padding():
    assert masks.full(2, 3).all() and masks.full(2, 3).shape == (2, 3)
    pad = masks.padding(torch.tensor([1, 1, 0]))
    assert torch.equal(pad, grid([[1, 1, 0]] * 3))
    batch = masks.padding(torch.tensor([[1, 1, 0], [1, 0, 0]]))
    assert batch.shape == (2, 1, 3, 3) and torch.equal(batch[1, 0, 2], grid([1, 0, 0]))


def test_sliding_window_symmetric_and_causal():
    assert torch.equal(masks.sliding_window(4, width=2), grid([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]]))
    assert torch.equal(
        masks.sliding_window(4, width=2, causal=True), grid([[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]])
    )
    assert torch.equal(masks.sliding_window(5, width=99, causal=True), masks.causal(5))


def test_strided_block_local_blocked_keys():
    assert torch.equal(masks.strided(4, stride=2), grid([[1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1]]))
    assert torch.equal(masks.block_local(4, block=2), grid([[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]]))
    assert torch.equal(masks.blocked_keys(2, 3, keys=[1]), grid([[1, 0, 1], [1, 0, 1]]))
    with pytest.raises(ValueError, match="outside"):
        masks.blocked_keys(2, 3, keys=[5])
    for bad in (lambda: masks.sliding_window(3, width=0), lambda: masks.strided(3, stride=0), lambda: masks.causal(0)):
        with pytest.raises(ValueError):
            bad()


def test_masks_combine_with_and():
    combined = masks.causal(4) & masks.sliding_window(4, width=2)
    assert torch.equal(combined, masks.sliding_window(4, width=2, causal=True))
    assert torch.equal(
        masks.causal(3) & masks.padding(torch.tensor([1, 1, 0])), grid([[1, 0, 0], [1, 1, 0], [1, 1, 0]])
    )


def test_additive_fill_minus_1e9_leaks_on_empty_rows():
    q = k = v = torch.randn(3, 4, dtype=torch.float64)
    mask = masks.full(3, 3).clone()
    mask[1] = False  # query 1 is meant to see nothing
    mask[0, 2] = False
    with_inf = scaled_dot_product_attention(q, k, v, attn_mask=masks.to_additive(mask, dtype=torch.float64))
    with_big = scaled_dot_product_attention(q, k, v, attn_mask=masks.to_additive(mask, -1e9, dtype=torch.float64))
    assert (with_inf.weights[1] == 0).all()  # -inf: nothing leaks
    # -1e9: the empty row leaks. In float64 it is the unmasked softmax (the -1e9 cancels out) ...
    assert torch.allclose(with_big.weights[1], with_inf.scaled[1].softmax(-1))
    # ... and in float32 the scores vanish next to 1e9 (spacing 64), so the row goes uniform.
    q32, k32, v32 = q.float(), k.float(), v.float()
    leak32 = scaled_dot_product_attention(q32, k32, v32, attn_mask=masks.to_additive(mask, -1e9))
    assert torch.allclose(leak32.weights[1], torch.full((3,), 1 / 3))
    assert with_big.weights[0, 2] == 0 and with_inf.weights[0, 2] == 0  # a partly masked row is fine either way


def test_sinusoidal_values_by_hand():
    pe = positional.sinusoidal(3, 4, dtype=torch.float64)
    for p in range(3):
        expect = [math.sin(p), math.cos(p), math.sin(p / 100), math.cos(p / 100)]
        assert torch.allclose(pe[p], torch.tensor(expect, dtype=torch.float64))
    assert positional.sinusoidal(5, 7).shape == (5, 7)  # odd widths work


def test_learned_table_and_seeded():
    table = torch.arange(20.0).reshape(5, 4)
    assert torch.equal(positional.learned(3, 4, table=table), table[:3])
    assert torch.equal(positional.learned(3, 4, seed=1), positional.learned(3, 4, seed=1))
    assert not torch.equal(positional.learned(3, 4, seed=1), positional.learned(3, 4, seed=2))
    with pytest.raises(ValueError):
        positional.learned(9, 4, table=table)
    assert positional.no_encoding(3, 4).abs().sum() == 0


def test_rotary_rotates_pairs_and_depends_on_relative_position():
    cos, sin = positional.rotary_cos_sin(6, 4, dtype=torch.float64)
    x = torch.randn(6, 4, dtype=torch.float64)
    rotated = positional.apply_rotary(x, cos, sin)
    assert torch.allclose(rotated.norm(dim=-1), x.norm(dim=-1))  # a rotation keeps length
    assert torch.allclose(rotated[0], x[0])  # position 0 is not rotated
    # position 1, first pair (dims 0 and 2) rotated by angle 1 rad
    c, s = math.cos(1), math.sin(1)
    assert torch.allclose(rotated[1, 0], x[1, 0] * c - x[1, 2] * s)
    # q_m . k_n depends only on m - n: shift both positions by 2, same dot product
    q, k = torch.randn(4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    qs, ks = q.expand(6, 4), k.expand(6, 4)
    rq, rk = positional.apply_rotary(qs, cos, sin), positional.apply_rotary(ks, cos, sin)
    assert torch.allclose(rq[3] @ rk[1], rq[5] @ rk[3])


def test_alibi_bias_and_slopes():
    assert torch.allclose(
        positional.alibi_slopes(8), torch.tensor([2 ** -(i + 1) for i in range(8)], dtype=torch.float64)
    )
    assert positional.alibi_slopes(6).shape == (6,)
    bias = positional.alibi_bias(2, 3, dtype=torch.float64)
    assert bias.shape == (2, 3, 3)
    assert torch.allclose(bias[0], -(2**-4) * torch.tensor([[0, 1, 2], [1, 0, 1], [2, 1, 0]], dtype=torch.float64))


def test_position_similarity_diagonal_is_one():
    sim = position_similarity(positional.sinusoidal(8, 16).numpy())  # the one definition, in viz
    assert np.allclose(sim.diagonal(), np.ones(8), atol=1e-6)
    assert sim[0, 1] > sim[0, 7]  # near positions look more alike than far ones


def test_apply_attaches_each_encoding_where_it_belongs():
    x = torch.zeros(4, 8, dtype=torch.float64)  # (L, D)
    added = positional.apply("sinusoidal", x, heads=2, head_dim=4)
    assert torch.equal(added.x, positional.sinusoidal(4, 8, dtype=torch.float64))
    assert added.rotate is None and added.score_bias is None
    assert torch.equal(positional.apply("sinusoidal", x, heads=2, head_dim=4, inside_x="sinusoidal").x, x)  # once
    learned = positional.apply("learned", x, heads=2, head_dim=4, seed=3).x
    assert torch.equal(learned, positional.learned(4, 8, seed=3, dtype=torch.float64))
    rotary = positional.apply("rotary", x, heads=2, head_dim=4)
    q = torch.randn(2, 4, 4, dtype=torch.float64)  # (H, L, E)
    cos, sin = positional.rotary_cos_sin(4, 4, dtype=torch.float64)
    assert torch.equal(rotary.x, x) and torch.equal(rotary.rotate(q), positional.apply_rotary(q, cos, sin))
    alibi = positional.apply("alibi", x, heads=2, head_dim=4)
    assert torch.equal(alibi.x, x) and alibi.rotate is None
    assert torch.equal(alibi.score_bias, positional.alibi_bias(2, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="unknown encoding"):
        positional.apply("relative", x, heads=2, head_dim=4)
