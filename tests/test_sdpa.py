"""The core against torch's own SDPA (the independent reference) and hand-worked examples."""

import math

import pytest
import torch
import torch.nn.functional as F

from attention_core import scaled_dot_product_attention

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")),
]
TOL = {torch.float32: 1e-6, torch.float64: 1e-10}


def rand(*shape, dtype=torch.float64, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype).to(device)


def qkv(L=5, S=7, E=8, Ev=6, batch=(2, 3), dtype=torch.float64, device="cpu", hk=None):
    hq = batch[-1] if batch else None
    kb = batch if hk is None else (*batch[:-1], hk)
    return (
        (
            rand(*batch, L, E, dtype=dtype, device=device, seed=1),
            rand(*kb, S, E, dtype=dtype, device=device, seed=2),
            rand(*kb, S, Ev, dtype=dtype, device=device, seed=3),
        )
        if hq is not None
        else None
    )


def check(q, k, v, dtype, **kw):
    ours = scaled_dot_product_attention(q, k, v, **kw)
    ref = F.scaled_dot_product_attention(q, k, v, **kw)
    assert ours.output.shape == ref.shape
    assert (ours.output - ref).abs().max().item() <= TOL[dtype]
    return ours


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("batch", [(3,), (2, 3)], ids=["3d", "4d"])
@pytest.mark.parametrize("L,S", [(5, 5), (4, 9), (9, 4)])
def test_matches_torch_plain_and_causal(device, dtype, batch, L, S):
    q, k, v = qkv(L, S, batch=batch, dtype=dtype, device=device)
    check(q, k, v, dtype)
    check(q, k, v, dtype, is_causal=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_masks_bool_float_broadcast_and_scale(device, dtype):
    q, k, v = qkv(5, 7, dtype=dtype, device=device)
    g = torch.Generator().manual_seed(9)
    bool_full = (torch.rand(2, 3, 5, 7, generator=g) > 0.3).to(device)
    bool_full[..., 0] = True  # torch gives NaN for empty rows; compare rows it defines
    bool_bcast = (torch.rand(5, 7, generator=g) > 0.3).to(device)
    bool_bcast[:, 2] = True
    float_mask = rand(1, 3, 1, 7, dtype=dtype, device=device, seed=4)
    float_inf = rand(5, 7, dtype=dtype, device=device, seed=5)
    float_inf[1, 3] = float("-inf")
    float_inf[4, :3] = float("-inf")
    for mask in (bool_full, bool_bcast, float_mask, float_inf):
        check(q, k, v, dtype, attn_mask=mask)
        check(q, k, v, dtype, attn_mask=mask, scale=0.37)
    check(q, k, v, dtype, scale=2.5)
    check(q, k, v, dtype, is_causal=True, scale=0.1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_grouped_query_heads(device, dtype):
    q, k, v = qkv(6, 6, batch=(2, 6), hk=2, dtype=dtype, device=device)
    check(q, k, v, dtype, enable_gqa=True)
    check(q, k, v, dtype, enable_gqa=True, is_causal=True)


def test_bfloat16_close_to_torch():
    q, k, v = (t.to(torch.bfloat16) for t in qkv(6, 6))
    ours = scaled_dot_product_attention(q, k, v, is_causal=True)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    assert ours.output.dtype == torch.bfloat16
    assert (ours.output.float() - ref).abs().max().item() < 2e-2


def test_invariants_rows_sum_masked_zero_output_is_av():
    q, k, v = qkv(6, 6)
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    trace = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.allclose(trace.weights.sum(-1), torch.ones(2, 3, 6, dtype=torch.float64), atol=1e-12)
    assert (trace.weights[..., ~mask] == 0).all()  # exactly zero, not tiny
    assert torch.equal(trace.output, trace.weights @ v)
    assert torch.allclose(trace.scaled, trace.scores / math.sqrt(8))
    assert torch.equal(trace.scores, q @ k.transpose(-2, -1))


def test_hand_worked_two_by_two():
    # q1 = [1, 0], q2 = [0, 1]; k1 = [1, 0], k2 = [1, 1]; d_k = 2, so scale = 1/sqrt(2).
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    k = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    v = torch.tensor([[10.0, 0.0], [0.0, 10.0]], dtype=torch.float64)
    trace = scaled_dot_product_attention(q, k, v)
    # scores = [[1, 1], [0, 1]]: query 1 matches both keys equally, query 2 only key 2.
    assert trace.scores.tolist() == [[1.0, 1.0], [0.0, 1.0]]
    a = 1.0 / (1.0 + math.exp(1 / math.sqrt(2)))  # softmax([0, 1/sqrt 2])[0]
    expected = torch.tensor([[0.5, 0.5], [a, 1 - a]], dtype=torch.float64)
    assert torch.allclose(trace.weights, expected, atol=1e-15)
    assert torch.allclose(trace.output, torch.tensor([[5.0, 5.0], [10 * a, 10 * (1 - a)]], dtype=torch.float64))


@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("backend", ["default", "math"])
def test_fully_masked_row_gives_zero_not_nan(kind, backend):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = qkv(4, 4)
    mask = torch.ones(4, 4, dtype=torch.bool)
    mask[2] = False  # query 2 may attend to nothing
    if kind == "float":
        mask = torch.zeros(4, 4, dtype=torch.float64).masked_fill(~mask, float("-inf"))  # -inf = hidden
    trace = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    if backend == "math":
        with sdpa_kernel([SDPBackend.MATH]):
            torch_out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    else:
        torch_out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    # What sdpa.py's docstring says of the pinned torch: 0 for the empty row, not NaN.
    assert torch.isfinite(torch_out).all()
    assert (torch_out[..., 2, :] == 0).all()
    # The core: exactly 0 there too, the row marked, and torch's output everywhere.
    assert torch.isfinite(trace.weights).all() and torch.isfinite(trace.output).all()
    assert (trace.weights[..., 2, :] == 0).all() and (trace.output[..., 2, :] == 0).all()
    assert trace.empty_rows[..., 2, 0].all() and not trace.empty_rows[..., [0, 1, 3], 0].any()
    assert torch.allclose(trace.output, torch_out, atol=1e-12)


def test_dropout_zeroes_and_rescales():
    # With value = identity, output = (dropped weights) @ I: the output IS the dropped weight matrix,
    # so every entry can be checked against the undropped weights: 0 or weight / (1 - p).
    p = 0.5
    q, k, _ = qkv(16, 16)
    v = torch.eye(16, dtype=torch.float64).expand(2, 3, 16, 16)
    torch.manual_seed(0)
    trace = scaled_dot_product_attention(q, k, v, dropout_p=p)
    weights, dropped = trace.weights, trace.output
    assert torch.allclose(weights.sum(-1), torch.ones_like(weights.sum(-1)))  # kept pre-dropout
    zeroed = dropped == 0
    kept = ~zeroed
    assert torch.allclose(dropped[kept], weights[kept] / (1 - p), rtol=1e-12, atol=0)  # rescaled by 1/(1-p)
    assert (weights > 0).all()  # so a 0 in the output can only come from dropout
    assert 0.4 < zeroed.double().mean().item() < 0.6  # about p of the 1536 weights were zeroed
    assert torch.allclose(dropped.mean(), weights.mean(), rtol=0.1)  # rescaling keeps the expectation


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: (torch.randn(2, 3, 4, 8), torch.randn(2, 3, 5, 7), torch.randn(2, 3, 5, 6), {}), "last dim"),
        (lambda: (torch.randn(2, 3, 4, 8), torch.randn(2, 3, 5, 8), torch.randn(2, 3, 6, 6), {}), "sequence dim"),
        (
            lambda: (
                torch.randn(3, 4, 8),
                torch.randn(3, 5, 8),
                torch.randn(3, 5, 6),
                {"attn_mask": torch.ones(3, 4, dtype=torch.bool)},
            ),
            "broadcast",
        ),
        (
            lambda: (
                torch.randn(3, 4, 8),
                torch.randn(3, 4, 8),
                torch.randn(3, 4, 8),
                {"attn_mask": torch.ones(4, 4, dtype=torch.bool), "is_causal": True},
            ),
            "not both",
        ),
        (lambda: (torch.ones(3, 4, 8, dtype=torch.int64),) * 3 + ({},), "floating"),
        (
            lambda: (torch.randn(1, 6, 4, 8), torch.randn(1, 4, 4, 8), torch.randn(1, 4, 4, 8), {"enable_gqa": True}),
            "divisible",
        ),
        (lambda: (torch.randn(1, 6, 4, 8), torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8), {}), "enable_gqa"),
        (
            lambda: (
                torch.randn(3, 4, 8),
                torch.randn(3, 4, 8),
                torch.randn(3, 4, 8),
                {"attn_mask": torch.ones(4, 4, dtype=torch.int32)},
            ),
            "bool",
        ),
    ],
)
def test_bad_input_raises_value_error_naming_shapes(make, message):
    q, k, v, kw = make()
    with pytest.raises(ValueError, match=message) as err:
        scaled_dot_product_attention(q, k, v, **kw)
    assert "(" in str(err.value)  # a shape is named
