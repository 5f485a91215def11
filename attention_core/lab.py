"""Numbers for the pitfalls lab: permutation, sparse-mask savings, live cost. Numpy out.

The variance and saturation curves live in analysis.py; this module wires them to the app's
controls (token ids, chosen encoding, seed) and returns plain arrays for viz/.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from . import analysis, masks, positional
from .multihead import init_weights, multi_head_self_attention


@dataclass(frozen=True)
class PermutationDemo:
    permutation: tuple[int, ...]  # new position k holds old token permutation[k]
    weights: np.ndarray  # (L, S) head 0, original order
    weights_shuffled: np.ndarray  # (L, S) head 0, shuffled input
    output: np.ndarray  # (L, Dv) original order
    output_shuffled: np.ndarray  # (L, Dv) computed from the shuffled input
    max_difference: float  # max |attn(P X) - P attn(X)|
    equivariant: bool


def permutation_demo(
    embeddings: torch.Tensor, encoding: str, permutation, *, d_k: int = 16, heads: int = 2, seed: int = 0
) -> PermutationDemo:
    """Self-attention of X and of X with its rows shuffled, with the chosen positional encoding.

    Position is attached AFTER shuffling (position 0 is whatever token now stands first), as in a
    real model: that is what makes the encodings break the symmetry.
    """
    x = embeddings.to(torch.float64)  # (L, D)
    length, d_model = x.shape
    weights = init_weights(d_model, d_k, heads, seed=seed, dtype=torch.float64, with_output=False)
    cos, sin = positional.rotary_cos_sin(length, d_k, dtype=torch.float64) if encoding == "rotary" else (None, None)

    def attend(t: torch.Tensor):
        if encoding == "sinusoidal":
            t = t + positional.sinusoidal(length, d_model, dtype=t.dtype)
        elif encoding == "learned":
            t = t + positional.learned(length, d_model, seed=seed, dtype=t.dtype)
        return multi_head_self_attention(
            t,
            weights,
            rotate=None if cos is None else (lambda z: positional.apply_rotary(z, cos, sin)),
            score_bias=positional.alibi_bias(heads, length, dtype=t.dtype) if encoding == "alibi" else None,
        )

    check = analysis.permutation_check(x, lambda t: attend(t).merged, permutation)
    perm = list(check.permutation)
    original, shuffled = attend(x), attend(x[perm])
    return PermutationDemo(
        permutation=check.permutation,
        weights=original.attention.weights[0].numpy(),
        weights_shuffled=shuffled.attention.weights[0].numpy(),
        output=original.merged.numpy(),
        output_shuffled=shuffled.merged.numpy(),
        max_difference=check.max_difference,
        equivariant=check.equivariant,
    )


@dataclass(frozen=True)
class SparseCost:
    n: np.ndarray  # (m,)
    entries: dict[str, np.ndarray]  # mask name -> (m,) allowed (query, key) pairs


def sparse_mask_entries(ns=(64, 128, 256, 512, 1024, 2048), *, window: int = 32, stride: int = 32) -> SparseCost:
    """How many score entries each pattern keeps: full n^2 against local and strided patterns."""
    patterns = {
        "full": lambda n: masks.full(n),
        "causal": lambda n: masks.causal(n),
        f"sliding window {window} (causal)": lambda n: masks.sliding_window(n, width=window, causal=True),
        f"strided {stride} (causal)": lambda n: masks.strided(n, stride=stride) & masks.causal(n),
        f"local + strided {window}/{stride}": lambda n: (
            masks.sliding_window(n, width=window, causal=True) | (masks.strided(n, stride=stride) & masks.causal(n))
        ),
    }
    entries = {name: np.array([int(make(n).sum()) for n in ns]) for name, make in patterns.items()}
    return SparseCost(n=np.asarray(ns), entries=entries)


@dataclass(frozen=True)
class CostTable:
    n: np.ndarray  # (m,)
    seconds: np.ndarray  # (m,) measured core time
    trace_bytes: np.ndarray  # (m,) bytes the trace holds (or CUDA peak)
    flops: np.ndarray  # (m,) analytic
    matrix_bytes: np.ndarray  # (m,) one (H, n, n) float32 matrix
    device: str


def cost_table(ns=(64, 128, 256, 512, 1024), *, heads: int = 12, d_k: int = 64, device="cpu", repeats=3) -> CostTable:
    """Measured time and memory of the core at each n, beside the analytic n^2 counts."""
    timings = [analysis.measure_core(n, heads=heads, d_k=d_k, device=device, repeats=repeats) for n in ns]
    costs = [analysis.attention_cost(n, d_k, heads) for n in ns]
    return CostTable(
        n=np.asarray(ns),
        seconds=np.array([t.seconds for t in timings]),
        trace_bytes=np.array([t.peak_bytes for t in timings]),
        flops=np.array([c.flops for c in costs]),
        matrix_bytes=np.array([c.matrix_bytes for c in costs]),
        device=str(device),
    )


def permutation_demo_for_ids(
    token_ids, encoding: str, permutation, *, d_model: int = 32, seed: int = 0
) -> PermutationDemo:
    """The permutation demo on seeded embeddings of real token ids (same word, same vector)."""
    from .pipeline import scratch_embeddings

    return permutation_demo(scratch_embeddings(token_ids, d_model, seed), encoding, permutation, seed=seed)


def shuffled_order(length: int, seed: int) -> tuple[int, ...]:
    """A seeded permutation of 0..length-1 that moves something whenever length > 1."""
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(length, generator=generator).tolist()
    if length > 1 and order == list(range(length)):
        order = order[1:] + order[:1]
    return tuple(order)


def encoding_table(encoding: str, length: int, d_model: int = 64, *, seed: int = 0) -> np.ndarray | None:
    """(n, d) the table an additive encoding puts on X; rotary as its angle table; None otherwise."""
    if encoding == "sinusoidal":
        return positional.sinusoidal(length, d_model).numpy()
    if encoding == "learned":
        return positional.learned(length, d_model, seed=seed).numpy()
    if encoding == "rotary":
        cos, _ = positional.rotary_cos_sin(length, d_model)
        return cos.numpy()
    if encoding == "alibi":
        return positional.alibi_bias(1, length)[0].numpy()
    return None


def head_temperature_curve(scores: np.ndarray, temperatures) -> analysis.SaturationCurve:
    """Entropy and gradient norm of one head's raw score rows as the divisor (temperature) grows."""
    return analysis.saturation_vs_temperature(torch.as_tensor(scores, dtype=torch.float64), temperatures)


def mask_patterns(n: int = 32, *, window: int = 4, stride: int = 4) -> dict[str, np.ndarray]:
    """Named boolean (n, n) patterns to draw side by side."""
    return {
        "full": masks.full(n).numpy(),
        "causal": masks.causal(n).numpy(),
        f"window {window}": masks.sliding_window(n, width=window, causal=True).numpy(),
        f"strided {stride}": (masks.strided(n, stride=stride) & masks.causal(n)).numpy(),
        f"block {window}": masks.block_local(n, block=window).numpy(),
    }
