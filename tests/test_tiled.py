"""Tiled attention (online softmax) against the full core, torch's own SDPA and a hand-worked example.

References are independent of the code under test: torch's SDPA, the full from-scratch core (one
softmax over the whole row), exp() worked by hand. Memory is measured with analysis.AllocationMeter
(every storage torch allocates while a call runs), never computed from shapes.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_core import __main__ as cli
from attention_core import masks, scaled_dot_product_attention
from attention_core.analysis import AllocationMeter
from attention_core.tiled import TiledComparison, tiled_attention

ROOT = Path(__file__).resolve().parents[1]
TOL = {torch.float32: 1e-6, torch.float64: 1e-12}
L, S = 37, 29  # neither 7 nor 13 divides them
BLOCKS = [(7, 13), (13, 7), (1, 1), (1, 64), (64, 64)]  # uneven, one row/key at a time, one block >= n


def rand(*shape, dtype=torch.float64, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def qkv(num_queries=L, num_keys=S, *, batch=(2, 3), kv_heads=None, E=8, Ev=6, dtype=torch.float64):
    kv_batch = batch if kv_heads is None else (*batch[:-1], kv_heads)
    return (
        rand(*batch, num_queries, E, dtype=dtype, seed=1),
        rand(*kv_batch, num_keys, E, dtype=dtype, seed=2),
        rand(*kv_batch, num_keys, Ev, dtype=dtype, seed=3),
    )


def _some_rows_empty() -> torch.Tensor:
    allowed = torch.rand(L, S, generator=torch.Generator().manual_seed(4)) > 0.4  # (L, S)
    allowed[[0, 5, 36]] = False  # three queries see no key at all
    return allowed


def _float_with_empty_rows() -> torch.Tensor:
    added = masks.to_additive(_some_rows_empty(), dtype=torch.float64)  # 0 or -inf
    return added + rand(L, S, seed=5)  # plus a finite bias where allowed


def _padding() -> torch.Tensor:
    keep = torch.ones(2, S, dtype=torch.long)  # (B, S) 1 = real token
    keep[0, 20:] = 0  # the first sequence is padded after 20 tokens
    keep[1, :] = 0  # the second is all padding: every row of it is empty
    return masks.padding(keep, num_queries=L)  # (B, 1, L, S)


# name -> keyword arguments for both calls (masks built for L queries and S keys, float64)
CASES = {
    "no mask": lambda: {},
    "causal": lambda: {"is_causal": True},
    "padding": lambda: {"attn_mask": _padding()},
    "sliding window": lambda: {"attn_mask": masks.sliding_window(L, S, width=4)},
    "causal sliding window": lambda: {"attn_mask": masks.sliding_window(L, S, width=3, causal=True)},
    "all-masked rows": lambda: {"attn_mask": _some_rows_empty()},
    "every key masked": lambda: {"attn_mask": torch.zeros(L, S, dtype=torch.bool)},
    "float mask": lambda: {"attn_mask": rand(2, 3, L, S, seed=6)},
    "float mask with -inf rows": lambda: {"attn_mask": _float_with_empty_rows()},
    "float mask -1e9": lambda: {"attn_mask": masks.to_additive(masks.causal(L, S), fill=-1e9, dtype=torch.float64)},
    "scale": lambda: {"is_causal": True, "scale": 0.3},
}


def _cast(kwargs, dtype):
    mask = kwargs.get("attn_mask")
    if mask is not None and mask.dtype != torch.bool:
        kwargs = {**kwargs, "attn_mask": mask.to(dtype)}
    return kwargs


def assert_matches_references(q, k, v, dtype, *, block_q, block_k, **kwargs):
    tiled = tiled_attention(q, k, v, block_q=block_q, block_k=block_k, **kwargs).output
    full = scaled_dot_product_attention(q, k, v, **kwargs).output
    torch_ref = F.scaled_dot_product_attention(q, k, v, **kwargs)
    assert tiled.shape == full.shape == torch_ref.shape and tiled.dtype == dtype
    assert torch.isfinite(tiled).all()
    assert (tiled - full).abs().max().item() <= TOL[dtype]
    assert (tiled - torch_ref).abs().max().item() <= TOL[dtype]
    return tiled


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("block_q,block_k", BLOCKS)
@pytest.mark.parametrize("case", list(CASES))
def test_matches_full_core_and_torch(case, block_q, block_k, dtype):
    q, k, v = qkv(dtype=dtype)
    assert_matches_references(q, k, v, dtype, block_q=block_q, block_k=block_k, **_cast(CASES[case](), dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("num_queries,num_keys", [(37, 29), (29, 37), (1, 40), (40, 1)])
def test_causal_with_l_not_s(num_queries, num_keys, dtype):
    q, k, v = qkv(num_queries, num_keys, dtype=dtype)
    for block_q, block_k in BLOCKS:
        assert_matches_references(q, k, v, dtype, block_q=block_q, block_k=block_k, is_causal=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("block_q,block_k", BLOCKS)
def test_grouped_query_heads(block_q, block_k, dtype):
    q, k, v = qkv(batch=(2, 6), kv_heads=2, dtype=dtype)  # 6 query heads share 2 key/value heads
    for kwargs in ({}, {"is_causal": True}, {"attn_mask": _some_rows_empty()}):
        assert_matches_references(q, k, v, dtype, block_q=block_q, block_k=block_k, enable_gqa=True, **kwargs)


def test_fewer_dims_and_broadcast_heads():
    q, k, v = qkv(batch=(3,))  # (H, L, E), no batch dim
    assert_matches_references(q, k, v, torch.float64, block_q=7, block_k=13, attn_mask=_some_rows_empty()[None])
    q2, k2, v2 = rand(L, 8, seed=1), rand(S, 8, seed=2), rand(S, 5, seed=3)  # (L, E): one head
    assert_matches_references(q2, k2, v2, torch.float64, block_q=13, block_k=7, is_causal=True)
    one_key_head = qkv(batch=(2, 3), kv_heads=1)  # one key/value head broadcast over 3 query heads
    assert_matches_references(*one_key_head, torch.float64, block_q=7, block_k=7, attn_mask=_padding())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_is_computed_in_float32_like_the_full_core(dtype):
    q, k, v = qkv(dtype=dtype)
    tiled = tiled_attention(q, k, v, is_causal=True, block_q=7, block_k=13).output
    full = scaled_dot_product_attention(q, k, v, is_causal=True).output
    assert tiled.dtype == dtype
    assert (tiled.float() - full.float()).abs().max().item() <= 2 * torch.finfo(dtype).eps


def test_all_masked_rows_are_exactly_zero_as_in_the_full_core():
    q, k, v = qkv(dtype=torch.float32)
    allowed = _some_rows_empty()
    tiled = tiled_attention(q, k, v, allowed, block_q=4, block_k=5).output
    full = scaled_dot_product_attention(q, k, v, allowed)
    assert full.empty_rows[..., [0, 5, 36], :].all()
    assert torch.equal(tiled[..., [0, 5, 36], :], torch.zeros_like(tiled[..., [0, 5, 36], :]))
    assert torch.equal(full.output[..., [0, 5, 36], :], tiled[..., [0, 5, 36], :])


# ---------------------------------------------------------------- the per-step record


def test_record_final_partial_is_the_output_and_rescale_in_0_1():
    q, k, v = qkv()
    trace = tiled_attention(q, k, v, _some_rows_empty(), block_q=7, block_k=13, record=True)
    assert len(trace.steps) == math.ceil(L / 7) * math.ceil(S / 13)  # every tile, in order
    assert [(s.q_block, s.k_block) for s in trace.steps[:4]] == [(0, 0), (0, 1), (0, 2), (1, 0)]
    for step in trace.steps:
        assert ((step.rescale > 0) & (step.rescale <= 1)).all()
        assert step.m.shape == step.l.shape == step.rescale.shape == (2, 3, step.rows[1] - step.rows[0], 1)
        assert step.partial.shape == (2, 3, step.rows[1] - step.rows[0], 6)
    by_block: dict[int, list] = {}
    for step in trace.steps:
        by_block.setdefault(step.q_block, []).append(step)
    for steps in by_block.values():
        for before, after in zip(steps, steps[1:], strict=False):
            assert (after.m >= before.m).all()  # the running max never falls
            assert torch.equal(after.rescale, torch.exp(before.m - after.m).nan_to_num(nan=1.0))
        last = steps[-1]
        assert torch.equal(last.partial, trace.output[..., last.rows[0] : last.rows[1], :])
    assert tiled_attention(q, k, v, block_q=7, block_k=13).steps == ()  # nothing kept unless asked


def test_causal_skips_key_blocks_after_every_query_of_the_block():
    q, k, v = qkv(8, 8)
    trace = tiled_attention(q, k, v, is_causal=True, block_q=4, block_k=4, record=True)
    assert [(s.q_block, s.k_block) for s in trace.steps] == [(0, 0), (1, 0), (1, 1)]
    assert torch.equal(trace.steps[0].partial, trace.output[..., :4, :])


def test_online_softmax_by_hand_2x3():
    """Two queries, three keys in key blocks {0, 1} and {2}; scale 1, so the scores are Q K^T.

    Q = I (2x2), so the scores are K^T:   row 0: [0, 2 | 1]    row 1: [1, 0 | 3]
    Values v0 = (1, 0), v1 = (0, 1), v2 = (10, 20).

    Row 0, step 1 (keys 0, 1): m = max(0, 2) = 2; l = e^(0-2) + e^(2-2) = e^-2 + 1; nothing seen before: rescale 1
           step 2 (key 2):     m = max(2, 1) = 2; rescale = e^(2-2) = 1; l = (e^-2 + 1) + e^(1-2)
    Row 1, step 1 (keys 0, 1): m = max(1, 0) = 1; l = e^0 + e^-1 = 1 + e^-1
           step 2 (key 2):     m = max(1, 3) = 3; rescale = e^(1-3) = e^-2; l = (1 + e^-1) e^-2 + e^0
    """
    e = math.exp
    q = torch.eye(2, dtype=torch.float64)  # (L=2, E=2)
    k = torch.tensor([[0.0, 1.0], [2.0, 0.0], [1.0, 3.0]], dtype=torch.float64)  # (S=3, E=2)
    v = torch.tensor([[1.0, 0.0], [0.0, 1.0], [10.0, 20.0]], dtype=torch.float64)  # (S=3, Ev=2)
    trace = tiled_attention(q, k, v, scale=1.0, block_q=2, block_k=2, record=True)
    first, second = trace.steps
    assert (first.q_block, first.k_block, second.k_block) == (0, 0, 1)
    assert first.m.flatten().tolist() == [2.0, 1.0]
    assert first.rescale.flatten().tolist() == [1.0, 1.0]
    torch.testing.assert_close(first.l.flatten(), torch.tensor([e(-2) + 1, 1 + e(-1)], dtype=torch.float64))
    partial_row0 = [e(-2) / (e(-2) + 1), 1 / (e(-2) + 1)]  # (e^-2 v0 + 1 v1) / l
    partial_row1 = [1 / (1 + e(-1)), e(-1) / (1 + e(-1))]  # (1 v0 + e^-1 v1) / l
    torch.testing.assert_close(first.partial, torch.tensor([partial_row0, partial_row1], dtype=torch.float64))
    assert second.m.flatten().tolist() == [2.0, 3.0]
    torch.testing.assert_close(second.rescale.flatten(), torch.tensor([1.0, e(-2)], dtype=torch.float64))
    l0, l1 = e(-2) + 1 + e(-1), (1 + e(-1)) * e(-2) + 1
    torch.testing.assert_close(second.l.flatten(), torch.tensor([l0, l1], dtype=torch.float64))
    row0 = [(e(-2) * 1 + e(-1) * 10) / l0, (1 + e(-1) * 20) / l0]  # sum of e^(s - m) v over all three keys / l
    row1 = [(e(-2) * 1 + 10) / l1, (e(-3) + 20) / l1]  # e^(1-3) v0 + e^(0-3) v1 + e^(3-3) v2
    torch.testing.assert_close(trace.output, torch.tensor([row0, row1], dtype=torch.float64), rtol=0, atol=1e-14)
    torch.testing.assert_close(second.partial, trace.output, rtol=0, atol=0)


def test_refuses_what_torch_refuses():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="block sizes"):
        tiled_attention(q, k, v, block_q=0)
    with pytest.raises(ValueError, match="not both"):
        tiled_attention(q, k, v, masks.causal(L, S), is_causal=True)
    with pytest.raises(ValueError, match="enable_gqa"):
        tiled_attention(*qkv(batch=(2, 6), kv_heads=2))


# ---------------------------------------------------------------- memory, measured


def measured_peak(call) -> int:
    with AllocationMeter() as meter:
        out = call()
    del out
    return meter.peak


def test_peak_memory_grows_as_n_for_tiled_and_n_squared_for_full():
    """Fit log(peak bytes) against log(n) at n = 512, 1024, 2048 (H = 1, E = 8, Ev = 128).

    Tiled keeps the output (n x Ev) plus one tile's scratch (a constant), so its exponent is near 1
    (a little under at small n, where the constant still shows); the full core keeps n x n matrices:
    near 2. The growth from one size to the next (constant removed) doubles for tiled and
    quadruples for the full core: exponents 1 and 2 almost exactly.
    """
    ns = (512, 1024, 2048)
    tiled, full = [], []
    for n in ns:
        g = torch.Generator().manual_seed(n)
        q, k = torch.randn(1, 1, n, 8, generator=g), torch.randn(1, 1, n, 8, generator=g)  # (1, 1, n, E)
        v = torch.randn(1, 1, n, 128, generator=g)  # (1, 1, n, Ev)
        tiled.append(measured_peak(lambda q=q, k=k, v=v: tiled_attention(q, k, v, block_q=16, block_k=256).output))
        full.append(measured_peak(lambda q=q, k=k, v=v: scaled_dot_product_attention(q, k, v).output))
    slope_tiled = float(np.polyfit(np.log(ns), np.log(tiled), 1)[0])
    slope_full = float(np.polyfit(np.log(ns), np.log(full), 1)[0])
    assert 0.8 <= slope_tiled <= 1.2, tiled
    assert 1.85 <= slope_full <= 2.15, full
    growth_tiled = math.log2((tiled[2] - tiled[1]) / (tiled[1] - tiled[0]))
    growth_full = math.log2((full[2] - full[1]) / (full[1] - full[0]))
    assert 0.95 <= growth_tiled <= 1.05, tiled
    assert 1.9 <= growth_full <= 2.1, full
    assert max(tiled) < 2048 * 2048 * 4  # below one (L, S) float32 matrix at the largest n


@pytest.mark.slow
def test_peak_memory_at_4096_is_far_below_the_full_core():
    """n = 4096, H = 12, E = 64, float32, blocks of 64 (about 10 s and 2.5 GB for the full core)."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 12, 4096, 64, generator=g) for _ in range(3))  # (1, H, n, E)
    tiled = measured_peak(lambda: tiled_attention(q, k, v).output)
    full = measured_peak(lambda: scaled_dot_product_attention(q, k, v).output)
    one_matrix = 12 * 4096 * 4096 * 4  # one (H, L, S) float32 score matrix
    assert full >= 2 * one_matrix  # the full core keeps its score matrices
    assert tiled * 8 <= full
    assert tiled < one_matrix / 32  # the output (12.6 MB) and tiles, nothing of n x n


def test_masked_tiled_call_never_holds_an_l_by_s_matrix():
    n = 1024
    q, k, v = qkv(n, n, batch=(1, 1), E=16, Ev=16, dtype=torch.float32)
    window = masks.sliding_window(n, width=64, causal=True)  # the caller's (L, S) mask is read tile by tile
    for kwargs in ({"is_causal": True}, {"attn_mask": window}):
        assert measured_peak(lambda kwargs=kwargs: tiled_attention(q, k, v, **kwargs).output) < n * n * 4 / 8


# ---------------------------------------------------------------- the command line


def test_cli_json_is_one_object_and_close_to_the_full_core():
    command = [sys.executable, "-m", "attention_core", "tiled", "--n", "100", "--block", "13", "--heads", "2"]
    done = subprocess.run([*command, "--dim", "16", "--seed", "3", "--json"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # exactly one JSON object on stdout
    assert set(result) == {f.name for f in TiledComparison.__dataclass_fields__.values()}
    assert set(result) == {
        "n",
        "block",
        "max_abs_diff",
        "peak_bytes_tiled",
        "peak_bytes_full",
        "seconds_tiled",
        "seconds_full",
    }
    assert (result["n"], result["block"]) == (100, 13)
    assert 0 <= result["max_abs_diff"] <= 1e-5
    assert 0 < result["peak_bytes_tiled"] < result["peak_bytes_full"]
    assert result["seconds_tiled"] > 0 and result["seconds_full"] > 0


def test_cli_table_and_exit_status(capsys, monkeypatch):
    assert cli.main(["tiled", "--n", "64", "--block", "7", "--heads", "1", "--dim", "8"]) == 0
    table = capsys.readouterr().out
    assert "max |tiled - full|" in table and "| tiled |" in table and "| full  |" in table
    import attention_core.tiled as tiled_module

    monkeypatch.setattr(tiled_module, "MAX_ABS_DIFF", -1.0)  # any difference now fails
    assert cli.main(["tiled", "--n", "16", "--block", "4", "--heads", "1", "--dim", "8", "--json"]) == 1
